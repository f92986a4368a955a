"""`agent-env serve`'s banner tells the security mode the server will enforce: the real
process, its first line checked against how it then answers."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

CARD = "/.well-known/agent-env.json"
ENV_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: banner-desk
state:
  tickets:
    key: id
seed:
  tickets:
    - {id: T-1, subject: Printer on fire}
tools:
  - name: get_ticket
    crud: {collection: tickets, op: get}
"""


def agent_env() -> list[str]:
    script = Path(sys.executable).parent / "agent-env"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from agentenv.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(folder: Path, *options: str) -> Iterator[tuple[str, Path]]:
    """Run `agent-env serve` until its card answers on 127.0.0.1 (15 s at most); yields the
    base URL and the file its stdout goes to; always stops it."""
    port = free_port()
    out_path = folder / f"serve-{port}.out"
    with out_path.open("wb") as out:
        process = subprocess.Popen(
            [*agent_env(), "serve", str(folder), "--port", str(port), *options],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            assert process.poll() is None, out_path.read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url + CARD, timeout=1).status_code == 200:
                    break
            assert time.monotonic() < deadline, f"no card within 15 s:\n{out_path.read_text()}"
            time.sleep(0.1)
        yield url, out_path
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    (tmp_path / "env.yaml").write_text(ENV_YAML, encoding="utf-8")
    return tmp_path


def banner(out: Path) -> str:
    [line] = [line for line in out.read_text().splitlines() if "banner-desk on http" in line]
    return line


def test_beyond_loopback_without_tokens_the_banner_says_everything_is_refused(
    env_dir: Path,
) -> None:
    with serving(env_dir, "--host", "0.0.0.0") as (url, out):
        assert httpx.get(url + "/state").status_code == 401  # what the banner must say
        line = banner(out)
    assert "bearer tokens" not in line
    assert "no --token set" in line and "refused (401)" in line


def test_with_tokens_the_banner_names_the_roles(env_dir: Path) -> None:
    with serving(env_dir, "--token", "admin=s3cret", "--token", "agent=a9") as (url, out):
        assert httpx.get(url + "/state").status_code == 401
        headers = {"Authorization": "Bearer s3cret"}
        assert httpx.get(url + "/state", headers=headers).status_code == 200
        line = banner(out)
    assert "auth: bearer tokens (roles: admin, agent)" in line
    assert "s3cret" not in line


def test_on_loopback_without_tokens_the_banner_says_trusted_local(env_dir: Path) -> None:
    with serving(env_dir) as (url, out):
        headers = {"AgentEnv-Role": "anyone"}
        assert httpx.get(url + "/state", headers=headers).status_code == 200
        line = banner(out)
    assert "auth: trusted local (AgentEnv-Role header)" in line
