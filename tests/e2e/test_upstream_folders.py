"""Upstream AgentEnv's own example bundle (mail-mcp from agentenv-framework's source: an env
folder with a Dockerfile, server.py and requirements.txt, a task of deploy_env +
env_outcome_verifier with a verify.py artifact), run unchanged by `agent-env run`, no
Docker: the folder's server runs as a local process in a virtualenv built from its
requirements (from the package index), behind our gateway."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from agentenv.rollout.store import RolloutStore

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / ".venv-upstream/src/agentenv_framework-0.9.1364/src/agent_env/examples/mail-mcp"


@pytest.fixture(scope="module")
def venv_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One virtualenv cache for the module (the build fetches upstream's protocol SDK)."""
    configured = os.environ.get("AGENTENV_VENV_DIR")
    return Path(configured) if configured else tmp_path_factory.mktemp("venvs")


def _bundle(tmp_path: Path) -> Path:
    if not (EXAMPLES / "envs" / "mail" / "server.py").is_file():
        pytest.skip(
            "upstream's framework source is not unpacked in .venv-upstream/ "
            "(python tests/conformance/upstream_venv.py does it; needs the package index)"
        )
    bundle = tmp_path / "mail-mcp"
    shutil.copytree(EXAMPLES, bundle)
    return bundle


def _mail_processes(bundle: Path) -> list[int]:
    server = str(bundle / "envs" / "mail" / "server.py")
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if server.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_upstream_mail_bundle_runs_unchanged_with_the_oracle(
    tmp_path: Path, venv_dir: Path, agent_env_command: list[str]
) -> None:
    bundle = _bundle(tmp_path)
    out = tmp_path / "run"
    done = subprocess.run(
        [*agent_env_command, "run", str(bundle), "--agent", "oracle", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "AGENTENV_VENV_DIR": str(venv_dir)},
    )
    if done.returncode != 0 and "could not install" in done.stdout + done.stderr:
        pytest.skip(f"the package index is not reachable: {done.stderr[-400:]}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "score 1.00" in done.stdout
    assert "1 passed," in done.stdout
    (record,) = RolloutStore(out).records()
    assert record.score == 1.0, record
    assert not _mail_processes(bundle), "the folder's server stopped with the run"


def test_a_requirement_that_cannot_be_installed_is_one_error(
    tmp_path: Path, venv_dir: Path, agent_env_command: list[str]
) -> None:
    bundle = _bundle(tmp_path)
    (bundle / "envs" / "mail" / "requirements.txt").write_text(
        "agentenv-no-such-package-xyz==0.0.1\n"
    )
    done = subprocess.run(
        [*agent_env_command, "run", str(bundle), "--agent", "oracle", "--out", str(tmp_path / "r")],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**os.environ, "AGENTENV_VENV_DIR": str(venv_dir)},
    )
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "agentenv-no-such-package-xyz" in said and "mail" in said
    assert "Traceback" not in said
    assert not _mail_processes(bundle)
