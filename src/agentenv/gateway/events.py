"""Trajectory records as upstream's trajectory events: what `GET /trajectory` serves.

Each record renders to upstream's event types, with our own fields as added keys:

- a call: `tool_call` (`tool_call: {function_name, arguments}`, `role`), then its outcome:
  `tool_call_result` when the caller got a result (`isError` true for a tool error or bad
  arguments), `tool_call_failed` when it got none (denied, unknown tool, timeout). Both
  carry `changelog_id_before` and `changelog_id`, the write window of the call;
- a trigger's tool action: `internal_tool_call` (`trigger_id`, `tool`, `arguments`, `as`,
  `ok`, `result_len`, `result_sha256`, `changelog_id_before`, `changelog_id_after`);
- a trigger's firing: `trigger_fired`, with `outcome` (`fired` or `failed`) and `error`;
  it is recorded when the firing ends, so it follows the firing's actions;
- a control step and a conversation message: our own `control` and `message` events.

Every event has `event_id` (`event_N`, numbered from 1 over the whole trajectory),
`timestamp_utc`, `virtual_time` while the clock is armed, and our `seq` (the record it came
from). The events of a record whose values had to be replaced to stay JSON also carry our
`sanitized` (the record's `{path, what}` list, paths into the record: `/args/...` is in
`tool_call.arguments`, `/result/...` in the outcome; `gateway.sanitize`). Upstream's readers
take events as plain JSON objects, so added keys pass them by. The models below are the schema; rendering builds plain dicts (one per event, no
validation) and the tests check them against the models.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from typing import IO, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from agentenv.gateway.record import TrajectoryRecord, events_of
from agentenv.gateway.sanitize import Sanitized
from agentenv.gateway.trajectory import Trajectory

SYSTEM_ROLE = "system"
_DIGEST_CHARS = 16
_FAILED_KINDS = frozenset({"denied", "unknown_tool", "timeout"})
"""Error kinds whose caller got no tool result (REST answers them 403, 404, 504)."""


class _Event(BaseModel):
    model_config = ConfigDict(extra="allow")

    event_id: str
    timestamp_utc: str
    virtual_time: str | None = None
    seq: int = Field(description="Ours: the trajectory record this event renders.")
    sanitized: list[Sanitized] | None = Field(
        None, description="Ours: the record's values replaced so that it stays JSON."
    )


class ToolCallSpec(BaseModel):
    """What was called: upstream's `tool_call` object."""

    function_name: str
    arguments: dict[str, Any]


class ToolCallEvent(_Event):
    """A tool call as it arrived."""

    event_type: Literal["tool_call"]
    tool_call: ToolCallSpec
    role: str | None
    principal: str | None = Field(None, description="Ours: who called.")
    session: str | None = Field(None, description="Ours: the session header, if any.")


class ToolCallResultEvent(_Event):
    """The result a call's caller got (MCP's CallToolResult)."""

    event_type: Literal["tool_call_result"]
    tool_call_event_id: str
    tool_call_result: dict[str, Any]
    changelog_id_before: int | None
    changelog_id: int


class ToolCallFailedEvent(_Event):
    """A call that produced no result."""

    event_type: Literal["tool_call_failed"]
    tool_call_event_id: str
    error: str
    changelog_id_before: int | None
    changelog_id: int


class InternalToolCallEvent(_Event):
    """A trigger's tool action."""

    event_type: Literal["internal_tool_call"]
    source: Literal["trigger_engine"]
    trigger_id: str | None
    action_index: int | None
    tool: str | None
    arguments: dict[str, Any]
    as_: str | None = Field(alias="as")
    ok: bool
    result_len: int
    result_sha256: str
    changelog_id_before: int | None
    changelog_id_after: int


class TriggerFiredEvent(_Event):
    """A trigger's firing, recorded when it ended."""

    event_type: Literal["trigger_fired"]
    source: Literal["trigger_engine"]
    trigger_id: str | None
    outcome: Literal["fired", "failed"] = Field(description="Ours.")
    error: str | None = Field(None, description="Ours: why the firing failed.")


class ControlEvent(_Event):
    """Ours: a control-plane step (clock, triggers, tool access, data plane, restore)."""

    event_type: Literal["control"]
    event: str | None
    detail: str | None
    role: str | None
    principal: str | None


class MessageEvent(_Event):
    """Ours: a message of a conversation, recorded between the calls."""

    event_type: Literal["message"]
    role: str | None
    principal: str | None
    session: str | None
    text: str | None


TrajectoryEvent = Annotated[
    ToolCallEvent
    | ToolCallResultEvent
    | ToolCallFailedEvent
    | InternalToolCallEvent
    | TriggerFiredEvent
    | ControlEvent
    | MessageEvent,
    Field(discriminator="event_type"),
]
EVENT_ADAPTER: TypeAdapter[TrajectoryEvent] = TypeAdapter(TrajectoryEvent)
"""Validates (and documents, as JSON schema) one event line of `GET /trajectory`."""


def event_id(number: int) -> str:
    """The id of the event numbered `number` (0-based) in a trajectory."""
    return f"event_{number + 1}"


def _utc(moment: datetime) -> str:
    return moment.isoformat()


