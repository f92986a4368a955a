"""The folder backend: an upstream AgentEnv environment folder run here as a local process.

An upstream folder holds a `Dockerfile`, a `server.py` and a `requirements.txt`; its
`server.py` serves an AgentEnv environment server (card at `/.well-known/agent-env.json`,
MCP at `/mcp`) on the address in `MCP_HOST` / `MCP_PORT`. We do not need Docker for it:
`prepare()` builds (or finds cached) a virtualenv from its requirements (`venvs.py`), or
uses `server.python` as is; `start()` runs `<python> server.py` in the folder on a free
port of 127.0.0.1, with stderr to a log file, and connects to it as an AgentEnv server.
Closing the child stops the process and its whole process group.

`docker: true` asks for the Dockerfile to be used instead; that is not done here (a clear
ServerError says so when no Docker daemon is reachable, and that it is not supported).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from agentenv.env.servers.agentenv import AgentEnvChild, connect_agentenv
from agentenv.env.servers.base import ServerBackend, ServerError
from agentenv.env.servers.stdio import make_workspace, process_env
from agentenv.env.servers.venvs import ensure_venv, find_python, venv_python
from agentenv.spec.server import ServerSpec

_STOP_WAIT_S = 5.0


def free_port() -> int:
    """A port of 127.0.0.1 that nothing listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def docker_available() -> bool:
    """Whether a Docker client is on PATH and its daemon answers."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run([docker, "info"], capture_output=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """Stop a process we started in a session of its own, and its whole group: SIGTERM,
    then SIGKILL after a grace period; reaps it. Idempotent."""
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(_STOP_WAIT_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)  # stragglers of the group, if any
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(_STOP_WAIT_S)


async def stop_in_thread(process: subprocess.Popen[bytes]) -> None:
    """`stop_process` off the loop; in the loop itself when the interpreter is exiting (its
    thread pools take no new work then, and the processes must still stop)."""
    try:
        await asyncio.to_thread(stop_process, process)
    except RuntimeError:
        stop_process(process)


@dataclass
class FolderChild(AgentEnvChild):
    """An AgentEnv child whose server is a process we started from a folder; closing it
    stops that process (and its process group)."""

    async def close(self) -> None:
        """Leave the session, then stop the process."""
        try:
            await super().close()
        finally:
            process = self.extra.pop("process", None)
            if process is not None:
                await stop_in_thread(process)


class FolderBackend(ServerBackend):
    """`server.folder`: an upstream environment folder, run as a local process."""

    name = "folder"
    starts_processes = True

    def __init__(self, spec: ServerSpec, base: Path, document: Path | None) -> None:
        super().__init__(spec, base, document)
        self.python: str | None = None
        """The interpreter `server.py` runs with, known after `prepare()`."""

    @property
    def folder(self) -> Path:
        """The environment folder, absolute."""
        return (self.base / (self.spec.folder or ".")).resolve()

    def describe(self) -> str:
        """`python server.py` in the folder."""
        return f"{self.folder}/server.py"

    def _where(self) -> str:
        return f"{self.document}: " if self.document else ""

    async def prepare(self) -> None:
        """Check the folder and get its interpreter: `server.python` as given, else the
        cached virtualenv built from its requirements.txt (built now if missing)."""
        if self.spec.docker:
            if not await asyncio.to_thread(docker_available):
                raise ServerError(
                    f"{self._where()}server.docker: Docker is not available here (no docker "
                    f"client on PATH or no daemon answering); drop 'docker: true' to run "
                    f"{self.folder} as a local process"
                )
            raise ServerError(
                f"{self._where()}server.docker: running a folder with Docker is not supported "
                f"yet; drop 'docker: true' to run {self.folder} as a local process"
            )
        folder = self.folder
        if not (folder / "server.py").is_file():
            raise ServerError(f"{self._where()}server.folder: no server.py in {folder}")
        if self.spec.python:
            self.python = find_python(self.spec.python)
            return
        requirements = folder / "requirements.txt"
        try:
            venv = await asyncio.to_thread(
                ensure_venv, requirements if requirements.is_file() else None
            )
        except ServerError as exc:
            raise ServerError(f"{self._where()}environment folder {folder}: {exc}") from None
        self.python = str(venv_python(venv))

    async def start(self, log_dir: Path) -> AgentEnvChild:
        """Run `server.py` on a free port, wait for its card, and connect to it."""
        if self.python is None:
            await self.prepare()
        assert self.python is not None
        spec = self.spec
        workspace = make_workspace(spec.workspace, self.base, spec.prepare, spec.env)
        port = free_port()
        env = process_env(spec.env, workspace)
        env.update({"MCP_HOST": "127.0.0.1", "MCP_PORT": str(port), "PYTHONUNBUFFERED": "1"})
        log_dir.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix="server-", suffix=".log", dir=log_dir)
        log_path = Path(name)
        argv = [self.python, str(self.folder / "server.py")]
        try:
            with os.fdopen(fd, "wb") as log:
                process = subprocess.Popen(
                    argv,
                    cwd=self.folder,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError as exc:
            shutil.rmtree(workspace, ignore_errors=True)
            raise ServerError(f"{self._where()}cannot run {argv!r}: {exc.strerror}") from None
        label = f"{self.describe()} (pid {process.pid})"
        base_url = f"http://127.0.0.1:{port}"
        try:
            await self._wait_for_port(process, port, log_path, label)
            child = await connect_agentenv(
                base_url,
                spec,
                label=label,
                log_path=log_path,
                process_alive=lambda: process.poll() is None,
                workspace=workspace,
                child_class=FolderChild,
                extra={"process": process},
            )
        except BaseException as exc:
            await stop_in_thread(process)
            shutil.rmtree(workspace, ignore_errors=True)
            if isinstance(exc, ServerError) and not isinstance(exc, _Exited):
                tail = _tail(log_path)
                if tail and tail not in str(exc):
                    raise ServerError(
                        f"{exc}\nlast lines of its log ({log_path}):\n{tail}"
                    ) from None
            raise
        return child

    async def _wait_for_port(
        self, process: subprocess.Popen[bytes], port: int, log_path: Path, label: str
    ) -> None:
        """Wait until the port accepts connections; ServerError with the log's tail if the
        process exits first or the startup timeout passes."""
        deadline = time.monotonic() + self.spec.startup_timeout
        while True:
            code = process.poll()
            if code is not None:
                raise _Exited(
                    f"{self._where()}{label} exited with {code} while starting; "
                    f"its log is {log_path}"
                    + (f"\nlast lines of its log:\n{tail}" if (tail := _tail(log_path)) else "")
                )
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
                return
            if time.monotonic() > deadline:
                raise ServerError(
                    f"{self._where()}{label} did not listen on 127.0.0.1:{port} within "
                    f"{self.spec.startup_timeout:g} s; its log is {log_path}"
                    + (f"\nlast lines of its log:\n{tail}" if (tail := _tail(log_path)) else "")
                )
            await asyncio.sleep(0.1)


class _Exited(ServerError):
    """The server process ended while starting (its message already holds the log)."""


def _tail(log_path: Path, lines: int = 20) -> str:
    """The last lines of a log file ('' if none)."""
    try:
        text = log_path.read_bytes()[-16384:].decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
