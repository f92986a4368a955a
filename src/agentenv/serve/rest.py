"""The REST surface of a gateway (FastAPI): card, /step, clock, triggers, tool access,
trajectory, state, the JSON-RPC data plane, and instances.

Every route is a thin adapter: credentials to a Principal, body to arguments, one gateway
method, result to JSON. Each route answers at the root (the default instance) and under
`/instances/{instance_id}`, from one route table (serve/_routing.py); `POST /step` is
answered in front of FastAPI (serve/_step.py). Status codes are listed in docs/rest.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

from fastapi import APIRouter, FastAPI, Request
from pydantic import BaseModel, Field
from starlette.responses import Response

from agentenv import __version__
from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator, AuthError
from agentenv.gateway.errors import ClockError
from agentenv.serve import jsonrpc
from agentenv.serve._errors import install_error_handlers
from agentenv.serve._guard import BodyLimit, RequestGuard
from agentenv.serve._http import (
    DEFAULT_MAX_BODY,
    SESSION_HEADER,
    HttpError,
    instance_of,
    prefix_of,
    principal_of,
    read_json,
    read_model,
)
from agentenv.serve._routing import INSTANCE_PREFIX, RestApp, route_paths
from agentenv.serve._step import StepDispatch, answer_step, step_tools
from agentenv.serve.card import (
    build_card,
    build_child_card,
    child_keys,
    find_child_namespace,
)
from agentenv.serve.history import history_router
from agentenv.serve.openapi import data_plane_doc, openapi_schema, operation_doc
from agentenv.serve.ws import websocket_routes
from agentenv.spec.card import Interface
from agentenv.spec.triggers import TriggerRegistration
from agentenv.spec.wire import (
    AdvanceClockBody,
    RemoveTriggersBody,
    RoleAccess,
    SetTimeBody,
    StepRequest,
    ToolAccessBody,
)

CARD_PATH = "/.well-known/agent-env.json"

Lifespan = Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]


# Control operations need the admin role (in trusted local mode every caller has it).
_ADMIN = (403,)


class InstanceBody(BaseModel):
    """Body of `POST /instances` (optional): the new instance's id, else one is made up."""

    id: str | None = Field(default=None, min_length=1, description="No '/'.")


__all__ = ["CARD_PATH", "RestApp", "create_app", "step_tools"]


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data), status_code=status, media_type="application/json")


def _routes(gateway: Gateway, auth: Authenticator, interfaces: list[Interface]) -> APIRouter:
    router = APIRouter()

    def _card_principal(request: Request) -> Any:
        try:
            return principal_of(request, auth)
        except AuthError:  # the card is public; anonymous callers see the default role's tools
            return auth.principal(None, None) if auth.trusted else _anonymous(gateway)

    @router.get(CARD_PATH, summary="Environment Card", openapi_extra=operation_doc(public=True))
    async def card(request: Request) -> Response:
        built = build_card(
            gateway,
            _card_principal(request),
            instance=instance_of(request),
            prefix=prefix_of(request),
            interfaces=interfaces,
        )
        return _json(built.to_json())

    @router.post(
        "/step",
        summary="List or call tools",
        openapi_extra=operation_doc(StepRequest, errors=(403, 404, 504)),
    )
    async def step(request: Request) -> Response:
        # POST /step is answered by StepDispatch in front of the app; this route documents it
        # and serves what the dispatch leaves to the framework (a root_path), the same way.
        principal = principal_of(request, auth)
        raw = await request.body()
        session = request.headers.get(SESSION_HEADER)
        status, answer = await answer_step(gateway, principal, raw, instance_of(request), session)
        return _json(answer, status)

    @router.get(
        "/clock/time",
        summary="Virtual time (404 while the clock is not armed)",
        openapi_extra=operation_doc(errors=(404,)),
    )
    async def clock_time(request: Request) -> Response:
        principal_of(request, auth)
        try:
            now = gateway.clock_time(instance_of(request))
        except ClockError as exc:
            raise HttpError(404, "clock_not_armed", str(exc)) from None
        return _json({"virtual_time": now.isoformat().replace("+00:00", "Z")})

    @router.put(
        "/clock/set-time",
        summary="Arm or set the clock",
        openapi_extra=operation_doc(SetTimeBody, errors=_ADMIN),
    )
    async def clock_set(request: Request) -> Response:
        principal = principal_of(request, auth)
        body = await read_model(request, SetTimeBody)
        state = await gateway.set_clock(
            principal,
            body.virtual_time,
            body.virtual_seconds_per_real_second,
            body.mode,
            instance=instance_of(request),
        )
        return _json(state.to_wire())

    @router.post(
        "/clock/advance",
        summary="Move the clock forward (ours)",
        openapi_extra=operation_doc(AdvanceClockBody, errors=_ADMIN),
    )
    async def clock_advance(request: Request) -> Response:
        principal = principal_of(request, auth)
        body = await read_model(request, AdvanceClockBody)
        state = await gateway.advance_clock(
            principal, timedelta(seconds=body.seconds), instance=instance_of(request)
        )
        return _json(state.to_wire())

    @router.post(
        "/clock/clear", summary="Disarm the clock", openapi_extra=operation_doc(errors=_ADMIN)
    )
    async def clock_clear(request: Request) -> Response:
        principal = principal_of(request, auth)
        state = await gateway.clear_clock(principal, instance=instance_of(request))
        return _json({"ok": True, **state.to_wire()})

    @router.get("/clock/state", summary="Clock mode, rate and time")
    async def clock_state(request: Request) -> Response:
        principal_of(request, auth)
        state = gateway.clock_state(instance_of(request)).to_wire()
        if state["armed"]:  # where a server beside the gateway can read the time
            base = str(request.base_url).rstrip("/") + prefix_of(request)
            state["env_get_time_url"] = f"{base}/clock/time"
        return _json(state)

    @router.post(
        "/triggers/register",
        summary="Add triggers",
        openapi_extra=operation_doc(TriggerRegistration, errors=_ADMIN),
    )
    async def triggers_register(request: Request) -> Response:
        principal = principal_of(request, auth)
        body = await read_model(request, TriggerRegistration)
        result = await gateway.register_triggers(principal, body, instance=instance_of(request))
        return _json(result.model_dump(mode="json"))

    @router.post(
        "/triggers/remove",
        summary="Remove triggers by id",
        openapi_extra=operation_doc(RemoveTriggersBody, errors=_ADMIN),
    )
    async def triggers_remove(request: Request) -> Response:
        principal = principal_of(request, auth)
        body = await read_model(request, RemoveTriggersBody)
        removed = await gateway.remove_triggers(
            principal, list(body.ids), instance=instance_of(request)
        )
        return _json({"ok": True, "removed": removed})

    @router.post(
        "/triggers/clear",
        summary="Remove every trigger",
        openapi_extra=operation_doc(errors=_ADMIN),
    )
    async def triggers_clear(request: Request) -> Response:
        principal = principal_of(request, auth)
        await gateway.remove_triggers(principal, None, instance=instance_of(request))
        return _json({"ok": True})

    @router.get("/triggers/state", summary="Trigger statuses and firing log")
    async def triggers_state(request: Request) -> Response:
        principal_of(request, auth)
        return _json(gateway.triggers_state(instance_of(request)).to_wire())

    async def _access(request: Request, action: Any) -> Response:
        principal = principal_of(request, auth)
        body = await read_model(request, ToolAccessBody)
        rules = await gateway.set_tool_access(
            principal, action, body.role, body.tools, instance=instance_of(request)
        )
        own = RoleAccess.of(rules.get(body.role, {})).model_dump()
        return _json({"role": body.role, **own, "role_rules": rules})

    @router.post(
        "/tools/disable",
        summary="Disable tools for a role",
        openapi_extra=operation_doc(ToolAccessBody, errors=_ADMIN),
    )
    async def tools_disable(request: Request) -> Response:
        return await _access(request, "disable")

    @router.post(
        "/tools/enable",
        summary="Enable tools for a role",
        openapi_extra=operation_doc(ToolAccessBody, errors=_ADMIN),
    )
    async def tools_enable(request: Request) -> Response:
        return await _access(request, "enable")

    router.include_router(history_router(gateway, auth))  # /trajectory, /changes

    @router.get("/state", summary="Servers, tools, changelog id, role rules")
    async def state(request: Request) -> Response:
        principal_of(request, auth)
        status = gateway.status(instance_of(request))
        return _json(status.model_dump(mode="json", by_alias=True))

    async def _data_plane(request: Request, namespace: str) -> Response:
        principal = principal_of(request, auth)
        try:
            payload = await read_json(request)
        except HttpError as exc:
            return _json(jsonrpc.error(None, jsonrpc.PARSE_ERROR, exc.message, "parse_error"))
        answer = await jsonrpc.handle(
            gateway, principal, instance_of(request), payload, namespace=namespace
        )
        return Response(status_code=204) if answer is None else _json(answer)

    @router.post(
        "/agentenv",
        summary="JSON-RPC data plane: data/reset, data/add, data/get",
        openapi_extra=data_plane_doc(),
    )
    async def data_plane(request: Request) -> Response:
        return await _data_plane(request, "")

    def _child(request: Request) -> str:
        key = request.path_params["svc_key"]
        namespace = find_child_namespace(gateway.env, key)
        if namespace is None:
            keys = child_keys(gateway.env)
            hint = f"children: {', '.join(keys)}" if keys else "this environment composes none"
            raise HttpError(404, "not_found", f"no composed child {key!r} under /svc", hint=hint)
        return namespace

    @router.get(
        "/svc/{svc_key}" + CARD_PATH,
        summary="A composed child's card",
        openapi_extra=operation_doc(public=True),
    )
    async def child_card(request: Request) -> Response:
        namespace = _child(request)
        built = build_child_card(
            gateway,
            _card_principal(request),
            namespace,
            instance=instance_of(request),
            prefix=prefix_of(request),
        )
        return _json(built.to_json())

    @router.post(
        "/svc/{svc_key}/agentenv",
        summary="A composed child's JSON-RPC data plane",
        openapi_extra=data_plane_doc(),
    )
    async def child_data_plane(request: Request) -> Response:
        return await _data_plane(request, _child(request))

    return router


def _anonymous(gateway: Gateway) -> Any:
    from agentenv.env.tool import Principal

    return Principal(role=gateway.env.default_role)


def create_app(
    gateway: Gateway,
    *,
    auth: Authenticator | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    tick_seconds: float = 0.25,
    mcp: bool = True,
    loopback: bool = True,
) -> FastAPI:
    """The ASGI app serving `gateway`: REST, the data plane and (with `mcp`) MCP over
    Streamable HTTP at `/mcp`. Run it with uvicorn (see `serve.server.make_server`).

    `auth` defaults to trusted local mode. A background task fires time triggers of
    wall-clock instances every `tick_seconds`. `loopback` turns on the MCP SDK's
    Host/Origin checks against DNS rebinding.
    """
    auth = auth or Authenticator(default_role=gateway.env.default_role)
    interfaces: list[Interface] = []
    lifespans: list[Lifespan] = []
    mcp_http = None
    if mcp:
        from agentenv.serve.mcp import MCP_PATH, McpAdapter

        mcp_http = McpAdapter(gateway, auth).http(loopback=loopback)
        interfaces.append(Interface(url=MCP_PATH, transport="mcp"))
        lifespans.append(mcp_http.lifespan)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        task = asyncio.create_task(gateway.run_ticker(tick_seconds))
        async with contextlib.AsyncExitStack() as stack:
            for extra in lifespans:
                await stack.enter_async_context(extra(app))
            try:
                yield
            finally:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    app = RestApp(
        title=f"agentenv: {gateway.env.name}",
        description=gateway.env.description or "An agentenv environment.",
        version=__version__,
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    router = _routes(gateway, auth, interfaces)
    app.include_router(router)
    app.instance_segments = frozenset(path.split("/")[1] for path in route_paths(router.routes))
    # The instance routes are served by the root ones (RestApp.instance_scope); these
    # copies are only for the OpenAPI document, where they sit right after the root ones.
    documented = APIRouter()
    documented.include_router(router, prefix=INSTANCE_PREFIX)
    doc_at = len(app.routes)

    @app.get("/", summary="Where things are", openapi_extra=operation_doc(public=True))
    async def index() -> Response:
        return _json(
            {
                "name": gateway.env.name,
                "card": CARD_PATH,
                "step": "/step",
                "ws": "/ws",
                "openapi": "/openapi.json",
                "docs": "/docs",
            }
        )

    @app.get("/instances", summary="Live instances")
    async def list_instances(request: Request) -> Response:
        principal_of(request, auth)
        return _json({"instances": gateway.instances})

    @app.post(
        "/instances",
        summary="Fork a fresh instance from the seeded snapshot",
        status_code=201,
        openapi_extra=operation_doc(InstanceBody, errors=_ADMIN, body_required=False),
    )
    async def create_instance(request: Request) -> Response:
        principal = principal_of(request, auth)
        if not principal.admin:
            raise HttpError(403, "forbidden", f"{principal} may not create instances")
        wanted = None
        if await request.body():
            data = await read_json(request)
            if not isinstance(data, dict):
                raise HttpError(400, "bad_request", 'expected an object like {"id": "..."}')
            wanted = data.get("id")
            if wanted is not None and not isinstance(wanted, str):
                raise HttpError(400, "bad_request", "id: expected a string")
        inst = gateway.create_instance(wanted)
        return _json({"id": inst.id, "url": f"/instances/{inst.id}"}, 201)

    @app.delete(
        "/instances/{instance_id}",
        summary="Drop an instance (400 for the default one)",
        openapi_extra=operation_doc(errors=(400, *_ADMIN)),
    )
    async def drop_instance(request: Request) -> Response:
        instance_id = request.path_params["instance_id"]
        principal = principal_of(request, auth)
        if not principal.admin:
            raise HttpError(403, "forbidden", f"{principal} may not drop instances")
        gateway.drop_instance(instance_id)
        return _json({"dropped": instance_id})

    install_error_handlers(app)
    app.router.routes.extend(websocket_routes(gateway, auth, loopback=loopback, max_frame=max_body))
    if mcp_http is not None:
        app.router.routes.extend(mcp_http.routes())
    app.openapi = (
        lambda: openapi_schema(  # type: ignore[method-assign]
            app,
            routes=[*app.routes[:doc_at], *documented.routes, *app.routes[doc_at:]],
            tokens_required=not auth.trusted,
            loopback=loopback,
            tools=[tool.info() for tool in gateway.env.tools.values()],
        )
    )
    # Outermost first: refuse cross-site and rebinding requests before reading any body.
    app.add_middleware(BodyLimit, max_bytes=max_body)
    app.add_middleware(RequestGuard, loopback=loopback, trusted=auth.trusted)
    guard = RequestGuard(app, loopback=loopback, trusted=auth.trusted)  # for its header checks
    app.step_dispatch = StepDispatch(gateway, auth, guard, max_body)
    return app
