"""The JSON-RPC 2.0 data plane at the card's `url` (`/agentenv`): data/reset, add, get."""

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


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


async def handle(
    gateway: Gateway, principal: Principal, instance: str, payload: Any
) -> dict[str, Any] | list[dict[str, Any]] | None:
    """Answer one request or a batch; notifications (no id) get no answer."""
    if isinstance(payload, list):
        if not payload:
            return _error(None, INVALID_REQUEST, "empty batch")
        answers = [await _one(gateway, principal, instance, item) for item in payload]
        kept = [a for a in answers if a is not None]
        return kept or None
    return await _one(gateway, principal, instance, payload)


async def _one(
    gateway: Gateway, principal: Principal, instance: str, payload: Any
) -> dict[str, Any] | None:
    raw_id = payload.get("id") if isinstance(payload, dict) else None
    try:
        request = JsonRpcRequest.model_validate(payload)
    except ValidationError as exc:
        return _error(raw_id, INVALID_REQUEST, f"invalid request: {validation_message(exc)}")
    params = request.params if isinstance(request.params, dict) else {}
    try:
        if request.method == "data/reset":
            await gateway.data_reset(principal, instance=instance)
            result: Any = {}
        elif request.method == "data/add":
            try:
                parsed = DataAddParams.model_validate(params)
            except ValidationError as exc:
                return _error(request.id, INVALID_PARAMS, validation_message(exc))
            written = await gateway.data_add(principal, parsed.parts, instance=instance)
            result = {"records": written}
        elif request.method == "data/get":
            parts = gateway.data_get(instance)
            result = {"parts": [p.model_dump(by_alias=True, exclude_none=True) for p in parts]}
        else:
            return _error(request.id, METHOD_NOT_FOUND, f"unknown method {request.method!r}")
    except Forbidden as exc:
        return _error(request.id, FORBIDDEN, str(exc))
    except GatewayError as exc:
        return _error(request.id, DATA_ERROR, str(exc))
    if request.id is None and "id" not in (payload or {}):
        return None
    return {"jsonrpc": "2.0", "id": request.id, "result": result}
