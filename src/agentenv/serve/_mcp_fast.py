"""The direct path for a stateless `tools/call` over Streamable HTTP.

In stateless mode the SDK's session manager builds, for every POST, a transport, a pair
of memory streams, a JSON-RPC dispatcher and a task in its task group, routes the one
message through them to the Server's request kernel (`ServerRunner`), routes the answer
back and tears it all down: about two thirds of the bare low-level server's CPU per call
(issue 12's profile). A `tools/call` needs none of it: nothing is streamed in JSON mode,
and a stateless request has no session to keep.

`DirectToolCall.answer` takes a POST whose body was read, and when it is an ordinary
`tools/call` it runs the same steps the SDK would, with the SDK's own parts: its
body-size, protocol-era, Accept and Content-Type checks, its JSON parser and JSON-RPC
message model, `ServerRunner.on_request` (params validation against the protocol
version, `_meta`, the OpenTelemetry middleware, the registered handler, result
serialization), `handler_exception_to_error_data` for a raised error and the transport's
JSON answer. Anything else (another method, a notification, a batch, an unparsable or
oversized body, a refused header, another protocol era) returns False before any handler
ran, and the caller hands the request to the SDK unchanged, which answers exactly as it
always did. Differential tests (tests/serve/test_mcp_direct.py) hold the two paths to the
same answers byte for byte.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import anyio
import pydantic_core
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.runner import ServerRunner
from mcp.server.streamable_http import CONTENT_TYPE_JSON, check_accept_headers
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.shared.exceptions import NoBackChannelError
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.transport_context import TransportContext
from mcp_types import (
    DEFAULT_NEGOTIATED_VERSION,
    ErrorData,
    JSONRPCError,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Send

logger = logging.getLogger("mcp.shared.jsonrpc_dispatcher")  # where the SDK logs the same

_VERSION_HEADER = MCP_PROTOCOL_VERSION_HEADER.encode("ascii")
_TOOLS_CALL = b'"tools/call"'
# What the stateless transport stamps on every message: a JSON answer has no room for a
# server-initiated request, and without a session the client's reply has nowhere to land.
_TRANSPORT = TransportContext(kind="streamable-http", can_send_request=False)


class _Dispatch:
    """The dispatch context one direct request hands the SDK's request kernel: its id,
    the HTTP request as transport metadata, and a back-channel that carries nothing (as
    in the SDK's stateless JSON mode, where notifications tied to a request are dropped
    and server-initiated requests are refused)."""

    __slots__ = ("_cancel", "message_metadata", "request_id")

    transport = _TRANSPORT
    can_send_request = False

    def __init__(self, request_id: RequestId, request: Request) -> None:
        self.request_id = request_id
        self.message_metadata = ServerMessageMetadata(
            request_context=request, can_send_request=False
        )
        self._cancel: anyio.Event | None = None

    @property
    def cancel_requested(self) -> anyio.Event:
        """Never set: a lone POST cannot be followed by its `notifications/cancelled`."""
        if self._cancel is None:
            self._cancel = anyio.Event()
        return self._cancel

    async def notify(self, method: str, params: Mapping[str, Any] | None, opts: Any = None) -> None:
        """Dropped: a JSON answer carries only the response."""

    async def send_raw_request(
        self, method: str, params: Mapping[str, Any] | None, opts: Any = None
    ) -> dict[str, Any]:
        """Refused, as the SDK refuses it on a stateless JSON request."""
        raise NoBackChannelError(method)

    async def progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Dropped, like every notification of a JSON answer."""

    def close(self) -> None:
        """Nothing to close."""


class DirectToolCall:
    """Answers stateless JSON `tools/call` POSTs through the SDK's request kernel directly."""

    def __init__(self, server: Server[Any], manager: StreamableHTTPSessionManager) -> None:
        # Only the configuration this path reproduces: stateless, JSON answers.
        # It reads two private attributes of the session manager: an SDK release without
        # them gets the SDK's own path for every request (slower, the same answers).
        self.enabled = (
            manager.stateless
            and manager.json_response
            and hasattr(manager, "_task_group")
            and hasattr(manager, "_lifespan_state")
        )
        self.server = server
        self.manager = manager
        # One born-ready connection and request kernel per protocol version, where the SDK
        # builds both per POST: a `tools/call` reads them and never changes them (only
        # `initialize` commits to a connection, and it never comes this way), and no
        # handler of ours keeps per-connection state or cleanup.
        self._runners: dict[str, ServerRunner[Any]] = {}

    async def answer(self, request: Request, body: bytes, send: Send) -> bool:
        """Answer `request` (a POST whose security, credentials and depth were checked, whose
        body is `body`) if it is a plain `tools/call`; False, having run nothing, otherwise."""
        if not self.enabled or _TOOLS_CALL not in body or self.manager._task_group is None:
            return False  # (a manager that is not running is the SDK's to refuse)
        version = self._version(request, body)
        if version is None:
            return False
        has_json, _ = check_accept_headers(request)
        if not has_json or not _json_content_type(request):
            return False
        try:
            message = jsonrpc_message_adapter.validate_python(
                pydantic_core.from_json(body), by_name=False
            )
        except (ValueError, ValidationError):
            return False
        if not isinstance(message, JSONRPCRequest) or message.method != "tools/call":
            return False
        answer = await self._run(message, request, version)
        await Response(
            answer.model_dump_json(by_alias=True, exclude_unset=True),
            status_code=200,
            headers={"Content-Type": CONTENT_TYPE_JSON},
        )(request.scope, request.receive, send)
        return True

    def _version(self, request: Request, body: bytes) -> str | None:
        """The protocol version the stateless transport would serve this request at, or
        None where the SDK's manager would answer it some other way (oversized body,
        the 2026 era's entry)."""
        limit = self.manager.max_request_body_size
        if len(body) > limit:
            return None
        declared = request.headers.get("content-length")
        if declared is not None:
            try:
                if int(declared) > limit:
                    return None
            except ValueError:
                pass
        found = next(
            (v.decode("latin-1") for k, v in request.scope["headers"] if k == _VERSION_HEADER),
            None,
        )
        if found is None:
            return DEFAULT_NEGOTIATED_VERSION
        return found if found in HANDSHAKE_PROTOCOL_VERSIONS else None

    async def _run(
        self, message: JSONRPCRequest, request: Request, version: str
    ) -> JSONRPCResponse | JSONRPCError:
        """What the dispatcher would write for this request."""
        runner = self._runners.get(version)
        if runner is None:
            connection = Connection.from_envelope(version, None, None)
            runner = ServerRunner(self.server, connection, self.manager._lifespan_state)
            self._runners[version] = runner
        dispatch = _Dispatch(message.id, request)
        try:
            result = await runner.on_request(dispatch, message.method, message.params)  # type: ignore[arg-type]
        except Exception as exc:
            error = handler_exception_to_error_data(exc)
            if error is None:
                logger.exception("handler for %r raised", message.method)
                error = ErrorData(code=0, message=str(exc))  # the SDK's dispatcher's code
            return JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
        return JSONRPCResponse(jsonrpc="2.0", id=message.id, result=result)


def _json_content_type(request: Request) -> bool:
    """The stateless transport's Content-Type check (`application/json`, parameters and
    comma-joined lists allowed)."""
    content_type = request.headers.get("content-type", "")
    parts = [part.strip() for part in content_type.split(";")[0].split(",")]
    return any(part == CONTENT_TYPE_JSON for part in parts)
