"""The trajectory: one append-only record per tool call, denial and trigger event.

These records are our own model (grading, exporters, rollouts and run folders read them).
`GET /trajectory` serves them rendered as upstream's events (`gateway.events`): a call
record becomes two events, every other record one. The trajectory numbers the events as
records are appended, so an event's id never depends on what a reader asked for.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import TypeAdapter

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

    def to_json(self) -> dict[str, Any]:
        """The record as JSON data."""
        return RECORD_ADAPTER.dump_python(self, mode="json")


RECORD_ADAPTER: TypeAdapter[TrajectoryRecord] = TypeAdapter(TrajectoryRecord)


class Trajectory:
    """The records of one instance, in order. Append-only."""

    __slots__ = ("_events", "_first_event", "_records")

    def __init__(self) -> None:
        self._records: list[TrajectoryRecord] = []
        self._first_event: list[int] = []
        self._events = 0

    def append(self, **fields: Any) -> TrajectoryRecord:
        """Add a record; fields are trusted (the gateway built them), so no validation."""
        record = TrajectoryRecord(seq=len(self._records), **fields)
        self._records.append(record)
        self._first_event.append(self._events)
        self._events += events_of(record)
        return record

    @property
    def event_count(self) -> int:
        """How many wire events the records render to (see `events_of`)."""
        return self._events

    def first_event(self, seq: int) -> int:
        """How many wire events come before record `seq`'s first one."""
        return self._first_event[seq]

    def record_at_event(self, event: int) -> int:
        """The seq of the record whose events hold event number `event` (0-based); the
        record count when `event` is past the end."""
        return bisect_right(self._first_event, event) - 1 if event < self._events else len(self)

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[TrajectoryRecord]:
        return iter(self._records)

    def __getitem__(self, index: int) -> TrajectoryRecord:
        return self._records[index]

    def since(self, seq: int = 0) -> list[TrajectoryRecord]:
        """The records from `seq` on."""
        return self._records[seq:]

    def calls(self) -> list[TrajectoryRecord]:
        """Only the tool-call records (denied ones included)."""
        return [r for r in self._records if r.kind == "call"]

    def to_jsonl(self, since: int = 0) -> str:
        """The records as JSON lines."""
        dump = RECORD_ADAPTER.dump_json
        return "".join(dump(r).decode() + "\n" for r in self._records[since:])

    @staticmethod
    def read_jsonl(text: str) -> list[TrajectoryRecord]:
        """Parse JSONL written by `to_jsonl`."""
        return [RECORD_ADAPTER.validate_json(x) for x in text.splitlines() if x.strip()]


def events_of(record: TrajectoryRecord) -> int:
    """How many wire events a record renders to: a call two (the call and its outcome),
    anything else one."""
    return 2 if record.kind == "call" else 1
