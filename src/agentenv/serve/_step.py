"""`POST /step`, the hot route, answered in front of the framework.

A `/step` call through FastAPI cost more than the `Gateway.call` it makes (issue 12): route
matching over the doubled route table, the middleware stack, the Request object, the
endpoint wrapper, a pydantic model per body. `StepDispatch` answers `POST /step` and
`POST /instances/{id}/step` straight from the ASGI scope: the guard's header checks, the
body limit while it reads, the credentials, one `json` parse, a plain check of the body's
shape (the `StepRequest` model decides whenever that check is not sure), one
`Gateway.call`, one `json.dumps`. The FastAPI route stays, documented in the OpenAPI
document and answering with the same `answer_step`, for what the dispatch leaves to it.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.types import Message, Receive, Scope, Send

from agentenv.env.tool import Principal
from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator, AuthError
from agentenv.gateway.errors import DEFAULT_INSTANCE, GatewayError
from agentenv.serve._errors import known_error_response
from agentenv.serve._guard import RequestGuard, too_large
from agentenv.serve._http import HttpError, error_fields, parse_json, validation_message
from agentenv.spec.wire import StepRequest, ToolInfo

_STATUS_BY_KIND = {"denied": 403, "unknown_tool": 404, "timeout": 504}
_STEP_KEYS = frozenset({"action", "tool_name", "arguments"})
_JSON_HEADERS = (b"content-type", b"application/json")
_INSTANCES = "/instances/"


def step_body(data: Any) -> tuple[str, str | None, dict[str, Any]]:
    """A parsed `/step` body as (action, tool_name, arguments), with `StepRequest`'s verdict.

    The plain check accepts only bodies the model accepts, with the same values (proven by
    tests/serve/test_rest_fast.py over many bodies); anything else goes to the model, so a
    bad body is refused with the model's own message: a 400 HttpError naming the field.
    """
    if type(data) is dict and data.keys() <= _STEP_KEYS:
        action = data.get("action")
        tool_name = data.get("tool_name")
        arguments = data.get("arguments", {})
        if (
            type(arguments) is dict
            and (tool_name is None or type(tool_name) is str)
            and ((action == "call_tool" and tool_name) or action == "list_tools")
        ):
            return action, tool_name, arguments  # type: ignore[return-value]
    try:
        body = StepRequest.model_validate(data)
    except ValidationError as exc:
        raise HttpError(400, "bad_request", validation_message(exc)) from None
    return body.action, body.tool_name, body.arguments


def step_tools(tools: list[ToolInfo]) -> list[dict[str, Any]]:
    """Tools as `/step list_tools` answers them: upstream's `name`, `description` and
    `parameters`, with MCP's `inputSchema` (and `_meta`, if any) kept beside them."""
    out = []
    for tool in tools:
        data = tool.model_dump(by_alias=True)
        out.append(
            {
                "name": data["name"],
                "description": data["description"],
                "parameters": data["inputSchema"],
                **data,
            }
        )
    return out


async def answer_step(
    gateway: Gateway, principal: Principal, raw: bytes, instance: str, session: str | None
) -> tuple[int, dict[str, Any]]:
    """The status and JSON answer of a `/step` with body `raw` (HttpError for a bad body;
    GatewayError for an unknown instance)."""
    action, tool_name, arguments = step_body(parse_json(raw))
    if action == "list_tools":
        return 200, {"tools": step_tools(gateway.list_tools(principal, instance))}
    assert tool_name is not None
    result = await gateway.call(principal, tool_name, arguments, instance=instance, session=session)
    answer = result.to_wire()
    if result.error is None:
        return 200, answer
    answer["error"] = error_fields(result.error.kind, result.error.message)
    status = _STATUS_BY_KIND.get(result.error.kind, 200)
    if status != 200:  # a refused call answers in the error shape (StepResult keys kept)
        answer = {"ok": False, **answer}
    return status, answer


class _TooLarge(Exception):
    pass


class _Disconnected(Exception):
    pass


class StepDispatch:
    """Answers `POST /step` and `POST /instances/{id}/step` from the ASGI scope, with the
    checks the app's middleware and FastAPI route make, in the same order: guard (421, 403,
    415), declared length (413), credentials (401), streamed length (413), body (400),
    instance (404), then the call."""

    def __init__(self, gateway: Gateway, auth: Authenticator, guard: RequestGuard, max_body: int):
        self.gateway = gateway
        self.auth = auth
        self.guard = guard
        self.max_body = max_body

    @staticmethod
    def instance_of(scope: Scope) -> str | None:
        """The instance a request is a `/step` of, or None if it is not one (another route,
        another method, or a path the framework should see: a root_path, an empty id)."""
        if scope["method"] != "POST" or scope.get("root_path"):
            return None
        path: str = scope["path"]
        if path == "/step":
            return DEFAULT_INSTANCE
        if path.startswith(_INSTANCES) and path.endswith("/step"):
            middle = path[len(_INSTANCES) : -5]
            if middle and "/" not in middle:
                return middle
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send, instance: str) -> None:
        """Answer one `/step` request."""
        refusal = self.guard.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        role = authorization = session = None
        for name, value in scope["headers"]:  # the first of each, as Starlette's Headers.get
            if name == b"agentenv-role":
                role = value.decode("latin-1") if role is None else role
            elif name == b"authorization":
                authorization = value.decode("latin-1") if authorization is None else authorization
            elif name == b"agentenv-session":
                session = value.decode("latin-1") if session is None else session
            elif name == b"content-length" and _over(value, self.max_body):
                await too_large(scope, self.max_body)(scope, receive, send)
                return
        try:
            principal = self.auth.principal(role, authorization)
            raw = await self._body(receive)
            status, answer = await answer_step(self.gateway, principal, raw, instance, session)
        except (HttpError, AuthError, GatewayError) as exc:
            response = known_error_response(exc)
            assert response is not None
            await response(scope, receive, send)
            return
        except _TooLarge:
            await too_large(scope, self.max_body)(scope, receive, send)
            return
        except _Disconnected:
            return  # nobody is left to answer
        data = json.dumps(answer).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-length", str(len(data)).encode()), _JSON_HEADERS],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def _body(self, receive: Receive) -> bytes:
        message: Message = await receive()
        if message["type"] != "http.request":
            raise _Disconnected
        body: bytes = message.get("body", b"")
        if len(body) > self.max_body:
            raise _TooLarge
        if not message.get("more_body", False):
            return body
        chunks = [body]
        seen = len(body)
        while True:
            message = await receive()
            if message["type"] != "http.request":
                raise _Disconnected
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_body:
                raise _TooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def _over(value: bytes, limit: int) -> bool:
    try:
        return int(value) > limit
    except ValueError:  # not a number: the streamed length decides
        return False
