"""Upstream's own example bundles (agentenv-framework's src/agent_env/examples) through `agent-env validate`.

Each bundle is copied out of the unpacked sdist and validated with our CLI. What we do not build
must be named as unsupported, with the path of the field, in one message listing every problem;
never a schema error about a field upstream defines. The second point asks the examples whose
step types are all built here to validate as they are.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

BUNDLES = ["hello", "echo-mcp", "mail-mcp"]
BUILT_STEP_BUNDLES = ["echo-mcp", "mail-mcp"]
"""The examples whose step types are all built here (hello needs upstream's sandbox steps)."""
PROBLEM_LINE = "  steps["


@pytest.fixture(scope="module")
def validated(
    upstream: Any, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[int, str]]:
    """`agent-env validate` of each example, copied out of the sdist: bundle -> (exit code, output).

    The three runs go at once: each is a cold start of our CLI.
    """
    script = Path(sys.executable).parent / "agent-env"
    command = (
        [str(script)]
        if script.is_file()
        else [sys.executable, "-c", "from agentenv.cli import main; main()"]
    )
    runs = {}
    for bundle in BUNDLES:
        source = Path(upstream.gateway_parent).parent / "examples" / bundle
        if not source.is_dir():
            pytest.fail(f"upstream's sdist has no example bundle {bundle!r} at {source}")
        copy = tmp_path_factory.mktemp("examples") / bundle
        shutil.copytree(source, copy)
        runs[bundle] = subprocess.Popen(
            [*command, "validate", str(copy)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
    return {bundle: (run.wait(timeout=120), run.communicate()[0]) for bundle, run in runs.items()}


@pytest.mark.parametrize("bundle", BUNDLES)
def test_tasks_unsupported_is_named(bundle: str, validated: dict[str, tuple[int, str]]) -> None:
    """[tasks] Every problem in an upstream example is a named, located "not supported" (or none)."""
    code, output = validated[bundle]
    problems = [line for line in output.splitlines() if line.startswith(PROBLEM_LINE)]
    assert code == 0 or problems, output[-3000:]
    schema_errors = [line for line in problems if "not supported" not in line]
    assert not schema_errors, "\n".join(schema_errors)


@pytest.mark.parametrize("bundle", BUILT_STEP_BUNDLES)
def test_tasks_upstream_example_validates(
    bundle: str, validated: dict[str, tuple[int, str]]
) -> None:
    """[tasks] An upstream example bundle validates as it is (its envs are upstream env
    folders: Dockerfile + server.py on the protocol SDK, run as processes)."""
    code, output = validated[bundle]
    assert code == 0, output[-3000:]
