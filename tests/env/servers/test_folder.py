"""The folder backend against real processes: an upstream-style environment folder (written
with upstream's protocol SDK, run with .venv-upstream's python), loaded, listed, called
through our gateway and closed with nothing left running; plus the failures."""

from __future__ import annotations

import os
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentenv.env.environment import Environment
from agentenv.env.servers import loop
from agentenv.env.servers.base import ServerError
from agentenv.env.servers.folder import FolderBackend, docker_available
from agentenv.env.servers.registry import backend_for
from agentenv.env.tool import Principal
from agentenv.gateway.gateway import Gateway
from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import load_environment_spec
from agentenv.spec.server import ServerSpec

FIXTURE = Path(__file__).parent / "upstream_folder"
UPSTREAM_PYTHON = Path(__file__).resolve().parents[3] / ".venv-upstream" / "bin" / "python"


def needs_upstream() -> str:
    """The upstream SDK's interpreter, or skip."""
    if not UPSTREAM_PYTHON.is_file():
        pytest.skip(f"no upstream protocol SDK virtualenv at {UPSTREAM_PYTHON}")
    return str(UPSTREAM_PYTHON)


def processes_running(marker: str) -> list[int]:
    """Pids of live processes whose command line mentions `marker`."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().split(")")[-1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            pids.append(int(entry.name))
    return pids


def _folder_doc(tmp_path: Path, name: str, python: str, extra: str = "") -> Path:
    """An environment document serving the `mail-like` copy of the fixture folder."""
    doc = tmp_path / "env.yaml"
    doc.write_text(
        "apiVersion: agentenv/v1\nkind: Environment\n"
        f"name: {name}\nserver: {{folder: mail-like, python: {python}, pool: 1}}\n" + extra
    )
    return doc


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A private copy of the fixture folder (a unique path to look for processes by)."""
    copy = tmp_path / "mail-like"
    shutil.copytree(FIXTURE, copy)
    return copy


def test_a_bare_upstream_folder_reads_as_a_folder_server(folder: Path) -> None:
    spec, file = load_environment_spec(folder)
    assert spec.name == "mail-like"
    assert spec.server is not None and spec.server.folder == "."
    assert spec.server.backend_name == "folder"
    assert file.parent == folder.resolve()
    backend = backend_for(spec.server, file.parent, file)
    assert isinstance(backend, FolderBackend) and backend.folder == folder.resolve()


def test_load_list_call_and_close(folder: Path, tmp_path: Path, monkeypatch) -> None:
    python = needs_upstream()
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    doc = _folder_doc(tmp_path, "folder-env", python)
    env = Environment.load(doc)
    try:
        assert "reverse" in env.tools
        assert processes_running(str(folder / "server.py"))
        gateway = Gateway(env)
        result = loop.run(gateway.call(Principal("agent"), "reverse", {"text": "abc"}))
        assert result.ok, result.error
        assert "cba" in result.text
    finally:
        env.close()
    assert processes_running(str(folder / "server.py")) == []


def test_a_server_that_takes_the_clock_follows_each_instances_virtual_time(
    folder: Path, tmp_path: Path, monkeypatch
) -> None:
    """The fixture advertises urn:agentenv:clock/v1 sync_time, as upstream's servers do: it
    is handed an env_get_time_url once the instance's clock is armed, and reads it after."""
    python = needs_upstream()
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    doc = _folder_doc(
        tmp_path, "clocked", python, "clock: {start: '2026-03-02T08:00:00Z', mode: stepped}\n"
    )
    env = Environment.load(doc)
    try:
        gateway = Gateway(env)
        agent = Principal("agent")

        async def times() -> list[str]:
            first = await gateway.call(agent, "what_time", {})
            gateway.create_instance("later")
            await gateway.set_clock(
                Principal("admin", admin=True),
                datetime(2030, 1, 1, 12, tzinfo=UTC),
                instance="later",
            )
            second = await gateway.call(agent, "what_time", {}, instance="later")
            again = await gateway.call(agent, "what_time", {})
            return [first.text, second.text, again.text]

        first, later, again = loop.run(times())
        assert "2026-03-02T08:00:00Z" in first
        assert "2030-01-01T12:00:00Z" in later  # its own instance, its own clock
        assert "2026-03-02T08:00" in again
    finally:
        env.close()


def test_without_an_armed_clock_a_server_keeps_wall_time(
    folder: Path, tmp_path: Path, monkeypatch
) -> None:
    python = needs_upstream()
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    doc = _folder_doc(tmp_path, "unclocked", python)
    env = Environment.load(doc)
    try:
        result = loop.run(Gateway(env).call(Principal("agent"), "what_time", {}))
        assert result.ok and "wall clock" in result.text
    finally:
        env.close()


def test_a_server_that_exits_at_start_shows_its_log(folder: Path, tmp_path: Path) -> None:
    (folder / "server.py").write_text(
        "import sys\nprint('no mailbox configured', file=sys.stderr)\nsys.exit(3)\n"
    )
    spec = ServerSpec(folder=str(folder), python=sys.executable, startup_timeout=20)
    backend = FolderBackend(spec, tmp_path, None)
    with pytest.raises(ServerError) as caught:
        loop.run(backend.start(tmp_path / "logs"))
    assert "no mailbox configured" in str(caught.value)
    assert "exited with 3" in str(caught.value)
    assert processes_running(str(folder / "server.py")) == []


def test_a_folder_without_server_py_is_refused(tmp_path: Path) -> None:
    spec = ServerSpec(folder=str(tmp_path), python=sys.executable)
    with pytest.raises(ServerError, match=r"no server\.py"):
        loop.run(FolderBackend(spec, tmp_path, None).prepare())


def test_unbuildable_requirements_name_the_folder(folder: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setenv("AGENTENV_VENV_DIR", str(tmp_path / "venvs"))
    (folder / "requirements.txt").write_text("./no-such-package-folder\n")
    backend = FolderBackend(ServerSpec(folder=str(folder)), tmp_path, None)
    with pytest.raises(ServerError) as caught:
        loop.run(backend.prepare())
    assert str(folder) in str(caught.value)
    assert "no-such-package-folder" in str(caught.value)


@pytest.mark.skipif(docker_available(), reason="a Docker daemon is reachable here")
def test_docker_without_a_daemon_says_so(folder: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    doc = tmp_path / "env.yaml"
    doc.write_text(
        "apiVersion: agentenv/v1\nkind: Environment\n"
        "name: dockered\nserver: {folder: mail-like, docker: true}\n"
    )
    with pytest.raises((ServerError, DocumentError), match="Docker is not available here"):
        Environment.load(doc)
