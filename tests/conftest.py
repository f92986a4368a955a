"""Fixtures every test package may use: the `agent-env` command and free loopback ports."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def agent_env_command() -> list[str]:
    """How to run this checkout's `agent-env` as a process: the installed script beside
    this interpreter, else the CLI's entry function through `python -c`."""
    script = Path(sys.executable).parent / "agent-env"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from agentenv.cli import main; main()"]


@pytest.fixture(scope="session")
def loopback_port() -> Callable[[], int]:
    """A function giving a port that is free on 127.0.0.1 now."""

    def pick() -> int:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])

    return pick
