"""The virtual clock for server children: `env_get_time_url` and the clock's `sync_time`.

Upstream's gateway hands every environment server whose card advertises the clock
extension (`urn:agentenv:clock/v1` with a `sync_time` method) an `env_get_time_url`; the
server GETs it for `{"virtual_time": ...}` whenever it needs the time, so its own answers
(dates on records, "today") follow the gateway's virtual clock instead of the wall.

Our gateway usually runs in the caller's process with no HTTP server at all, so the URL is
served here: one small loopback HTTP server per Python process (uvicorn, on the children's
loop, started the first time a child needs it), with one unguessable path per instance
(`/clock/<token>/time`) that reads that instance's clock. The runtime syncs a child lazily,
before the first call that finds the instance's clock armed, and again for a replacement
child after a crash; the URL stays the instance's until it is dropped, and the child reads
the live clock through it, so setting or advancing the clock later needs no new sync.
Children without the extension (plain MCP servers) are left alone: they see wall time.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
from collections.abc import Callable
from datetime import datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentenv.env.servers.agentenv import find_extension, invoke_extension
from agentenv.env.servers.base import Child, ServerError

CLOCK_EXTENSION = "urn:agentenv:clock/v1"
"""The card extension a server advertises to be given the virtual clock."""

SYNC_METHOD = "sync_time"
"""Its method that takes `{"env_get_time_url": ...}`."""

ClockSource = Callable[[], datetime | None]
"""How the time service reads one instance's clock: its virtual time, None while unarmed."""

_log = logging.getLogger("agentenv.env.servers")


def wants_clock(child: Child) -> bool:
    """Whether the child's card advertises the clock extension's `sync_time`."""
    ext = find_extension(child.card or {}, CLOCK_EXTENSION)
    methods = ((ext or {}).get("params") or {}).get("methods") or {}
    return SYNC_METHOD in methods


def _wire(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


class TimeService:
    """The loopback HTTP server children read virtual time from (one per process)."""

    def __init__(self) -> None:
        self._sources: dict[str, ClockSource] = {}
        self._base: str | None = None
        self._starting: asyncio.Future[str] | None = None
        self._server: Any = None

    async def _time(self, request: Request) -> JSONResponse:
        source = self._sources.get(request.path_params["token"])
        if source is None:
            return JSONResponse({"ok": False, "error": "no such clock"}, status_code=404)
        now = source()
        if now is None:
            return JSONResponse({"ok": False, "error": "clock not armed"}, status_code=404)
        return JSONResponse({"virtual_time": _wire(now)})

    async def _start(self) -> str:
        import uvicorn  # only a process whose children take the clock pays for it

        app = Starlette(routes=[Route("/clock/{token}/time", self._time, methods=["GET"])])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
        server = uvicorn.Server(config)
        task = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()  # the reason it could not start
                raise ServerError("the clock service stopped as it started")
            await asyncio.sleep(0.01)
        self._server = (server, task)
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    async def url_for(self, source: ClockSource) -> tuple[str, str]:
        """A new URL reading `source`, and its token (to `forget` it); starts the server
        the first time. Runs on the children's loop."""
        if self._base is None:
            if self._starting is None:
                self._starting = asyncio.ensure_future(self._start())
            try:
                self._base = await asyncio.shield(self._starting)
            except BaseException:
                self._starting = None
                raise
        token = secrets.token_urlsafe(16)
        self._sources[token] = source
        return f"{self._base}/clock/{token}/time", token

    def forget(self, token: str) -> None:
        """Stop answering a URL (its instance was dropped)."""
        self._sources.pop(token, None)


SERVICE = TimeService()
"""The process's time service."""


async def sync_child(child: Child, url: str) -> bool:
    """Hand `url` to a child that advertises the clock (its `sync_time`); whether it took
    it. A child that refuses is logged, not fatal: its tools still answer, in wall time."""
    try:
        await invoke_extension(child, CLOCK_EXTENSION, SYNC_METHOD, {"env_get_time_url": url})
    except ServerError as exc:
        _log.warning("%s: sync_time failed, it keeps wall time: %s", child.label, exc)
        return False
    return True
