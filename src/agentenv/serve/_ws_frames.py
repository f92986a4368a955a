"""The frames of the WebSocket session transport: reading a client's, writing ours.

OpenEnv's shape (`openenv.core.env_server.types`, the `/ws` endpoint of its
`http_server.py`): every frame is `{"type": ..., "data": {...}}`. A client sends `reset`,
`step`, `state` or `close`; the server answers `observation`, `state` or `error`. Ours
adds an optional `id`, echoed in the answer (OpenEnv answers in order and has none).
docs/websocket.md says which fields match OpenEnv's and why the others differ.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from pydantic import ValidationError

from agentenv.gateway.results import CallResult
from agentenv.serve._http import HttpError, error_fields, parse_json, validation_message
from agentenv.spec.limits import BODY_DEPTH
from agentenv.spec.wire import StepRequest, ToolInfo

FRAME_TYPES = ("reset", "step", "state", "close")
"""What a client may send."""

# OpenEnv's WSErrorCode values, and ours where it has none.
INVALID_JSON = "INVALID_JSON"
UNKNOWN_TYPE = "UNKNOWN_TYPE"
VALIDATION_ERROR = "VALIDATION_ERROR"
EXECUTION_ERROR = "EXECUTION_ERROR"
SESSION_ERROR = "SESSION_ERROR"
TOO_LARGE = "TOO_LARGE"  # ours: OpenEnv leaves the size to the WebSocket library

_FRAME_KEYS = frozenset({"type", "data", "id"})
_CODE_OF_PARSE_KIND = {"malformed_json": INVALID_JSON, "too_deep": INVALID_JSON}
# A call's error kind as OpenEnv's ToolErrorType (its clients refuse any other value).
# A denied tool is absent from the caller's tool list, so to the caller it is not found.
_TOOL_ERROR_TYPE = {
    "unknown_tool": "tool_not_found",
    "denied": "tool_not_found",
    "invalid_arguments": "invalid_args",
    "timeout": "timeout",
}
# Kinds `/step` answers with a status other than 200, and so with `"ok": false` first.
_REFUSED = frozenset({"denied", "unknown_tool", "timeout"})


class FrameError(Exception):
    """A frame that cannot be served: answered with an error frame, the session goes on."""

    def __init__(
        self, code: str, kind: str, message: str, *, hint: str | None = None, frame_id: Any = None
    ) -> None:
        self.code = code
        self.kind = kind
        self.message = message
        self.hint = hint
        self.frame_id = frame_id
        super().__init__(message)


def read_frame(raw: str | bytes, max_bytes: int) -> tuple[str, Any, Any]:
    """A client frame (a text frame's str, a binary frame's bytes) as (type, data, id);
    FrameError if it is too large, not JSON, nested too deep, not an object, of an unknown
    type, or carries an unknown key or a bad id.

    JSON is held to the REST body's limits and messages (`_http.parse_json`). A text frame
    is already valid UTF-8 (the WebSocket layer checked it), so when its brackets cannot
    nest past the limit it is parsed as it is; anything else, and every frame `json`
    refuses, goes through `parse_json` for the verdict and its message."""
    if isinstance(raw, str):
        if len(raw) > max_bytes or (len(raw) * 4 > max_bytes and len(raw.encode()) > max_bytes):
            raise _too_large(max_bytes)
        frame: Any = _MISSING
        if raw and raw.count("[") + raw.count("{") <= BODY_DEPTH:
            with contextlib.suppress(ValueError, RecursionError):  # parse_json says why
                frame = json.loads(raw)
        if frame is _MISSING:
            frame = _parse(raw.encode())
    else:
        if len(raw) > max_bytes:
            raise _too_large(max_bytes)
        frame = _parse(raw)
    if type(frame) is not dict:
        raise FrameError(
            VALIDATION_ERROR,
            "bad_request",
            'a frame is a JSON object like {"type": "step", "data": {...}}',
        )
    frame_id = frame.get("id")
    if frame_id is not None and (
        isinstance(frame_id, bool) or not isinstance(frame_id, (str, int))
    ):
        raise FrameError(VALIDATION_ERROR, "bad_request", "id: expected a string or an integer")
    kind = frame.get("type")
    if kind not in FRAME_TYPES:
        shown = json.dumps(kind)[:80] if kind is not None else "none"
        raise FrameError(
            UNKNOWN_TYPE,
            "bad_request",
            f"unknown frame type {shown}: expected one of {', '.join(FRAME_TYPES)}",
            hint="MCP is served over Streamable HTTP at /mcp" if kind == "mcp" else None,
            frame_id=frame_id,
        )
    if len(frame) > 1 and not _FRAME_KEYS.issuperset(frame):
        extra = sorted(str(k) for k in frame if k not in _FRAME_KEYS)
        raise FrameError(
            VALIDATION_ERROR, "bad_request", f"{extra[0]}: unknown field", frame_id=frame_id
        )
    return kind, frame.get("data"), frame_id


_MISSING = object()


def _too_large(max_bytes: int) -> FrameError:
    return FrameError(
        TOO_LARGE,
        "too_large",
        f"frame over the limit of {max_bytes} bytes",
        hint="send less, or start the server with a larger body limit",
    )


def _parse(raw: bytes) -> Any:
    if not raw:
        raise FrameError(INVALID_JSON, "bad_request", "an empty frame: expected a JSON object")
    try:
        return parse_json(raw)
    except HttpError as exc:
        code = _CODE_OF_PARSE_KIND.get(exc.kind, INVALID_JSON)
        message = exc.message.replace("JSON body", "JSON frame").replace("request body", "frame")
        raise FrameError(code, exc.kind, message, hint=exc.hint) from None


def step_body(data: Any, frame_id: Any) -> tuple[str, str | None, dict[str, Any]]:
    """A `step` frame's data as the `/step` body it stands for, (action, tool_name,
    arguments): OpenEnv's action (`{"type": "call_tool", "tool_name", "arguments"}`,
    `{"type": "list_tools"}`, an ignored `metadata`) or the `/step` body itself
    (`{"action": ...}`).

    OpenEnv's call_tool with exactly its three keys, a tool name and an arguments object
    is taken as it is (what `StepRequest` would make of it; tests/serve/test_ws_frames.py
    proves they agree); everything else is `StepRequest`'s to judge."""
    if type(data) is dict and len(data) == 3 and data.get("type") == "call_tool":
        tool = data.get("tool_name")
        arguments = data.get("arguments")
        if type(tool) is str and tool and type(arguments) is dict:
            return "call_tool", tool, arguments
    body = step_request(data, frame_id)
    return body.action, body.tool_name, body.arguments


