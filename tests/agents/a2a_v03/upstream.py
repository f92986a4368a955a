"""The upstream side of the A2A 0.3 tests: a virtualenv with upstream's protocol package
(a2a-sdk 0.3) at `<repo>/.venv-upstream`, made when missing, and its processes.

The venv is shared with the conformance suite (same path, same pin, and the same
`AGENTENV_UPSTREAM_VENV` override). When it cannot be
made (no network for pip), the tests that need it are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

REPO = Path(__file__).resolve().parents[3]
VENV = Path(os.environ.get("AGENTENV_UPSTREAM_VENV") or REPO / ".venv-upstream")
"""Shared with tests/conformance (same path, same override, same pin)."""
PIN = "agentenv-framework-protocol[agent]==0.1.379"
HERE = Path(__file__).resolve().parent
CLIENT_DRIVER = HERE / "client_driver.py"
ECHO_AGENT = HERE / "echo_agent.py"
PROBE = (
    "import a2a, agentenv_protocol.a2a_agent, importlib.metadata as m; print(m.version('a2a-sdk'))"
)


def _python() -> Path:
    return VENV / "bin" / "python"


def _a2a_version() -> str | None:
    if not _python().exists():
        return None
    probe = subprocess.run([str(_python()), "-c", PROBE], capture_output=True, text=True)
    return probe.stdout.strip() if probe.returncode == 0 else None


def upstream_python() -> Path:
    """The venv's python (made, or completed, when needed); pytest.skip saying why not."""
    version = _a2a_version()
    if version is None:
        if not _python().exists():
            made = subprocess.run(
                [sys.executable, "-m", "venv", str(VENV)], capture_output=True, text=True
            )
            if made.returncode != 0:
                pytest.skip(f"cannot make {VENV}: {made.stderr.strip()[-300:]}")
        pip = subprocess.run(
            [str(_python()), "-m", "pip", "install", "-q", PIN],
            capture_output=True,
            text=True,
        )
        if pip.returncode != 0:
            pytest.skip(
                f"cannot install {PIN!r} into {VENV} (is the package index reachable?): "
                f"{pip.stderr.strip()[-300:]}"
            )
        version = _a2a_version()
        if version is None:
            pytest.skip(f"{VENV} has {PIN!r} but it does not import")
    if not version.startswith("0.3."):
        pytest.skip(f"{VENV} has a2a-sdk {version}, not the 0.3 these tests are about")
    return _python()


def free_port() -> int:
    """A free TCP port on 127.0.0.1."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def drive(python: Path, **args: Any) -> dict[str, Any]:
    """Run the a2a-sdk 0.3 client driver against an agent; its JSON answer."""
    proc = await asyncio.create_subprocess_exec(
        str(python),
        str(CLIENT_DRIVER),
        json.dumps(args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    assert proc.returncode == 0, f"the 0.3 client failed:\n{err.decode()[-3000:]}"
    return json.loads(out.decode().strip().splitlines()[-1])


@contextlib.asynccontextmanager
async def echo_agent(python: Path) -> AsyncIterator[str]:
    """Upstream's A2A framework serving `echo_agent.py` on a free port; its base URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # a file, not a pipe: a chatty server never blocks on it
    with tempfile.TemporaryFile() as log:
        proc = await asyncio.create_subprocess_exec(
            str(python),
            str(ECHO_AGENT),
            str(port),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
        )
        try:
            async with httpx.AsyncClient(timeout=2) as http:
                for _ in range(600):  # until it answers (or has died)
                    if proc.returncode is not None:
                        break
                    with contextlib.suppress(httpx.HTTPError):
                        if (
                            await http.get(url + "/.well-known/agent-card.json")
                        ).status_code == 200:
                            break
                    await asyncio.sleep(0.1)
                else:
                    raise AssertionError("upstream's echo agent never served its card")
            if proc.returncode is not None:
                log.seek(0)
                err = log.read().decode(errors="replace")
                raise AssertionError(f"upstream's echo agent died:\n{err[-3000:]}")
            yield url
        finally:
            if proc.returncode is None:
                proc.terminate()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(proc.wait(), 10)
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
