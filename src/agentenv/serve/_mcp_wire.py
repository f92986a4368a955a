"""What the MCP transport answers by itself, before or beside the SDK: JSON-RPC error codes,
the JSON-RPC-shaped refusal of an HTTP request, and the answer to a stdio line the SDK
could not parse.

Refusals are JSON-RPC error objects so that MCP clients show their message (the official
client surfaces a JSON-RPC error found in a non-2xx body; anything else becomes "Server
returned an error response"). They have the one JSON-RPC error shape of this server (the
data plane's, and RequestGuard's at `/mcp`): `error.data.code` names the failure for
programs, `error.data.detail` repeats the message.
"""

from __future__ import annotations

import contextlib
import json
import re
from types import TracebackType
from typing import Any

import anyio
import mcp.types as types
from mcp.shared.message import SessionMessage
from pydantic import ValidationError
from starlette.responses import Response

from agentenv.serve import jsonrpc
from agentenv.spec.limits import BODY_DEPTH, depth_message, raw_too_deep

PARSE_ERROR = types.PARSE_ERROR
"""-32700: the message was not parsed (malformed, or nested too deep to parse safely)."""
INVALID_REQUEST = types.INVALID_REQUEST
"""-32600: the request as sent is refused (not a JSON-RPC message, wrong content type,
foreign Origin or Host, wrong HTTP method)."""
UNKNOWN_INSTANCE = -32004
"""Ours: `/instances/{id}/mcp` names no instance (HTTP 404)."""
UNAUTHENTICATED = -32005
"""Ours: no valid credentials, or a reserved role named (HTTP 401 when the HTTP request
itself is refused). -32000 and -32001 are the SDK's own (connection closed, timeout)."""


_SNIFF_CHARS = 4096
_OPEN = re.compile(r"\s*\{")
_SCALAR_MEMBER = re.compile(
    r'\s*("(?:[^"\\]|\\.)*")\s*:\s*'
    r'("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)\s*([,}])',
    re.DOTALL,
)


def refusal(
    status: int,
    code: int,
    kind: str,
    message: str,
    *,
    request_id: types.RequestId | None = None,
) -> Response:
    """An HTTP refusal as a JSON-RPC error: `{"jsonrpc", "id", "error": {code, message,
    data: {code: kind, detail}}}`. ASCII-escaped, so no text can fail to encode."""
    body = jsonrpc.error(request_id, code, message, kind)
    return Response(json.dumps(body), status_code=status, media_type="application/json")


def sniff_request_id(raw: bytes | str) -> types.RequestId | None:
    """The id of a JSON-RPC request that will not be parsed, if its opening members (the
    scalar ones before the first nested value, within the first few KB) name a `method` and
    an `id`, as every client we know writes them; else None, as JSON-RPC says an
    unreadable request's error carries. Never recurses, never reads the whole message."""
    text = raw[:_SNIFF_CHARS]
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    opened = _OPEN.match(text)
    if opened is None:
        return None
    members: dict[str, Any] = {}
    pos = opened.end()
    while (member := _SCALAR_MEMBER.match(text, pos)) is not None:
        try:
            members[json.loads(member[1])] = json.loads(member[2])
        except ValueError:
            break
        if member[3] == "}":
            break
        pos = member.end()
    found = members.get("id")
    if not isinstance(members.get("method"), str):
        return None
    if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
        return found
    return None


def unparsed_error(exc: Exception) -> types.JSONRPCError:
    """The JSON-RPC error answering a message the transport could not parse into a
    JSON-RPC message (`exc` is what it raised): too deep, malformed, or not a message."""
    line = _input_line(exc)
    if line is not None and raw_too_deep(line, BODY_DEPTH):
        code, kind, message = PARSE_ERROR, "too_deep", f"the message is {depth_message(BODY_DEPTH)}"
    elif line is not None:
        code, kind, message = PARSE_ERROR, "parse_error", f"Parse error: {_first_message(exc)}"
    else:
        code, kind = INVALID_REQUEST, "invalid_request"
        message = "Invalid request: not a JSON-RPC 2.0 message"
    request_id = sniff_request_id(line) if line is not None else None
    return types.JSONRPCError.model_validate(jsonrpc.error(request_id, code, message, kind))


def _input_line(exc: Exception) -> str | None:
    """The raw text of a message the SDK's JSON parser refused (pydantic keeps it as the
    error's input), or None when the text parsed and only its shape was wrong."""
    if not isinstance(exc, ValidationError):
        return None
    errors = exc.errors(include_url=False)
    if errors and errors[0]["type"] == "json_invalid" and isinstance(errors[0]["input"], str):
        return errors[0]["input"]
    return None


def _first_message(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        errors = exc.errors(include_url=False)
        if errors:
            return str(errors[0]["msg"]).removeprefix("Invalid JSON: ")
    return str(exc)


class AnsweringReader:
    """A transport's read stream, less its exception items: each one (a line that did not
    parse) is answered with a JSON-RPC error on the write stream instead of being dropped,
    so the client hears why and the session goes on. Messages pass through untouched."""

    def __init__(self, inner: Any, write_stream: Any) -> None:
        self._inner = inner
        self._write = write_stream

    @property
    def last_context(self) -> Any:
        """The sender context of the last message (the SDK restores it per message)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage:
        """The next message that parsed; unparsed ones are answered on the way."""
        while True:
            item = await self._inner.receive()
            if not isinstance(item, Exception):
                return item
            # A session that is ending has nobody left to tell.
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._write.send(SessionMessage(unparsed_error(item)))

    async def aclose(self) -> None:
        """Close the transport's read stream."""
        await self._inner.aclose()

    def __aiter__(self) -> AnsweringReader:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> AnsweringReader:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()
