"""The WebSocket session transport: one connection per episode, one frame per call.

`/ws` serves the default instance and `/instances/{id}/ws` that instance, in OpenEnv's
frame shape (`_ws_frames`): `step` calls a tool or lists tools through `Gateway.call` and
`Gateway.list_tools`, `state` tells the instance's changelog id and state hash, `reset`
forks a fresh instance for the connection (dropped when it closes), `close` ends it.

The handshake is where the caller is known: its `Authorization` (bearer) or, in trusted
local mode, `AgentEnv-Role` header is resolved once, as REST resolves each request's; its
`AgentEnv-Session` header (else a fresh id, answered in the same header) names the session
every call of the connection is recorded under. Cross-site handshakes are refused as
RequestGuard refuses cross-site requests (`_ws_guard`). A bad frame is answered with an
error frame and the connection stays open. docs/websocket.md has the wire shapes.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.types import Receive, Scope, Send

from agentenv.env.tool import Principal
from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator, AuthError
from agentenv.gateway.errors import DEFAULT_INSTANCE, GatewayError, UnknownInstance
from agentenv.serve._http import DEFAULT_MAX_BODY, ROLE_HEADER, SESSION_HEADER, error_fields
from agentenv.serve._ws_frames import (
    EXECUTION_ERROR,
    SESSION_ERROR,
    VALIDATION_ERROR,
    FrameError,
    call_frame,
    error_frame,
    observation_frame,
    read_frame,
    state_frame,
    step_body,
    tools_shape,
)
from agentenv.serve._ws_guard import handshake_refusal

WS_PATH = "/ws"
"""Where the default instance's sessions connect (`/instances/{id}/ws` for another)."""
MAX_EPISODE_ID = 255
"""The longest `episode_id` a `reset` may name (OpenEnv's ResetRequest limit)."""

_log = logging.getLogger(__name__)
_ROLE = ROLE_HEADER.encode()
_SESSION = SESSION_HEADER.encode()
_HANDSHAKE_HEADERS = frozenset({b"authorization", _ROLE, _SESSION})
_CLOSED = object()  # what `Session.answer` returns for a `close` frame


def websocket_routes(
    gateway: Gateway,
    auth: Authenticator,
    *,
    loopback: bool = True,
    max_frame: int = DEFAULT_MAX_BODY,
) -> list[BaseRoute]:
    """The app's WebSocket routes: `/ws` and `/instances/{instance_id}/ws`.

    `loopback` (the server listens on loopback) turns on the Host check against DNS
    rebinding in trusted mode, as `create_app`'s does for HTTP; `max_frame` is the largest
    frame served (larger ones get an error frame), the HTTP body limit by default."""
    endpoint = SessionEndpoint(gateway, auth, loopback=loopback, max_frame=max_frame)
    return [
        WebSocketRoute(WS_PATH, endpoint, name="ws_session"),
        WebSocketRoute("/instances/{instance_id}" + WS_PATH, endpoint, name="ws_instance_session"),
    ]


class SessionEndpoint:
    """The ASGI app of the WebSocket routes: accepts or refuses a handshake, then serves
    one `Session` until the connection closes."""

    def __init__(
        self, gateway: Gateway, auth: Authenticator, *, loopback: bool, max_frame: int
    ) -> None:
        self.gateway = gateway
        self.auth = auth
        self.loopback = loopback
        self.max_frame = max_frame

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        try:
            session = self._open(scope)
        except _Denied as denied:
            await denied.send(scope, send)
            return
        await send(
            {"type": "websocket.accept", "headers": [(_SESSION, session.id.encode("latin-1"))]}
        )
        try:
            await session.serve(receive, send)
        except OSError:  # the client went away while we answered (uvicorn's ClientDisconnected)
            pass
        finally:
            session.end()

    def _open(self, scope: Scope) -> Session:
        refusal = handshake_refusal(scope, loopback=self.loopback, trusted=self.auth.trusted)
        if refusal is not None:
            raise _Denied(refusal.status, refusal.kind, refusal.message, refusal.hint)
        found: dict[bytes, str] = {}
        for name, value in scope["headers"]:  # the first of a repeated header, as REST reads it
            if name in _HANDSHAKE_HEADERS and name not in found:
                found[name] = value.decode("latin-1")
        role, authorization = found.get(_ROLE), found.get(b"authorization")
        session_id = found.get(_SESSION)
        try:
            principal = self.auth.principal(role, authorization)
        except AuthError as exc:
            raise _Denied(401, "unauthenticated", str(exc), bearer=True) from None
        instance = scope.get("path_params", {}).get("instance_id", DEFAULT_INSTANCE)
        try:
            self.gateway.instance(instance)
        except GatewayError as exc:
            raise _Denied(exc.status, "not_found", str(exc)) from None
        return Session(self.gateway, principal, instance, session_id or _fresh_id(), self.max_frame)


