"""Differences between two states, as data and as readable text."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from agentenv.state._table import _Table
from agentenv.state.store import Snapshot, State


class RecordChange(BaseModel):
    """One record that exists on both sides with different contents."""

    before: dict[str, Any]
    after: dict[str, Any]
    fields: list[str] = Field(description="Top-level fields whose values differ.")


class CollectionDiff(BaseModel):
    """What changed in one collection."""

    added: dict[str, dict[str, Any]] = Field(default_factory=dict)
    removed: dict[str, dict[str, Any]] = Field(default_factory=dict)
    changed: dict[str, RecordChange] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether nothing changed."""
        return not (self.added or self.removed or self.changed)


class StateDiff(BaseModel):
    """What changed between two states, by collection (unchanged collections left out)."""

    collections: dict[str, CollectionDiff] = Field(default_factory=dict)

    @property
    def empty(self) -> bool:
        """Whether the two states hold the same records."""
        return not self.collections

    def summary(self) -> str:
        """A readable account, one line per added, removed or changed record."""
        lines: list[str] = []
        for name, coll in self.collections.items():
            lines += [f"+ {name}[{key}]" for key in coll.added]
            lines += [f"- {name}[{key}]" for key in coll.removed]
            for key, change in coll.changed.items():
                for f in change.fields:
                    before = change.before.get(f, "<absent>")
                    after = change.after.get(f, "<absent>")
                    lines.append(f"~ {name}[{key}].{f}: {before!r} -> {after!r}")
        return "\n".join(lines) if lines else "no differences"


def _tables(side: State | Snapshot) -> dict[str, _Table]:
    return side._tables


def diff(a: State | Snapshot, b: State | Snapshot) -> StateDiff:
    """What it takes to go from `a` to `b`. Shared tables are skipped without a look."""
    ta, tb = _tables(a), _tables(b)
    out: dict[str, CollectionDiff] = {}
    for name in list(ta) + [n for n in tb if n not in ta]:
        left, right = ta.get(name), tb.get(name)
        if left is right or (left and right and left.total == right.total):
            continue
        coll = CollectionDiff()
        for key, entry in right.items() if right else ():
            before_entry = left.entry(key) if left else None
            record = entry[1]
            if before_entry is None:
                coll.added[key] = record
            elif before_entry[2] != entry[2]:
                before = before_entry[1]
                fields = sorted(
                    f for f in set(before) | set(record) if before.get(f, ...) != record.get(f, ...)
                )
                coll.changed[key] = RecordChange(before=before, after=record, fields=fields)
        for key, entry in left.items() if left else ():
            if right is None or right.entry(key) is None:
                coll.removed[key] = entry[1]
        if not coll.empty or (left is None) != (right is None):
            out[name] = coll
    return StateDiff(collections=out)