def _virtual(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


def _stamp(event: dict[str, Any], number: int, wall: datetime, record: TrajectoryRecord) -> None:
    event["event_id"] = event_id(number)
    event["timestamp_utc"] = _utc(wall)
    if record.virtual_time is not None:
        event["virtual_time"] = _virtual(record.virtual_time)
    event["seq"] = record.seq
    if record.sanitized:
        event["sanitized"] = record.sanitized


def _result_text(record: TrajectoryRecord) -> str:
    if record.error is not None:
        return f"Error: {record.error.message}"
    value = record.result
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def render(record: TrajectoryRecord, first: int) -> list[dict[str, Any]]:
    """The events of one record, numbered from `first` (0-based)."""
    if record.kind == "call":
        return _call_events(record, first)
    if record.kind == "trigger" and record.event is None:
        event = _internal_call(record)
    elif record.kind == "trigger":
        event = {
            "event_type": "trigger_fired",
            "source": "trigger_engine",
            "trigger_id": record.trigger_id,
            "outcome": "failed" if record.event == "failed" else "fired",
        }
        if record.detail is not None:
            event["error"] = record.detail
    elif record.kind == "message":
        event = {
            "event_type": "message",
            "role": record.role,
            "principal": record.principal,
            "session": record.session,
            "text": record.detail,
        }
    else:
        event = {
            "event_type": "control",
            "event": record.event,
            "detail": record.detail,
            "role": record.role,
            "principal": record.principal,
        }
    _stamp(event, first, record.wall_time, record)
    return [event]


def _call_events(record: TrajectoryRecord, first: int) -> list[dict[str, Any]]:
    call: dict[str, Any] = {
        "event_type": "tool_call",
        "tool_call": {"function_name": record.tool, "arguments": record.args or {}},
        "role": record.role,
        "principal": record.principal,
    }
    if record.session is not None:
        call["session"] = record.session
    _stamp(call, first, record.wall_time - timedelta(milliseconds=record.duration_ms), record)
    error = record.error
    outcome: dict[str, Any]
    if error is not None and error.kind in _FAILED_KINDS:
        outcome = {
            "event_type": "tool_call_failed",
            "tool_call_event_id": call["event_id"],
            "error": f"{error.kind}: {error.message}",
        }
    else:
        result: dict[str, Any] = {
            "content": [{"type": "text", "text": _result_text(record)}],
            "isError": error is not None,
        }
        if error is None:
            value = record.result
            result["structuredContent"] = value if isinstance(value, dict) else {"result": value}
        outcome = {
            "event_type": "tool_call_result",
            "tool_call_event_id": call["event_id"],
            "tool_call_result": result,
        }
    outcome["changelog_id_before"] = record.changelog_id_before
    outcome["changelog_id"] = record.changelog_id
    if error is not None:
        outcome["error_kind"] = error.kind
        outcome["denied"] = record.denied
    outcome["state_hash"] = record.state_hash
    outcome["duration_ms"] = record.duration_ms
    _stamp(outcome, first + 1, record.wall_time, record)
    return [call, outcome]


def _internal_call(record: TrajectoryRecord) -> dict[str, Any]:
    text = _result_text(record)
    event: dict[str, Any] = {
        "event_type": "internal_tool_call",
        "source": "trigger_engine",
        "trigger_id": record.trigger_id,
        "action_index": None,  # our records do not keep it; see docs/protocol.md
        "tool": record.tool,
        "arguments": record.args or {},
        "as": None if record.role == SYSTEM_ROLE else record.role,
        "ok": record.error is None,
        "result_len": len(text),
        "result_sha256": hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[
            :_DIGEST_CHARS
        ],
        "changelog_id_before": record.changelog_id_before,
        "changelog_id_after": record.changelog_id,
    }
    if record.error is not None:
        event["error"] = f"{record.error.kind}: {record.error.message}"
    return event


def trajectory_events(
    trajectory: Trajectory, since: int = 0, limit: int | None = None
) -> list[dict[str, Any]]:
    """The events of a live trajectory after the first `since` of them (at most `limit`)."""
    return list(iter_events(trajectory, since, limit))


def iter_events(
    trajectory: Trajectory, since: int = 0, limit: int | None = None
) -> Iterator[dict[str, Any]]:
    """The events numbered `since` to `since + limit` (or the end, as it is when iteration
    begins), rendered a record at a time: spilled records are read back chunk by chunk."""
    since = max(since, 0)
    stop = trajectory.event_count if limit is None else min(trajectory.event_count, since + limit)
    if since >= stop:
        return
    start = trajectory.record_at_event(since)
    last = trajectory.record_at_event(stop - 1)
    number = trajectory.first_event(start)
    for record in trajectory.records(start, last + 1):
        for event in render(record, number):
            if since <= number < stop:
                yield event
            number += 1


def records_events(records: Iterable[TrajectoryRecord]) -> list[dict[str, Any]]:
    """The events of records read back from a file (numbered as the live trajectory did)."""
    events: list[dict[str, Any]] = []
    number = 0
    for record in records:
        events.extend(render(record, number))
        number += events_of(record)
    return events


def event_line(event: dict[str, Any]) -> bytes:
    """One event as a JSON line (UTF-8). Events of appended records always encode; one
    rendered from records read elsewhere may hold a lone surrogate, which is then escaped
    (`\\udXXX`, as JSON allows) rather than lost."""
    text = json.dumps(event, ensure_ascii=False, default=str)
    try:
        return text.encode() + b"\n"
    except UnicodeEncodeError:
        return json.dumps(event, default=str).encode() + b"\n"


def write_events(
    out: IO[bytes], trajectory: Trajectory, since: int = 0, limit: int | None = None
) -> int:
    """Write the events `iter_events` gives to `out` as JSON lines; the bytes written."""
    written = 0
    batch: list[bytes] = []
    for event in iter_events(trajectory, since, limit):
        batch.append(event_line(event))
        if len(batch) >= 256:
            written += out.write(b"".join(batch))
            batch.clear()
    return written + out.write(b"".join(batch))


def to_jsonl(events: Iterable[dict[str, Any]]) -> bytes:
    """Events as JSON lines (UTF-8)."""
    return b"".join(event_line(e) for e in events)
