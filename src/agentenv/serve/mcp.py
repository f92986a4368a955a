"""MCP transport: the gateway's tools over the official `mcp` SDK (2.x low-level Server).

One adapter serves Streamable HTTP (mounted at `/mcp` and `/instances/{id}/mcp` in the
REST app, sharing its lifespan) and stdio. Like every transport it only translates:
`tools/list` is `Gateway.list_tools`, `tools/call` is `Gateway.call`. Over HTTP an
ordinary `tools/call` is answered through the SDK's request kernel directly, without the
per-POST transport the SDK's stateless mode builds (serve/_mcp_fast.py); every other
request goes to the SDK's session manager.

Who is calling: over HTTP the same Authenticator as REST decides (the `AgentEnv-Role`
header in trusted local mode, a bearer token otherwise), and a caller without valid
credentials gets 401 before any MCP is spoken. In trusted mode a `_meta["agentenv.io/role"]`
entry (how a gateway forwards its caller's role to a backing server) names the role and
wins over the header; `default`, blank or a non-string value there means "no role
forwarded", the environment's default role. Over stdio `_meta` is the only way besides
the default role. `_meta["agentenv.io/session"]`
names the session in the trajectory. A reserved role (`system`) is refused wherever it is
named (`Authenticator.resolve_role`).

Every refusal this endpoint makes itself is a JSON-RPC error body (with our error fields
in `error.data`), at the HTTP status that says why, so MCP clients show its message:
401 without valid credentials, 404 for an unknown instance, 400/403/421 for what the SDK's
transport checks refuse (content type, Origin, Host), 400 for a body nested too deep to
parse safely. A stdio line the SDK cannot parse is answered the same way, and the session
goes on.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import mcp.types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from agentenv import __version__
from agentenv.env.tool import Principal
from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator, AuthError
from agentenv.gateway.errors import DEFAULT_INSTANCE, UnknownInstance
from agentenv.gateway.results import CallResult
from agentenv.serve._http import ROLE_HEADER, SESSION_HEADER
from agentenv.serve._mcp_wire import (
    BODY_DEPTH,
    INVALID_REQUEST,
    PARSE_ERROR,
    UNAUTHENTICATED,
    UNKNOWN_INSTANCE,
    AnsweringReader,
    refusal,
    sniff_request_id,
)
from agentenv.spec.limits import depth_message, raw_too_deep

try:  # built on SDK internals (see _mcp_fast); an SDK that moved them gets the SDK's path
    from agentenv.serve._mcp_fast import DirectToolCall
except ImportError:  # pragma: no cover - depends on the installed mcp release
    DirectToolCall = None  # type: ignore[assignment,misc]

META_ROLE = "agentenv.io/role"
META_SESSION = "agentenv.io/session"
# Where McpHttp leaves the principal it resolved from the HTTP request's credentials, so a
# call does not resolve them twice.
_PRINCIPAL_KEY = "agentenv.principal"
MCP_PATH = "/mcp"
# The HTTP status the SDK's transport checks answer, and our kind for each.
# (RequestGuard, around the whole app, refuses most of these first, with the same kinds.)
_SECURITY_KINDS = {400: "unsupported_media_type", 403: "foreign_origin", 421: "misdirected_host"}


def tool_result(result: CallResult) -> dict[str, Any]:
    """A gateway result as MCP's CallToolResult in wire form: what
    `CallToolResult(...).model_dump(by_alias=True, mode="json", exclude_none=True)` gives, key
    for key. The SDK validates and shapes every result against the protocol version's
    schema anyway (which drops `resultType` where the version has none), so building and
    dumping the model first would only do that work twice."""
    answer: dict[str, Any] = {"content": [{"type": "text", "text": result.text}]}
    structured = result.structured
    if structured is not None:
        answer["structuredContent"] = structured
    answer["isError"] = not result.ok
    answer["resultType"] = "complete"
    return answer


class McpAdapter:
    """The MCP face of a gateway."""

    def __init__(self, gateway: Gateway, auth: Authenticator) -> None:
        self.gateway = gateway
        self.auth = auth
        tools = gateway.env.tools

        def input_schema(name: str) -> dict[str, Any] | None:
            tool = tools.get(name)
            return tool.input_schema if tool else None

        self.server: Server[Any] = Server(
            gateway.env.name,
            version=__version__,
            description=gateway.env.description or None,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            # Only feeds the SDK's Mcp-Param header check; without it the SDK would run
            # tools/list on every tools/call. Validation itself is the gateway's.
            get_tool_input_schema=input_schema,
        )

    def _caller(self, ctx: ServerRequestContext) -> tuple[Principal, str, str | None]:
        """Who is calling, which instance, which session. A reserved role named anywhere
        (header or `_meta`) is a JSON-RPC error: the call never reaches the gateway."""
        try:
            return self._resolve_caller(ctx)
        except AuthError as exc:
            raise MCPError(code=UNAUTHENTICATED, message=str(exc)) from None

    def _resolve_caller(self, ctx: ServerRequestContext) -> tuple[Principal, str, str | None]:
        raw = ctx.meta or {}
        # A `_meta` role entry of any value marks a call a gateway proxied: its role (none,
        # blank or `default` is "not forwarded": the default role) wins over the headers,
        # which describe the gateway's connection. Only strings count as names.
        forwarded = META_ROLE in raw
        meta = {k: v for k, v in raw.items() if isinstance(v, str) and v}
        request: Request | None = ctx.request
        if request is None:  # stdio: a local process the user started
            role = self.auth.resolve_role(raw.get(META_ROLE))
            return Principal(role=role, admin=True), DEFAULT_INSTANCE, meta.get(META_SESSION)
        headers = request.headers
        # Resolved at the HTTP level already (resolving here again is kept for an ASGI
        # caller that skipped McpHttp; its AuthError is kept for safety).
        principal = request.scope.get(_PRINCIPAL_KEY)
        if principal is None:
            principal = self.auth.principal(headers.get(ROLE_HEADER), headers.get("authorization"))
        if self.auth.trusted and forwarded:
            role = self.auth.resolve_role(raw.get(META_ROLE))
            principal = Principal(role=role, admin=principal.admin)
        instance = request.path_params.get("instance_id", DEFAULT_INSTANCE)
        session = (
            meta.get(META_SESSION) or headers.get(SESSION_HEADER) or headers.get("mcp-session-id")
        )
        return principal, instance, session

    async def _list_tools(
        self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        principal, instance, _ = self._caller(ctx)
        try:
            infos = self.gateway.list_tools(principal, instance)
        except UnknownInstance as exc:
            raise MCPError(code=UNKNOWN_INSTANCE, message=str(exc)) from None
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    description=t.description,
                    input_schema=t.input_schema,
                    _meta=t.meta,
                )
                for t in infos
            ]
        )

    async def _call_tool(
        self, ctx: ServerRequestContext, params: types.CallToolRequestParams
    ) -> dict[str, Any]:
        principal, instance, session = self._caller(ctx)
        try:
            result = await self.gateway.call(
                principal, params.name, params.arguments or {}, instance=instance, session=session
            )
        except UnknownInstance as exc:
            raise MCPError(code=UNKNOWN_INSTANCE, message=str(exc)) from None
        return tool_result(result)

    # -- Streamable HTTP ------------------------------------------------------------------

    def http(self, *, loopback: bool = True) -> McpHttp:
        """The Streamable HTTP endpoint, to mount with `routes()` and run with `lifespan`."""
        return McpHttp(self, loopback=loopback)

    # -- stdio ----------------------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve MCP over this process's stdin/stdout until the client goes away."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await self.serve_streams(read_stream, write_stream)

    async def serve_streams(self, read_stream: Any, write_stream: Any) -> None:
        """Serve one MCP connection over a transport's message streams (stdio's, or any
        other that yields the SDK's SessionMessage items). A line the transport could not
        parse arrives as an exception item; it is answered with a JSON-RPC error (the SDK
        alone would drop it and leave the client waiting) and the session goes on."""
        reader = AnsweringReader(read_stream, write_stream)
        await self.server.run(reader, write_stream, self.server.create_initialization_options())


class McpHttp:
    """Streamable HTTP for an McpAdapter: an ASGI endpoint that checks credentials first."""

    def __init__(self, adapter: McpAdapter, *, loopback: bool) -> None:
        self.adapter = adapter
        security = (
            TransportSecuritySettings(
                enable_dns_rebinding_protection=True,
                allowed_hosts=["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]:*"],
                allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
            )
            if loopback
            else None
        )
        # Stateless with JSON answers: every request stands alone, so one server can carry
        # many concurrent episodes without session bookkeeping; tool calls need no streams.
        self.manager = StreamableHTTPSessionManager(
            app=adapter.server, stateless=True, json_response=True, security_settings=security
        )
        # The SDK runs the same checks again; running them first lets a refusal come before
        # ours (a forged browser request never learns whether its role would do) and answer
        # in the JSON-RPC shape clients show.
        self.security = TransportSecurityMiddleware(security)
        self.direct = (
            DirectToolCall(adapter.server, self.manager) if DirectToolCall is not None else None
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        method = request.method
        if method != "POST":
            # No server-initiated stream in stateless mode (GET); an open GET stream would
            # also keep the server from shutting down. No session to end either (DELETE).
            # The spec allows 405 for both.
            response = refusal(
                405, INVALID_REQUEST, "method_not_allowed", "use POST for MCP requests"
            )
            response.headers["Allow"] = "POST"
            await response(scope, receive, send)
            return
        refused = await self.security.validate_request(request, is_post=method == "POST")
        if refused is not None:
            message = bytes(refused.body).decode("utf-8", "replace")
            kind = _SECURITY_KINDS.get(refused.status_code, "bad_request")
            await refusal(refused.status_code, INVALID_REQUEST, kind, message)(scope, receive, send)
            return
        auth = self.adapter.auth
        try:
            principal = auth.principal(
                request.headers.get(ROLE_HEADER), request.headers.get("authorization")
            )
        except AuthError as exc:
            response = refusal(401, UNAUTHENTICATED, "unauthenticated", str(exc))
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        instance = scope.get("path_params", {}).get("instance_id")
        if instance is not None and instance not in self.adapter.gateway.instances:
            await refusal(404, UNKNOWN_INSTANCE, "not_found", f"no instance {instance!r}")(
                scope, receive, send
            )
            return
        if method == "POST":
            body = await _read_body(receive)
            if body is None:
                return  # the client went away before its body arrived: nobody to answer
            if raw_too_deep(body, BODY_DEPTH):
                # Refused unparsed: the SDK's parsers recurse, and what they would make of
                # it (their own "Parse error", or a RecursionError deeper in) says nothing.
                message = f"the request body is {depth_message(BODY_DEPTH)}"
                await refusal(
                    400, PARSE_ERROR, "too_deep", message, request_id=sniff_request_id(body)
                )(scope, receive, send)
                return
            scope[_PRINCIPAL_KEY] = principal
            if self.direct is not None and await self.direct.answer(request, body, send):
                return
            receive = _replay(body, receive)
        await self.manager.handle_request(scope, receive, send)

    def routes(self) -> list[Route]:
        """`/mcp` and `/instances/{instance_id}/mcp`, all methods."""
        return [
            Route(MCP_PATH, endpoint=self, methods=None),
            Route("/instances/{instance_id}" + MCP_PATH, endpoint=self, methods=None),
        ]

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any) -> AsyncIterator[None]:
        """Run the session manager for as long as the app runs."""
        async with self.manager.run():
            yield


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body (BodyLimit, around the app, caps its size), or None if the
    client disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the SDK the body already read, then the client's own
    messages (a disconnect, which the SDK watches for while a call runs)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed
