"""The JSON-RPC 2.0 data plane at the card's `url` (`/agentenv`): data/reset, add, get.

Answers and errors are shaped as upstream AgentEnv's server SDK sends them: `data/reset` and
`data/add` answer `{}`, `data/get` answers `{parts}`; an error carries `error.data.code`
(`reset_failed`, `add_failed`, `get_failed`, ...) and `error.data.detail`. A composed child's
data plane (`/svc/<key>/agentenv`) is the same, scoped to that child's collections.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agentenv.env.tool import Principal
from agentenv.gateway import Gateway
from agentenv.gateway.errors import Forbidden, GatewayError
from agentenv.serve._http import validation_message
from agentenv.spec.wire import DataAddParams, JsonRpcRequest

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
DATA_ERROR = -32000
FORBIDDEN = -32003

# The `error.data.code` of a method that failed, as upstream's SDK names them.
_FAILED = {"data/reset": "reset_failed", "data/add": "add_failed", "data/get": "get_failed"}


def error(request_id: Any, code: int, message: str, data_code: str) -> dict[str, Any]:
    """A JSON-RPC error answer; `data` names the failure for programs (`data.code`) and
    repeats the message (`data.detail`)."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": code, "message": message, "data": {"code": data_code, "detail": message}},
    }


async def handle(
    gateway: Gateway, principal: Principal, instance: str, payload: Any, *, namespace: str = ""
) -> dict[str, Any] | list[dict[str, Any]] | None:
    """Answer one request or a batch; notifications (no id) get no answer. `namespace` scopes
    the data plane to one composed child (`""`: the whole environment)."""
    if isinstance(payload, list):
        if not payload:
            return error(None, INVALID_REQUEST, "empty batch", "invalid_request")
        answers = [await _one(gateway, principal, instance, item, namespace) for item in payload]
        kept = [a for a in answers if a is not None]
        return kept or None
    return await _one(gateway, principal, instance, payload, namespace)


def _valid_id(value: Any) -> bool:
    # JSON-RPC ids are strings, numbers or null; pydantic would read `true` as 1.
    return value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))


async def _one(
    gateway: Gateway, principal: Principal, instance: str, payload: Any, namespace: str
) -> dict[str, Any] | None:
    raw_id = payload.get("id") if isinstance(payload, dict) else None
    if not _valid_id(raw_id):  # never echo an id that is not one (the spec says null)
        message = f"invalid request: id: expected a string, a number or null, got {raw_id!r:.80}"
        return error(None, INVALID_REQUEST, message, "invalid_request")
    try:
        request = JsonRpcRequest.model_validate(payload)
    except ValidationError as exc:
        message = f"invalid request: {validation_message(exc)}"
        return error(raw_id, INVALID_REQUEST, message, "invalid_request")
    params = request.params if isinstance(request.params, dict) else {}
    try:
        if request.method == "data/reset":
            await gateway.data_reset(principal, instance=instance, namespace=namespace)
            result: Any = {}
        elif request.method == "data/add":
            try:
                parsed = DataAddParams.model_validate(params)
            except ValidationError as exc:
                return error(request.id, INVALID_PARAMS, validation_message(exc), "invalid_params")
            await gateway.data_add(principal, parsed.parts, instance=instance, namespace=namespace)
            result = {}
        elif request.method == "data/get":
            parts = await gateway.data_fetch(instance, namespace=namespace)
            result = {"parts": [p.model_dump(by_alias=True, exclude_none=True) for p in parts]}
        else:
            message = f"method not found: {request.method!r}"
            return error(request.id, METHOD_NOT_FOUND, message, "method_not_found")
    except Forbidden as exc:
        return error(request.id, FORBIDDEN, str(exc), "permission_denied")
    except GatewayError as exc:
        return error(request.id, DATA_ERROR, str(exc), _FAILED[request.method])
    except (ValueError, TypeError) as exc:
        # Data the state cannot hold (a lone surrogate it cannot hash, ...) that the
        # gateway did not name itself: still this request's error, never a 500.
        message = f"{request.method} failed: {type(exc).__name__}: {exc}"
        return error(request.id, DATA_ERROR, message, _FAILED[request.method])
    if request.id is None and "id" not in (payload or {}):
        return None
    return {"jsonrpc": "2.0", "id": request.id, "result": result}
