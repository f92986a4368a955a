"""Who changed what: the changelog rows of an instance with the actors behind each one
(`urn:agentenv:changes/v1`, `GET /changes`).

The rows come from the instance state's changelog (`state.changelog`: committed writes
only, the newest `DEFAULT_CAP` kept). The actors come from the trajectory: every call
record whose tool ran carries its write window, `(changelog_id_before, changelog_id]`,
and a row's actors are the records whose window holds its id. Windows do not overlap
(calls are serialised in the consistent mode; in the performance mode a call's window is
the one step its writes landed in), so a row has one actor; the join would list several
if they did, as upstream's does. A row no call wrote (the data plane) has no actor.

Nothing here runs on the call path: the gateway only stores the window's first id in the
record it writes anyway. Windows are read backwards from the newest record until they
fall below the page; a state restore rewinds the changelog, so windows older than a
restore are only believed up to the changelog id it restored.
"""

from __future__ import annotations

import heapq
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field

from agentenv.gateway.events import SYSTEM_ROLE, event_id
from agentenv.gateway.instance import Instance
from agentenv.gateway.trajectory import Trajectory, TrajectoryRecord
from agentenv.state.changelog import ChangeRow

CHANGES_PAGE_DEFAULT = 1000
"""Rows per `GET /changes` page unless `limit` says otherwise (upstream's default)."""
CHANGES_PAGE_MAX = 10000
"""The largest `limit` a client may ask for (upstream's maximum)."""


class ToolCallActor(BaseModel):
    """A row's actor that is a tool call: upstream's `{kind, event_id, tool, role}`."""

    kind: Literal["tool_call"] = "tool_call"
    event_id: str = Field(description="The id of the call's `tool_call` event.")
    tool: str | None
    role: str | None
    seq: int = Field(description="Ours: the trajectory record of the call.")


class TriggerActionActor(BaseModel):
    """A row's actor that is a trigger's tool action (`role` None when it ran as the system)."""

    kind: Literal["trigger_action"] = "trigger_action"
    event_id: str = Field(description="The id of the action's `internal_tool_call` event.")
    trigger_id: str | None
    action_index: int | None = Field(None, description="Always None: our records lack it.")
    tool: str | None
    role: str | None
    seq: int = Field(description="Ours: the trajectory record of the action.")


ChangeActor = Annotated[ToolCallActor | TriggerActionActor, Field(discriminator="kind")]


class ChangeRowOut(BaseModel):
    """One changelog row as `GET /changes` answers it (upstream's columns, then actors)."""

    id: int
    timestamp: str
    schema_name: str = Field(description="The environment's name.")
    table_name: str = Field(description="The collection.")
    operation: Literal["INSERT", "UPDATE", "DELETE"]
    row_id: str = Field(description="The record's key.")
    summary: str
    changed_fields: dict[str, Any]
    actors: list[ChangeActor]


class ChangesPage(BaseModel):
    """The answer of `GET /changes`: rows after `after_id`, oldest first."""

    changes: list[ChangeRowOut]
    has_more: bool
    dropped: int = Field(
        0,
        description="Ours: rows after after_id that the changelog no longer keeps "
        "(only the newest rows are kept); the page starts at the oldest kept one.",
    )


class ChangesQueryError(ValueError):
    """`after_id` or `limit` out of range or not integers; the message says which."""


def parse_query(after_id: str | None, limit: str | None) -> tuple[int, int]:
    """`after_id` and `limit` from a query string, checked as upstream checks them."""
    try:
        after = int(after_id) if after_id is not None else 0
        count = int(limit) if limit is not None else CHANGES_PAGE_DEFAULT
    except ValueError:
        raise ChangesQueryError("after_id and limit must be integers") from None
    if after < 0 or not 1 <= count <= CHANGES_PAGE_MAX:
        raise ChangesQueryError(f"after_id must be >= 0 and limit between 1 and {CHANGES_PAGE_MAX}")
    return after, count


def changes_page(inst: Instance, schema_name: str, after_id: int, limit: int) -> ChangesPage:
    """The instance's changelog rows after `after_id` (at most `limit`), with their actors."""
    log = inst.state.changelog
    if log is None:
        return ChangesPage(changes=[], has_more=False)
    page = log.page(after_id, limit)
    actors = _actors(inst.trajectory, page.rows)
    return ChangesPage(
        changes=[_row(row, schema_name, who) for row, who in zip(page.rows, actors, strict=True)],
        has_more=page.has_more,
        dropped=page.dropped,
    )


def _row(row: ChangeRow, schema_name: str, actors: list[ChangeActor]) -> ChangeRowOut:
    return ChangeRowOut(
        id=row.id,
        timestamp=row.timestamp.isoformat(),
        schema_name=schema_name,
        table_name=row.collection,
        operation=row.operation,
        row_id=row.key,
        summary=row.summary(),
        changed_fields=row.changed_fields(),
        actors=actors,
    )


def _actors(trajectory: Trajectory, rows: list[ChangeRow]) -> list[list[ChangeActor]]:
    if not rows:
        return []
    low, high = rows[0].id, rows[-1].id
    windows: list[tuple[int, int, int, TrajectoryRecord]] = []
    ceiling = high
    for seq in range(len(trajectory) - 1, -1, -1):
        record = trajectory[seq]
        if record.kind == "control" and record.event == "state_restore":
            ceiling = min(ceiling, record.changelog_id)  # older windows end here
            if ceiling < low:
                break
            continue
        before = record.changelog_id_before
        if before is None or record.changelog_id <= before:
            continue
        if record.changelog_id < low:
            break  # between restores, windows only grow: nothing older reaches the page
        after = min(record.changelog_id, ceiling)
        if after > before:
            windows.append((before, after, seq, record))
    windows.sort(key=lambda w: w[0])
    open_windows: list[tuple[int, int, TrajectoryRecord]] = []  # a heap by window end
    out: list[list[ChangeActor]] = []
    i = 0
    for row in rows:
        while i < len(windows) and windows[i][0] < row.id:
            before, after, seq, record = windows[i]
            heapq.heappush(open_windows, (after, seq, record))
            i += 1
        while open_windows and open_windows[0][0] < row.id:
            heapq.heappop(open_windows)
        holding = sorted(open_windows, key=lambda w: w[1])  # in the order the calls ended
        out.append([_actor(trajectory, record) for _, _, record in holding])
    return out


def _actor(trajectory: Trajectory, record: TrajectoryRecord) -> ChangeActor:
    number = event_id(trajectory.first_event(record.seq))
    if record.kind == "trigger":
        return TriggerActionActor(
            event_id=number,
            trigger_id=record.trigger_id,
            tool=record.tool,
            role=None if record.role == SYSTEM_ROLE else record.role,
            seq=record.seq,
        )
    return ToolCallActor(event_id=number, tool=record.tool, role=record.role, seq=record.seq)
