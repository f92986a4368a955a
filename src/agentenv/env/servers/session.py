"""`McpChild`: a Child that talks MCP through the official SDK's `ClientSession`.

The transports (stdio, Streamable HTTP) differ only in how the streams are opened, so a
backend hands `McpChild.open` an async context manager that yields them. The SDK's
contexts are anyio task groups, which must be entered and left by the same task: each child
therefore has one task of its own (on the children's loop) that opens the session, waits
until the child is closed, and leaves. Requests from other tasks use the open session.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from mcp import ClientSession
from mcp import types as mt
from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED

from agentenv.env.servers.base import Child, ChildGone, ServerError, ToolAnswer, ToolListing

StreamsFactory = Callable[[], contextlib.AbstractAsyncContextManager[Any]]
"""Opens a transport: an async context manager yielding (read_stream, write_stream, ...)."""


@dataclass(frozen=True)
class McpToolListing(ToolListing):
    """A listed tool with its MCP `outputSchema` (which says whether `structuredContent`
    wraps a plain value as `{"result": ...}`)."""

    output_schema: dict[str, Any] | None = None


_BROKEN = (
    anyio.ClosedResourceError,
    anyio.BrokenResourceError,
    anyio.EndOfStream,
    BrokenPipeError,
    ConnectionError,
    EOFError,
)


@dataclass
class McpChild(Child):
    """A child reached over MCP with one persistent `ClientSession`."""

    session: ClientSession | None = None
    process_alive: Callable[[], bool] | None = field(default=None, repr=False)
    """For processes we started: whether the process still runs."""
    _runner: asyncio.Task[None] | None = field(default=None, repr=False)
    _stop: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _broken: str | None = field(default=None, repr=False)

    @property
    def alive(self) -> bool:
        """Whether the session is open (and the process, if ours, runs)."""
        if self.session is None or self._broken or self._runner is None or self._runner.done():
            return False
        if _closed(self.session):
            return False
        return self.process_alive() if self.process_alive is not None else True

    async def open(self, streams: StreamsFactory, timeout: float) -> None:
        """Open the transport and initialise the session within `timeout` seconds;
        ServerError (with the stderr tail) if it cannot, leaving nothing running."""
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Its exception may land after a timeout or close stopped waiting: mark it seen.
        ready.add_done_callback(lambda f: f.cancelled() or f.exception())

        async def hold() -> None:
            try:
                async with streams() as opened, ClientSession(opened[0], opened[1]) as session:
                    await session.initialize()
                    self.session = session
                    ready.set_result(None)
                    await self._stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                else:
                    self._broken = f"{type(exc).__name__}: {exc}"
            finally:
                self.session = None

        self._runner = asyncio.create_task(hold(), name=f"agentenv-child {self.label}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), timeout)
        except BaseException as exc:
            await self.close()
            if isinstance(exc, TimeoutError):
                raise ServerError(self._failed(f"did not answer within {timeout:g} s")) from None
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise ServerError(self._failed(_reason(exc))) from None

    def _failed(self, what: str) -> str:
        tail = self.stderr_tail()
        return f"{self.label}: {what}" + (f"\nlast lines of its stderr:\n{tail}" if tail else "")

    def _gone(self, what: str, reached: bool) -> ChildGone:
        """A ChildGone for a broken session, which is marked broken (not `alive`)."""
        self._broken = self._broken or what
        return ChildGone(self._failed(what), reached=reached)

    def _session(self) -> ClientSession:
        if self.session is None or not self.alive:
            raise ChildGone(self._failed("the server is not running"), reached=False)
        return self.session

    async def list_tools(self) -> list[ToolListing]:
        """Every tool, following `nextCursor` pages."""
        session = self._session()
        out: list[ToolListing] = []
        cursor: str | None = None
        while True:
            params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
            try:
                page = await session.list_tools(params=params)
            except _BROKEN as exc:
                raise self._gone(f"tools/list failed: {_reason(exc)}", reached=True) from None
            except MCPError as exc:
                if _connection_closed(exc):
                    raise self._gone("the connection closed during tools/list", True) from None
                raise ServerError(self._failed(f"tools/list was refused: {exc}")) from None
            for t in page.tools:
                dumped = t.model_dump(by_alias=True, exclude_none=True)
                out.append(
                    McpToolListing(
                        name=t.name,
                        description=t.description or "",
                        input_schema=dumped.get("inputSchema") or {"type": "object"},
                        annotations=dumped.get("annotations"),
                        meta=dumped.get("_meta"),
                        output_schema=dumped.get("outputSchema"),
                    )
                )
            cursor = page.next_cursor
            if not cursor:
                return out

    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None, timeout: float
    ) -> ToolAnswer:
        """`tools/call` on the open session."""
        session = self._session()
        if _closed(session):  # the process ended since the last request: never sent
            raise self._gone(f"the server had stopped before {name!r}", reached=False)
        self.used = True
        try:
            async with asyncio.timeout(timeout):  # no task of its own, unlike wait_for
                result = await session.call_tool(name, arguments, meta=meta)  # type: ignore[arg-type]
        except TimeoutError:
            raise
        except _BROKEN as exc:
            raise self._gone(f"{name!r} failed: {_reason(exc)}", reached=True) from None
        except MCPError as exc:
            if _connection_closed(exc):  # the transport ended: not the tool's answer
                raise self._gone(f"the server stopped during {name!r}", reached=True) from None
            # The server refused the request (unknown tool, bad params): the tool's error.
            return ToolAnswer([{"type": "text", "text": str(exc)}], None, True)
        if not self.alive:
            raise self._gone(f"the server stopped during {name!r}", reached=True)
        dumped = result.model_dump(by_alias=True, exclude_none=True)
        return ToolAnswer(
            content=dumped.get("content") or [],
            structured=dumped.get("structuredContent"),
            is_error=bool(dumped.get("isError")),
        )

    async def close(self) -> None:
        """Leave the session (which stops a stdio process: stdin closed, then terminate)."""
        self._stop.set()
        runner = self._runner
        if runner is not None and not runner.done():
            try:
                await asyncio.wait_for(asyncio.shield(runner), 10)
            except (TimeoutError, Exception):
                runner.cancel()
                with contextlib.suppress(BaseException):
                    await runner
        log = self.extra.pop("log", None)
        if log is not None:
            log.close()
        if self.workspace is not None:
            shutil.rmtree(self.workspace, ignore_errors=True)


def _connection_closed(exc: MCPError) -> bool:
    """Whether an MCPError is the SDK's word that the transport ended (not the server's)."""
    return exc.error.code == CONNECTION_CLOSED and exc.error.message == "Connection closed"


def _closed(session: ClientSession) -> bool:
    """Whether the session's connection has ended (its reader saw the end of the stream).
    The SDK has no public word for it; without the attribute we assume it is open."""
    return bool(getattr(getattr(session, "_dispatcher", None), "_closed", False))


def _reason(exc: BaseException) -> str:
    """A one-line reason, looking inside exception groups (anyio wraps task errors)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
