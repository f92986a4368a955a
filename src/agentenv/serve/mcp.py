"""MCP transport: the gateway's tools over the official `mcp` SDK (2.x low-level Server).

One adapter serves Streamable HTTP (mounted at `/mcp` and `/instances/{id}/mcp` in the
REST app, sharing its lifespan) and stdio. Like every transport it only translates:
`tools/list` is `Gateway.list_tools`, `tools/call` is `Gateway.call`.

Who is calling: over HTTP the same Authenticator as REST decides (the `AgentEnv-Role`
header in trusted local mode, a bearer token otherwise), and a caller without valid
credentials gets 401 before any MCP is spoken. In trusted mode a `_meta["agentenv.io/role"]`
entry (how a gateway forwards its caller's role to a backing server) names the role and
wins over the header; `default`, blank or a non-string value there means "no role
forwarded", the environment's default role. Over stdio `_meta` is the only way besides
the default role. `_meta["agentenv.io/session"]`
names the session in the trajectory.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import mcp.types as types
from mcp import MCPError
from mcp.server import Server, ServerRequestContext
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from agentenv import __version__
from agentenv.env.tool import Principal
from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator, AuthError
from agentenv.gateway.errors import DEFAULT_INSTANCE, UnknownInstance
from agentenv.serve._http import ROLE_HEADER, SESSION_HEADER, error_response

META_ROLE = "agentenv.io/role"
META_SESSION = "agentenv.io/session"
MCP_PATH = "/mcp"
UNKNOWN_INSTANCE = -32004


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
        try:
            principal = self.auth.principal(headers.get(ROLE_HEADER), headers.get("authorization"))
        except AuthError as exc:  # checked at the HTTP level already; kept for safety
            raise MCPError(code=-32001, message=str(exc)) from None
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
    ) -> types.CallToolResult:
        principal, instance, session = self._caller(ctx)
        try:
            result = await self.gateway.call(
                principal, params.name, params.arguments or {}, instance=instance, session=session
            )
        except UnknownInstance as exc:
            raise MCPError(code=UNKNOWN_INSTANCE, message=str(exc)) from None
        return types.CallToolResult(
            content=[types.TextContent(text=result.text)],
            is_error=not result.ok,
            structured_content=result.structured,
        )

    # -- Streamable HTTP ------------------------------------------------------------------

    def http(self, *, loopback: bool = True) -> McpHttp:
        """The Streamable HTTP endpoint, to mount with `routes()` and run with `lifespan`."""
        return McpHttp(self, loopback=loopback)

    # -- stdio ----------------------------------------------------------------------------

    async def run_stdio(self) -> None:
        """Serve MCP over this process's stdin/stdout until the client goes away."""
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read_stream, write_stream):
            await self.server.run(
                read_stream, write_stream, self.server.create_initialization_options()
            )


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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        if request.method == "GET":
            # No server-initiated stream in stateless mode; an open GET stream would also
            # keep the server from shutting down. The spec allows 405 here.
            response = error_response(405, "method_not_allowed", "use POST for MCP requests")
            response.headers["Allow"] = "POST, DELETE"
            await response(scope, receive, send)
            return
        auth = self.adapter.auth
        try:
            auth.principal(request.headers.get(ROLE_HEADER), request.headers.get("authorization"))
        except AuthError as exc:
            response = error_response(401, "unauthenticated", str(exc))
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send)
            return
        instance = scope.get("path_params", {}).get("instance_id")
        if instance is not None and instance not in self.adapter.gateway.instances:
            await error_response(404, "not_found", f"no instance {instance!r}")(
                scope, receive, send
            )
            return
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
