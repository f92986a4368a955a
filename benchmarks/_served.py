"""A benchmark's server in its own process, on a free loopback port.

Each wire benchmark runs the servers it compares as subprocesses of its own script (so
the load generator and the server do not share a GIL, and each server's CPU can be read
from /proc): `ServerProcess(which, [script, "--serve", which, ...])`.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from typing import Any

HOST = "127.0.0.1"


def free_port() -> int:
    """A loopback port free now."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class ServerProcess:
    """`python <args...> --port <free port>`, started now; `which` names it in messages."""

    def __init__(self, which: str, args: list[str], **popen: Any) -> None:
        self.which = which
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, *args, "--port", str(self.port)], **popen)

    @property
    def pid(self) -> int:
        """The server process's id."""
        return self.process.pid

    def wait_ready(self, timeout: float = 60) -> None:
        """Block until the server accepts connections (uvicorn listens once started)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"the {self.which} server did not start") from None
                time.sleep(0.1)

    def close(self) -> None:
        """Terminate the process and wait for it."""
        self.process.terminate()
        self.process.wait(timeout=30)