class Session:
    """One connection's episode: who calls, on which instance, under which session id."""

    def __init__(
        self,
        gateway: Gateway,
        principal: Principal,
        instance: str,
        session_id: str,
        max_frame: int = DEFAULT_MAX_BODY,
    ) -> None:
        self.gateway = gateway
        self.principal = principal
        self.instance = instance
        self.id = session_id
        """The trajectory `session` of every call (OpenEnv's `episode_id`)."""
        self.max_frame = max_frame
        self.steps = 0
        """`step` frames served since the connection opened or was last reset."""
        self._owned: str | None = None  # the instance a `reset` forked, dropped at the end

    async def serve(self, receive: Receive, send: Send) -> None:
        """Answer frames, one at a time and in order, until `close` or a disconnect."""
        while True:
            message = await receive()
            if message["type"] != "websocket.receive":
                return  # websocket.disconnect
            raw = message.get("text")
            answer = await self.answer(raw if raw is not None else message.get("bytes") or b"")
            if answer is _CLOSED:
                await send({"type": "websocket.close", "code": 1000})
                return
            await send({"type": "websocket.send", "text": answer})

    async def answer(self, raw: str | bytes) -> Any:
        """The text of the frame answering `raw` (`_CLOSED` for a `close` frame). Never
        raises: what cannot be served is an error frame, and the session goes on."""
        frame_id = None
        try:
            kind, data, frame_id = read_frame(raw, self.max_frame)
            if kind == "step":
                return await self._step(data, frame_id)
            if kind == "state":
                return state_frame(self.state(), frame_id)
            if kind == "reset":
                return self._reset(data, frame_id)
            return _CLOSED
        except FrameError as exc:
            return error_frame(exc)
        except UnknownInstance as exc:  # dropped over REST while this session used it
            hint = "send a reset frame for a fresh instance, or reconnect"
            return error_frame(
                FrameError(SESSION_ERROR, "not_found", str(exc), hint=hint, frame_id=frame_id)
            )
        except Exception:
            _log.exception("the WebSocket session %s failed to answer a frame", self.id)
            message = "the server failed to answer this frame; the session goes on"
            return error_frame(
                FrameError(EXECUTION_ERROR, "internal_error", message, frame_id=frame_id)
            )

    async def _step(self, data: Any, frame_id: Any) -> str:
        action, tool, arguments = step_body(data, frame_id)
        if action == "list_tools":
            tools = tools_shape(self.gateway.list_tools(self.principal, self.instance))
            self.steps += 1
            return observation_frame({"tools": tools}, frame_id)
        assert tool is not None
        result = await self.gateway.call(
            self.principal, tool, arguments, instance=self.instance, session=self.id
        )
        self.steps += 1
        return call_frame(tool, result, frame_id)

    def state(self) -> dict[str, Any]:
        """What a `state` frame answers: OpenEnv's `episode_id` and `step_count`, and the
        instance with its changelog id and state hash (as `GET /state` tells them)."""
        status = self.gateway.status(self.instance)
        return {
            "episode_id": self.id,
            "step_count": self.steps,
            "instance": self.instance,
            "changelog_id": status.changelog_id,
            "state_hash": status.state_hash,
        }

    def _reset(self, data: Any, frame_id: Any) -> str:
        data = {} if data is None else data
        if not isinstance(data, dict):
            raise FrameError(
                VALIDATION_ERROR,
                "bad_request",
                'data: expected an object like {"episode_id": "..."}',
                frame_id=frame_id,
            )
        episode_id = data.get("episode_id")
        if episode_id is not None and not (
            isinstance(episode_id, str) and 0 < len(episode_id) <= MAX_EPISODE_ID
        ):
            message = f"episode_id: expected a string of 1 to {MAX_EPISODE_ID} characters"
            raise FrameError(VALIDATION_ERROR, "bad_request", message, frame_id=frame_id)
        keep = data.get("keep", False)
        if not isinstance(keep, bool):
            raise FrameError(
                VALIDATION_ERROR, "bad_request", "keep: expected true or false", frame_id=frame_id
            )
        if not self.principal.admin:  # as POST /instances: forking is the control plane's
            raise FrameError(
                SESSION_ERROR,
                "forbidden",
                f"{self.principal} may not create instances",
                hint="an admin creates one (POST /instances) and this role connects to "
                "/instances/{id}/ws",
                frame_id=frame_id,
            )
        inst = self.gateway.create_instance()
        self._drop_owned()
        self.instance = inst.id
        self._owned = None if keep else inst.id
        self.id = episode_id or _fresh_id()
        self.steps = 0
        observation = {"episode_id": self.id, "instance": inst.id, "url": f"/instances/{inst.id}"}
        return observation_frame(observation, frame_id)

    def end(self) -> None:
        """The connection is over: drop the instance its last `reset` forked (unless kept)."""
        self._drop_owned()

    def _drop_owned(self) -> None:
        owned, self._owned = self._owned, None
        if owned is not None and owned in self.gateway.instances:
            self.gateway.drop_instance(owned)


class _Denied(Exception):
    """A refused handshake: answered over HTTP in the one REST error shape."""

    def __init__(
        self, status: int, kind: str, message: str, hint: str | None = None, *, bearer: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = json.dumps({"ok": False, "error": error_fields(kind, message, hint=hint)})
        self.bearer = bearer

    async def send(self, scope: Scope, send: Send) -> None:
        if "websocket.http.response" not in scope.get("extensions", {}):
            await send({"type": "websocket.close", "code": 1008})  # the server answers 403
            return
        body = self.body.encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if self.bearer:
            headers.append((b"www-authenticate", b"Bearer"))
        await send(
            {"type": "websocket.http.response.start", "status": self.status, "headers": headers}
        )
        await send({"type": "websocket.http.response.body", "body": body})


def _fresh_id() -> str:
    return uuid.uuid4().hex
