"""The trajectory: one append-only record per tool call, denial and trigger event."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from agentenv.spec.wire import CallError


class TrajectoryRecord(BaseModel):
    """One line of `GET /trajectory` (JSONL)."""

    seq: int = Field(description="Position in this instance's trajectory, from 0.")
    kind: Literal["call", "trigger", "control"]
    wall_time: datetime
    virtual_time: datetime | None = None
    role: str | None = None
    principal: str | None = None
    session: str | None = None
    tool: str | None = None
    args: dict[str, Any] | None = None
    result: Any = None
    error: CallError | None = None
    denied: bool = False
    state_hash: str
    changelog_id: int
    duration_ms: float = 0.0
    trigger_id: str | None = Field(default=None, description="For trigger records.")
    event: str | None = Field(default=None, description="For trigger and control records.")
    detail: str | None = None


class Trajectory:
    """The records of one instance, in order. Append-only."""

    __slots__ = ("_records",)

    def __init__(self) -> None:
        self._records: list[TrajectoryRecord] = []

    def append(self, **fields: Any) -> TrajectoryRecord:
        """Add a record; fields are trusted (the gateway built them), so no validation."""
        record = TrajectoryRecord.model_construct(seq=len(self._records), **fields)
        self._records.append(record)
        return record

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
        return "".join(r.model_dump_json() + "\n" for r in self._records[since:])

    @staticmethod
    def read_jsonl(text: str) -> list[TrajectoryRecord]:
        """Parse JSONL written by `to_jsonl`."""
        return [TrajectoryRecord.model_validate(json.loads(x)) for x in text.splitlines() if x]
