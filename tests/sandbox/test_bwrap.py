"""The bwrap sandbox against the real bubblewrap: a wall, not just a folder. Skipped with the
reason where bubblewrap is not installed (.ci/run installs Debian's `bubblewrap`)."""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import tempfile
import threading
from pathlib import Path

import pytest

from agentenv.sandbox import BwrapProvider, SandboxLimits

pytestmark = pytest.mark.skipif(
    BwrapProvider.unavailable() is not None, reason=str(BwrapProvider.unavailable())
)


def run(coro):
    return asyncio.run(coro)


def test_commands_run_in_the_workspace_and_can_write_only_there() -> None:
    # A folder of the host outside /tmp (which the sandbox replaces with its own).
    host = Path(tempfile.mkdtemp(dir="/var/tmp"))
    try:
        outside = host / "outside.txt"
        with BwrapProvider().create() as box:
            result = run(box.exec(f"pwd; echo in > inside.txt; echo out > {outside}; echo rc=$?"))
            assert result.stdout.splitlines()[0] == box.workdir
            assert (box.workspace / "inside.txt").read_text() == "in\n"
            assert "Read-only file system" in result.stderr and "rc=2" in result.stdout
        assert not outside.exists()
    finally:
        shutil.rmtree(host, ignore_errors=True)


def test_no_network_unless_asked() -> None:
    """A listener on the host's loopback: unreachable from the sandbox (its own network
    namespace has only its own loopback), reachable with network=True."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    probe = [
        "python3",
        "-c",
        f"import socket; socket.create_connection(('127.0.0.1', {port}), 3); print('reached')",
    ]
    try:
        with BwrapProvider().create() as box:
            closed = run(box.exec(probe))
        with BwrapProvider().create(network=True) as box:
            opened = run(box.exec(probe))
    finally:
        stop.set()
        thread.join()
        server.close()
    assert closed.exit_code != 0 and "reached" not in closed.stdout
    assert "ConnectionRefusedError" in closed.stderr or "OSError" in closed.stderr
    assert opened.ok and opened.stdout.strip() == "reached"


def test_its_own_pid_namespace_and_a_private_tmp() -> None:
    with BwrapProvider().create() as box:
        result = run(box.exec("echo $$; ls /proc | grep -c '^[0-9]'; ls /tmp"))
    pid, visible, *tmp = result.stdout.split()
    assert int(pid) < 10 and int(visible) < 10  # only its own processes
    assert tmp == [Path(box.workdir).name]  # /tmp holds nothing but its workspace
    assert os.getpid() > 10


def test_the_limits_apply_inside() -> None:
    with BwrapProvider().create(SandboxLimits(timeout=0.5, output_bytes=100)) as box:
        slow = run(box.exec("sleep 20"))
        loud = run(box.exec("yes | head -c 100000"))
    assert slow.timed_out and loud.truncated and len(loud.stdout) == 100


def test_workdir_and_mounts_place_folders_at_fixed_paths_inside() -> None:
    logs = Path(tempfile.mkdtemp())
    try:
        with BwrapProvider().create(workdir="/app", mounts={"/logs/verifier": logs}) as box:
            (box.workspace / "data.txt").write_text("seed\n")
            result = run(
                box.exec("pwd; cat data.txt; echo 1 > /logs/verifier/reward.txt; echo $HOME")
            )
            assert result.stdout.split() == ["/app", "seed", "/app"]
            assert (logs / "reward.txt").read_text() == "1\n"
            (box.workspace / "sub").mkdir()
            assert run(box.exec("pwd", cwd="sub")).stdout.strip() == "/app/sub"
    finally:
        shutil.rmtree(logs, ignore_errors=True)


def test_a_relative_workdir_or_a_missing_mount_is_refused() -> None:
    from agentenv.sandbox import SandboxError

    with pytest.raises(SandboxError, match="must be absolute"):
        BwrapProvider().create(workdir="app")
    with pytest.raises(SandboxError, match="no such folder to mount"):
        BwrapProvider().create(mounts={"/logs": "/nonexistent/here"})
