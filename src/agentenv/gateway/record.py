"""One trajectory record: the `TrajectoryRecord` readers get, and its JSON line.

A trajectory keeps its records as rows (`rows.py`); `record(row)` builds the record a
reader asks for and `record_line` is its JSON line (pydantic's dump; `rows.row_line`
writes the same bytes straight from a row where it can).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from datetime import datetime
from typing import Any, Literal

from pydantic import TypeAdapter

from agentenv.gateway.rows import Row, notes_of, time_of
from agentenv.gateway.sanitize import Sanitized, clean_fields
from agentenv.spec.wire import CallError


@dataclass(slots=True, kw_only=True)
class TrajectoryRecord:
    """One record: a call (or denial), a trigger firing or action, a control step, a message.

    A plain dataclass because one is made per call on the hot path; pydantic validates
    and serialises it through `RECORD_ADAPTER` (its JSON schema is the wire contract).
    """

    seq: int
    kind: Literal["call", "trigger", "control", "message"]
    wall_time: datetime
    state_hash: str
    changelog_id: int
    changelog_id_before: int | None = None
    """For a call whose tool ran: the changelog id before it; `(before, changelog_id]` are
    the rows it wrote (the write window `GET /changes` attributes). None otherwise."""
    virtual_time: datetime | None = None
    role: str | None = None
    principal: str | None = None
    session: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    result: Any = None
    error: CallError | None = None
    denied: bool = False
    duration_ms: float = 0.0
    trigger_id: str | None = None
    event: str | None = None
    detail: str | None = None
    """A control step's or a trigger's detail, a message's text; for a call whose tool
    crashed (raised something other than ToolError or a state error), the traceback,
    cut to `raised.TRACE_LIMIT` characters. Never sent to the agent, nor in upstream's
    events (`GET /trajectory`): only in our records."""
    sanitized: list[Sanitized] | None = None
    """The values replaced so that the record stays JSON (`gateway.sanitize`); None when
    none was."""

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data."""
        return RECORD_ADAPTER.dump_python(self, mode="json")


RECORD_ADAPTER: TypeAdapter[TrajectoryRecord] = TypeAdapter(TrajectoryRecord)


_FIELDS = tuple(f.name for f in dataclass_fields(TrajectoryRecord))
_scan = json.decoder.JSONDecoder().scan_once
"""text, 0 -> (value, end): the C scanner `json.loads` calls, without its wrapper's checks
for surrounding whitespace and trailing data (a row's JSON text, written by our encoder,
has neither); several times faster for small values."""
_error = CallError.model_construct


def record_line(record: TrajectoryRecord) -> bytes:
    """One record as a JSON line (what `to_jsonl` and `?format=records` give)."""
    try:
        return RECORD_ADAPTER.dump_json(record) + b"\n"
    except (ValueError, TypeError, RecursionError):
        # Only a record built or changed outside `append` gets here: still one readable line.
        fields = {name: getattr(record, name) for name in _FIELDS}
        notes = clean_fields(fields)
        fields["sanitized"] = [*(record.sanitized or []), *notes] or None
        return RECORD_ADAPTER.dump_json(TrajectoryRecord(**fields)) + b"\n"


def record(row: Row) -> TrajectoryRecord:
    """The `TrajectoryRecord` a row stands for (a new object on every call)."""
    (
        seq, kind, wall, state_hash, changelog_id, before, virtual, role, principal, session,
        tool, args, result, error_kind, error_message, denied, duration_ms, trigger_id, event,
        detail, notes,
    ) = row  # fmt: skip
    return TrajectoryRecord(
        seq=seq,
        kind=kind,
        wall_time=time_of(wall),  # type: ignore[arg-type]
        state_hash=state_hash,
        changelog_id=changelog_id,
        changelog_id_before=before,
        virtual_time=time_of(virtual),
        role=role,
        principal=principal,
        session=session,
        tool=tool,
        args=None if args is None else dict(args) if type(args) is dict else _scan(args, 0)[0],
        result=None if result is None else _scan(result, 0)[0],
        error=None if error_kind is None else _error(kind=error_kind, message=error_message),
        denied=denied,
        duration_ms=duration_ms,
        trigger_id=trigger_id,
        event=event,
        detail=detail,
        sanitized=None if notes is None else notes_of(row),
    )


def events_of(record: TrajectoryRecord) -> int:
    """How many wire events a record renders to: a call two (the call and its outcome),
    anything else one."""
    return 2 if record.kind == "call" else 1
