"""`agent-env rollout --backend ray` pointed at an address where no Ray cluster listens
exits at once with an error naming the address and what to check, where `ray.init` alone
would wait for minutes (the installed command in a fresh process, as a user runs it)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is not installed (pip install 'agentenv-kit[ray]')")

BUNDLE = Path(__file__).parents[2] / "examples" / "bundles" / "support-desk"
# Not a time limit on the check: only so that a regression (Ray waiting for minutes)
# fails this test instead of hanging the suite.
HANG_GUARD_S = 180


def agent_env() -> list[str]:
    """`agent-env` as installed; without the console script, the same entry point."""
    found = shutil.which("agent-env")
    return [found] if found else [sys.executable, "-c", "from agentenv.cli import main; main()"]


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A 127.0.0.1 port held bound but not listening: connecting is refused, and no other
    process can start listening there during the test."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


@pytest.mark.parametrize(
    ("how", "shown"),
    [
        ("--address", "127.0.0.1:{port}"),
        ("--address", "ray://127.0.0.1:{port}"),
        ("RAY_ADDRESS", "127.0.0.1:{port} (from RAY_ADDRESS)"),
    ],
)
def test_no_cluster_at_the_address_fails_at_once_with_what_to_check(
    closed_port: int, tmp_path: Path, how: str, shown: str
) -> None:
    address = shown.split(" ")[0].format(port=closed_port)
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["RAY_USAGE_STATS_ENABLED"] = "0"
    args = [str(BUNDLE), "--backend", "ray", "-o", str(tmp_path / "run"), "--no-progress"]
    if how == "RAY_ADDRESS":
        env["RAY_ADDRESS"] = address
    else:
        args += ["--address", address]
    proc = subprocess.run(
        [*agent_env(), "rollout", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        stdin=subprocess.DEVNULL,
    )
    message = " ".join(proc.stderr.split())  # the console wraps long lines
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert f"error: no Ray cluster at {shown.format(port=closed_port)}" in message
    assert f"cannot connect to 127.0.0.1:{closed_port} (connection refused)" in message
    assert "Check that the cluster is up" in message and "ray start --head" in message
    assert "Traceback" not in proc.stderr
