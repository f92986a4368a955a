"""Writing a fork of an instance's state back: how a call that ran on its own copy of the
state (a blocking tool, or any awaiting tool in performance mode) lands its writes."""

from __future__ import annotations

from typing import Any

from agentenv.env.tool import ToolError
from agentenv.state import Snapshot, State
from agentenv.state.diff import diff


def merge(state: State, fork: State) -> None:
    """Apply a fork's changes to the state it came from (inside the caller's transaction)."""
    for coll, change in diff(state, fork).collections.items():
        for key in change.removed:
            state.delete(coll, key)
        for record in change.added.values():
            state.put(coll, record)
        for record_change in change.changed.values():
            state.put(coll, record_change.after)


def apply_fork(state: State, base: Snapshot, fork: State, tool: str) -> None:
    """Apply what a call wrote on its fork (since `base`) to the live state, all or none:
    a record another call changed meanwhile is a conflict, and nothing is applied."""
    changes = diff(base, fork).collections
    for coll, change in changes.items():
        for key, record in change.removed.items():
            _unchanged(state, coll, key, record, tool)
        for key in change.added:
            _unchanged(state, coll, key, None, tool)
        for key, record_change in change.changed.items():
            _unchanged(state, coll, key, record_change.before, tool)
    with state.transaction():
        for coll, change in changes.items():
            for key in change.removed:
                state.delete(coll, key)
            for record in change.added.values():
                state.put(coll, record)
            for record_change in change.changed.values():
                state.put(coll, record_change.after)


def _unchanged(state: State, coll: str, key: str, before: Any, tool: str) -> None:
    now = state.get(coll, key) if coll in state.collections else None
    if now != before:
        raise ToolError(
            f"{tool!r} wrote {coll}[{key}], which another call changed while it ran; "
            "nothing was applied (call it again)"
        )
