"""A uvicorn server run as a task of the current event loop, on a free port.

For serving from inside a running program (a task run serving its gateway to a remote
agent, a test serving an agent): bind a socket to port 0 first, so there is no race for
the port, build the server for the port it got, serve as an asyncio task, and stop it
with a bounded wait. The server leaves the process's signal handlers alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

import uvicorn

STARTUP_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


class ServerStartError(RuntimeError):
    """The server did not start (its startup failed or took too long)."""


class BackgroundServer:
    """A started server; `url` is its base URL. Stop it with `await stop()`."""

    def __init__(self, server: uvicorn.Server, sock: socket.socket, task: asyncio.Task[None]):
        self.server = server
        self._sock = sock
        self._task = task
        host, port = sock.getsockname()[:2]
        self.host = host
        self.port = port
        shown = f"[{host}]" if ":" in host else host
        self.url = f"http://{shown}:{port}"

    @classmethod
    async def start(
        cls,
        build: Callable[[int], uvicorn.Server],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = STARTUP_TIMEOUT,
    ) -> BackgroundServer:
        """Bind `host:port` (0: any free port), build the server with `build(port)` and
        serve it in this loop; returns once it accepts connections."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            server = build(sock.getsockname()[1])
            # uvicorn would take over SIGINT/SIGTERM while serving: not ours to take.
            server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
            task = asyncio.create_task(server.serve(sockets=[sock]), name="uvicorn")
        except BaseException:
            sock.close()
            raise
        running = cls(server, sock, task)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + startup_timeout
        while not server.started:
            if task.done():
                sock.close()
                error = task.exception() if not task.cancelled() else None
                raise ServerStartError(f"the server did not start: {error or 'it exited'}")
            if loop.time() > deadline:
                await running.stop()
                raise ServerStartError(f"the server did not start within {startup_timeout:g} s")
            await asyncio.sleep(0.01)
        return running

    @property
    def running(self) -> bool:
        """Whether the server is still serving."""
        return not self._task.done()

    async def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop serving (open connections get the server's graceful shutdown, then are
        cut); returns within about `timeout` seconds. Safe to call twice."""
        self.server.should_exit = True
        try:
            if not self._task.done():
                try:
                    await asyncio.wait_for(asyncio.shield(self._task), timeout)
                except TimeoutError:
                    self.server.force_exit = True
                    self._task.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await asyncio.wait_for(self._task, 2)
            elif not self._task.cancelled():
                self._task.exception()  # retrieved: no "never retrieved" warning
        except Exception:
            pass
        finally:
            self._sock.close()
