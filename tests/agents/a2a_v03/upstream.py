"""The upstream side of the A2A 0.3 tests: a virtualenv with upstream's protocol package
(a2a-sdk 0.3) at `<repo>/.venv-upstream`, made when missing, and its processes.

The venv is the conformance suite's: tests/conformance/upstream_venv.py builds it (one
path, one pin, the `AGENTENV_UPSTREAM_VENV` override). When it cannot be built (no
network for pip), the tests that need it are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
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
HERE = Path(__file__).resolve().parent
CLIENT_DRIVER = HERE / "client_driver.py"
ECHO_AGENT = HERE / "echo_agent.py"
PROBE = (
    "import a2a, agentenv_protocol.a2a_agent, importlib.metadata as m; print(m.version('a2a-sdk'))"
)


def _builder() -> Any:
    """tests/conformance/upstream_venv.py, the one builder of the upstream venv (loaded by path)."""
    path = REPO / "tests" / "conformance" / "upstream_venv.py"
    spec = importlib.util.spec_from_file_location("agentenv_upstream_venv", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


def upstream_python() -> Path:
    """The upstream venv's python (built by the conformance suite's builder when needed).

    Skips, saying why, when the venv cannot be built or its a2a-sdk is not the 0.3 these
    tests are about.
    """
    builder = _builder()
    try:
        python: Path = builder.ensure_upstream().python
    except builder.UpstreamUnavailable as error:
        pytest.skip(f"upstream packages unavailable: {error}")
    probe = subprocess.run([str(python), "-c", PROBE], capture_output=True, text=True)
    if probe.returncode != 0:
        pytest.skip(
            f"{python} has upstream's packages but they do not import: {probe.stderr[-300:]}"
        )
    version = probe.stdout.strip()
    if not version.startswith("0.3."):
        pytest.skip(f"{python} has a2a-sdk {version}, not the 0.3 these tests are about")
    return python


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
