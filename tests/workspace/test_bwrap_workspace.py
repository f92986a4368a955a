"""A workspace in the bwrap sandbox at a fixed workdir: commands see the tree at /app, cannot
write the host, and have no network. Skipped with the reason where bubblewrap is missing."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentenv.sandbox import BwrapProvider

pytestmark = pytest.mark.skipif(
    BwrapProvider.unavailable() is not None, reason=str(BwrapProvider.unavailable())
)

BLOCK = {
    "seed": {"files": {"README.md": "hello\n", "src/app.py": "print('app')\n"}},
    "sandbox": {"provider": "bwrap", "workdir": "/app", "timeout": 20},
}


@pytest.fixture
def app(session_of):
    return session_of(BLOCK)


@pytest.fixture
def listener() -> Iterator[int]:
    """A socket listening on 127.0.0.1 (its port)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def _connect(port: int) -> str:
    return (
        'python3 -c "import socket; '
        f"socket.create_connection(('127.0.0.1', {port}), timeout=1); print('connected')\""
    )


async def test_commands_see_the_tree_at_the_workdir(app) -> None:
    value = await app.ok("bash", command="pwd; cat /app/README.md; python3 src/app.py")
    assert value["exit_code"] == 0, value
    assert value["stdout"] == "/app\nhello\napp\n"


async def test_file_tools_take_paths_under_the_workdir(app) -> None:
    assert await app.ok("read_file", path="/app/README.md") == "hello\n"
    await app.ok("write_file", path="/app/out/new.txt", content="n\n")
    assert app.state.get("files", "out/new.txt")["content"] == "n\n"
    assert "outside the workspace" in await app.fails("read_file", path="/etc/hostname")
    # A link to the tree's absolute path inside the sandbox stays in the tree.
    await app.ok("bash", command="ln -s /app/README.md abs_link && ln -s /etc/passwd etc_link")
    assert await app.ok("read_file", path="abs_link") == "hello\n"
    assert "leads out of the workspace" in await app.fails("read_file", path="etc_link")


async def test_writing_outside_the_tree_fails_and_reaches_nothing(app) -> None:
    target = Path("/var/tmp") / f"agentenv-escape-test-{uuid.uuid4().hex}"
    try:
        value = await app.ok("bash", command=f"echo x > {target}; echo rc=$?")
        assert "Read-only file system" in value["stderr"]
        assert value["stdout"].startswith("rc=") and value["stdout"] != "rc=0\n"
        assert not target.exists()
        assert value["changed"] == {"added": [], "modified": [], "removed": []}
    finally:
        if target.exists():
            target.unlink()


async def test_commands_have_no_network(app, listener: int) -> None:
    value = await app.ok("bash", command=_connect(listener))
    assert value["exit_code"] != 0
    assert "connected" not in value["stdout"]


async def test_the_same_connection_works_outside_bwrap(session_of, listener: int) -> None:
    # The control for the test above: the listener is reachable from an unsandboxed command.
    local = session_of({"seed": {"files": {"a": "a"}}, "sandbox": {"provider": "local"}})
    value = await local.ok("bash", command=_connect(listener))
    assert value["exit_code"] == 0, value
    assert value["stdout"] == "connected\n"


async def test_bash_changes_under_bwrap_reach_the_state(app) -> None:
    value = await app.ok(
        "bash", command="echo made > made.txt && chmod +x made.txt && rm README.md"
    )
    assert value["changed"] == {"added": ["made.txt"], "modified": [], "removed": ["README.md"]}
    assert app.state.get("files", "made.txt")["mode"] == "100755"
    assert app.state.get("files", "README.md") is None


async def test_the_host_tmp_is_not_the_sandbox_tmp(app) -> None:
    marker = Path("/tmp") / f"agentenv-tmp-test-{uuid.uuid4().hex}"
    marker.write_text("host")
    try:
        value = await app.ok("bash", command=f"cat {marker}; echo in > {marker}; echo rc=$?")
        assert "host" not in value["stdout"]
        assert marker.read_text() == "host"
    finally:
        os.unlink(marker)