def step_request(data: Any, frame_id: Any = None) -> StepRequest:
    """A `step` frame's data as the `StepRequest` model (the judge of every body)."""
    if not isinstance(data, dict):
        raise FrameError(
            VALIDATION_ERROR,
            "bad_request",
            'data: expected an object like {"type": "call_tool", "tool_name": "...", '
            '"arguments": {...}}',
            frame_id=frame_id,
        )
    body = dict(data)
    body.pop("metadata", None)  # OpenEnv's Action carries one; a tool call has no use for it
    action = body.pop("type", None)
    if action is not None and body.setdefault("action", action) != action:
        raise FrameError(
            VALIDATION_ERROR,
            "bad_request",
            "data: 'type' and 'action' name different actions",
            frame_id=frame_id,
        )
    try:
        return StepRequest.model_validate(body)
    except ValidationError as exc:
        raise FrameError(
            VALIDATION_ERROR, "bad_request", validation_message(exc), frame_id=frame_id
        ) from None


def result_body(result: CallResult) -> dict[str, Any]:
    """What `POST /step` answers for this call result (its body, whatever its status)."""
    answer = result.to_wire()
    error = result.error
    if error is None:
        return answer
    answer["error"] = error_fields(error.kind, error.message)
    if error.kind in _REFUSED:
        return {"ok": False, **answer}
    return answer


def call_frame(name: str, result: CallResult, frame_id: Any) -> str:
    """The `observation` frame answering a tool call: OpenEnv's CallToolObservation with
    the `/step` body as its `result`."""
    error = result.error
    tool_error = (
        None
        if error is None
        else {
            "error_type": _TOOL_ERROR_TYPE.get(error.kind, "execution_error"),
            "message": error.message,
        }
    )
    observation = {"tool_name": name, "result": result_body(result), "error": tool_error}
    return observation_frame(observation, frame_id)


def observation_frame(observation: dict[str, Any], frame_id: Any) -> str:
    """An `observation` frame (OpenEnv's serialize_observation: reward and done beside it;
    a tool environment has neither, so they are null and false)."""
    frame: dict[str, Any] = {
        "type": "observation",
        "data": {"observation": observation, "reward": None, "done": False},
    }
    if frame_id is not None:
        frame["id"] = frame_id
    return json.dumps(frame)


def state_frame(state: dict[str, Any], frame_id: Any) -> str:
    """A `state` frame."""
    frame: dict[str, Any] = {"type": "state", "data": state}
    if frame_id is not None:
        frame["id"] = frame_id
    return json.dumps(frame)


def error_frame(exc: FrameError) -> str:
    """An `error` frame: OpenEnv's `message` and `code`, and our one error object beside."""
    frame: dict[str, Any] = {
        "type": "error",
        "data": {
            "message": exc.message,
            "code": exc.code,
            "error": error_fields(exc.kind, exc.message, hint=exc.hint),
        },
    }
    if exc.frame_id is not None:
        frame["id"] = exc.frame_id
    return json.dumps(frame)


def tools_shape(tools: list[ToolInfo]) -> list[dict[str, Any]]:
    """Tools as `/step list_tools` answers them (`rest.step_tools`, written again here: that
    module imports this one): upstream's `name`, `description` and `parameters`, with
    MCP's `inputSchema` (and `_meta`, if any) kept beside them."""
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
