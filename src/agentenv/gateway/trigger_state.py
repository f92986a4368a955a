"""What the trigger engine reports: `/triggers/register`'s answer, `/triggers/state`, events.

The wire layout is the protocol's (`config`, `triggers`, `events`, `events_dropped`; per
trigger `status`, `detected_at`, `fired_at`, `fire_count`, `failure_count`, ...). Our own
keys are only added ones: `description` and `error` on a trigger, `detail` on an event.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TriggerStatus = Literal["armed", "firing", "queued", "fired", "failed", "cancelled"]
"""The protocol's status vocabulary; `queued` also marks a trigger whose `delay` (ours) runs."""

EventKind = Literal[
    "added",
    "removed",
    "detected",
    "anchored",
    "reanchored",
    "action_ok",
    "action_failed",
    "verify_ok",
    "verify_failed",
    "fired",
    "failed",
    "eval_error",
    "delayed",
    "deferred",
    "cancelled",
]
"""The protocol's firing-log vocabulary."""


class TriggerEvent(BaseModel):
    """One line of the firing log. Keys that do not apply are left out on the wire."""

    model_config = ConfigDict(extra="allow")

    seq: int
    ts: str = Field(description="Wall-clock time, RFC 3339.")
    virtual_time: str | None = Field(default=None, description="Left out while unarmed.")
    kind: EventKind
    trigger_id: str | None = None
    detail: str | None = Field(default=None, description="Ours: what happened, in words.")

    @property
    def event(self) -> str:
        """The kind (the name our Python API used before the protocol's layout)."""
        return self.kind


class TriggerConfig(BaseModel):
    """The registration-wide settings: who is watched, which executors there are."""

    watch_roles: list[str] | None = Field(
        description="Roles whose calls provoke triggers; null (ours) when every role is."
    )
    executor_configured: bool
    executors: list[str]


class TriggerInfo(BaseModel):
    """A trigger as `GET /triggers/state` shows it."""

    id: str
    type: str
    when: dict[str, Any]
    status: TriggerStatus
    detected_at: str | None = None
    fired_at: str | None = None
    fire_count: int = 0
    failure_count: int = 0
    last_failure_at: str | None = None
    barrier: dict[str, Any] | None = None
    pending: int = 0
    waiting: bool = False
    next_mark: str | None = None
    description: str = ""
    error: str | None = None

    @property
    def fired(self) -> int:
        """Successful firings (the name our Python API used before)."""
        return self.fire_count

    @property
    def next_due(self) -> datetime | None:
        """`next_mark` as a datetime."""
        return datetime.fromisoformat(self.next_mark) if self.next_mark else None


class TriggersState(BaseModel):
    """What `GET /triggers/state` answers."""

    config: TriggerConfig
    triggers: list[TriggerInfo]
    events: list[TriggerEvent]
    events_dropped: int = 0

    @property
    def log(self) -> list[TriggerEvent]:
        """The events (the name our Python API used before)."""
        return self.events

    def to_wire(self) -> dict[str, Any]:
        """The JSON body, events without the keys that do not apply."""
        out = self.model_dump(mode="json", exclude={"events"})
        out["events"] = [e.model_dump(mode="json", exclude_none=True) for e in self.events]
        return out


class RegisterResult(BaseModel):
    """What `POST /triggers/register` answers."""

    ok: bool = True
    added: list[str] = Field(description="The body's ids, in order (identical re-adds too).")
    all: list[str] = Field(description="Every registered id, in registration order.")


def iso(moment: datetime | None) -> str | None:
    """RFC 3339 in UTC with a `Z`, as the protocol writes instants."""
    if moment is None:
        return None
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


LogEntry = TriggerEvent
"""The name our Python API used for a firing-log line before the protocol's layout."""
