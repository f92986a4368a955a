"""The changelog of a state: one row per committed record write, newest rows kept.

A row is written when its write commits: at once for a write outside any transaction,
when the outermost transaction ends without raising for the writes inside one. A
rolled-back write never becomes a row. Row ids are the state's change counter after the
write (`State.changes`), so the last row's id is the state's changelog id.

Rows are cheap to make: a plain tuple holding references to the stored records, which are
never mutated once stored, so nothing is copied or serialised on the write path (and the
GC stops tracking a row whose records hold no containers). A reader gets `ChangeRow`s,
made from the tuples as it reads them (equal, not the same objects); the readable form
(summary, changed fields) is computed from those.

Only the newest `cap` rows are kept (a ring). A reader asking for rows older than the ring
learns how many it missed (`Changelog.page` says so); nothing else is lost.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from time import time
from typing import Any, Literal

Operation = Literal["INSERT", "UPDATE", "DELETE"]

DEFAULT_CAP = 10_000
"""Rows a changelog keeps per state unless told otherwise: one full `/changes` page."""

_SUMMARY_CHARS = 200
_VALUE_CHARS = 50


@dataclass(slots=True)
class ChangeRow:
    """One committed write: which record, what happened to it, and its values around it.

    `before` is the record before the write (None for an insert), `after` the record the
    write left (None for a delete). Both are the state's own stored dicts: read only, like
    the row itself (not frozen only because a frozen dataclass is slower to make).
    """

    id: int
    at: float
    """When the write committed (seconds since the epoch: cheap to take on the write path)."""
    collection: str
    key: str
    operation: Operation
    before: Mapping[str, Any] | None
    after: Mapping[str, Any] | None

    @property
    def timestamp(self) -> datetime:
        """When the write committed, in UTC."""
        return datetime.fromtimestamp(self.at, UTC)

    def changed_fields(self) -> dict[str, Any]:
        """The whole record for an insert or a delete; for an update, `{field: {old, new}}`
        for each field whose value differs (a field the update dropped has `new: None`)."""
        if self.operation == "INSERT":
            return dict(self.after or {})
        if self.operation == "DELETE":
            return dict(self.before or {})
        old, new = self.before or {}, self.after or {}
        return {
            name: {"old": old.get(name), "new": new.get(name)}
            for name in {**old, **new}
            if old.get(name, _ABSENT) != new.get(name, _ABSENT)
        }

    def summary(self) -> str:
        """One line for people: `Inserted: {...}`, `Deleted: {...}`, or `field: 'old' ->
        'new', ...` for an update (values cut to 50 characters, the record to 200)."""
        if self.operation == "INSERT":
            return "Inserted: " + _dumps(self.after)[:_SUMMARY_CHARS]
        if self.operation == "DELETE":
            return "Deleted: " + _dumps(self.before)[:_SUMMARY_CHARS]
        return ", ".join(
            f"{name}: {_quoted(change['old'])} -> {_quoted(change['new'])}"
            for name, change in self.changed_fields().items()
        )


_ABSENT = object()


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _quoted(value: Any) -> str:
    if value is None:
        return "NULL"
    text = value if isinstance(value, str) else _dumps(value)
    return "'" + text[:_VALUE_CHARS].replace("'", "''") + "'"


@dataclass(frozen=True, slots=True)
class ChangePage:
    """Rows after some id, oldest first, and what the reader should know about the rest."""

    rows: list[ChangeRow]
    has_more: bool
    dropped: int
    """Rows after the asked id that the ring no longer holds (older than its oldest row)."""


_Entry = tuple[Any, ...]
_Row = tuple[Any, ...]


class Changelog:
    """The committed writes of one state, newest `cap` rows (see the module docstring)."""

    __slots__ = ("_rows", "cap", "start")

    def __init__(self, cap: int = DEFAULT_CAP, start: int = 0) -> None:
        if cap < 1:
            raise ValueError(f"a changelog keeps at least one row, not {cap}")
        self.cap = cap
        self.start = start
        """The state's change counter when the changelog began: earlier writes (the
        seed) were never in it, so they are not counted as dropped."""
        # Each row as the tuple of ChangeRow's fields, in order.
        self._rows: deque[_Row] = deque(maxlen=cap)

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[ChangeRow]:
        return (ChangeRow(*row) for row in list(self._rows))

    @property
    def last_id(self) -> int | None:
        """The newest row's id, or None when there is none."""
        return self._rows[-1][0] if self._rows else None

    def record(
        self,
        row_id: int,
        collection: str,
        key: str,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        *,
        deleted: bool = False,
    ) -> None:
        """Add the row of one committed write."""
        operation: Operation = "DELETE" if deleted else "INSERT" if before is None else "UPDATE"
        self._rows.append((row_id, time(), collection, key, operation, before, after))

    def add(
        self,
        row_id: int,
        collection: str,
        key: str,
        before: Mapping[str, Any] | None,
        after: Mapping[str, Any] | None,
        deleted: bool,
    ) -> None:
        """`record`, positional: the row of a transaction's one write (its commit path)."""
        operation: Operation = "DELETE" if deleted else "INSERT" if before is None else "UPDATE"
        self._rows.append((row_id, time(), collection, key, operation, before, after))

    def commit(
        self,
        last_id: int,
        entries: Sequence[_Entry],
        current: Callable[[str, str], Mapping[str, Any] | None],
    ) -> None:
        """Add the rows of a committed transaction from its undo entries (oldest first).

        An entry `("row", collection, key, old, deleted)` holds the key's store entry
        before its write (`old[1]` is the record; None for none) and whether the write was
        a delete. The record after a write is the next write's "before" on the same key,
        or for the last write on a key the record there now (`current(collection, key)`).
        """
        if len(entries) == 1:  # the common case, one write: no bookkeeping
            entry = entries[0]
            if entry[0] == "row":
                _, collection, key, old, deleted = entry
                before = None if old is None else old[1]
                operation: Operation = (
                    "DELETE" if deleted else "INSERT" if before is None else "UPDATE"
                )
                after = None if deleted else current(collection, key)
                self._rows.append((last_id, time(), collection, key, operation, before, after))
            return
        writes = [e for e in entries if e[0] == "row"]
        if not writes:
            return
        now = time()
        first = last_id - len(writes) + 1
        afters: list[Any] = [None] * len(writes)
        following: dict[tuple[str, str], Any] = {}
        for i in range(len(writes) - 1, -1, -1):
            _, collection, key, old, _deleted = writes[i]
            where = (collection, key)
            afters[i] = following[where] if where in following else current(collection, key)
            following[where] = None if old is None else old[1]
        append = self._rows.append
        for i, (_, collection, key, old, deleted) in enumerate(writes):
            before = None if old is None else old[1]
            if deleted:
                operation = "DELETE"
                after = None
            else:
                operation = "INSERT" if before is None else "UPDATE"
                after = afters[i]
            append((first + i, now, collection, key, operation, before, after))

    def rewind(self, to_id: int) -> None:
        """Drop the rows after `to_id` (the state went back to a point before them)."""
        rows = self._rows
        while rows and rows[-1][0] > to_id:
            rows.pop()
        self.start = min(self.start, to_id)

    def page(self, after_id: int, limit: int) -> ChangePage:
        """At most `limit` rows with ids above `after_id`, oldest first."""
        rows = self._rows
        if not rows or rows[-1][0] <= after_id:
            return ChangePage([], False, 0)
        oldest = rows[0][0]
        dropped = max(0, oldest - 1 - max(after_id, self.start))
        # Ids are ascending but may skip (a restore to another lineage): find the start.
        start = 0 if after_id < oldest else _first_above(rows, after_id)
        picked = [ChangeRow(*rows[i]) for i in range(start, min(start + limit, len(rows)))]
        return ChangePage(picked, start + limit < len(rows), dropped)


def _first_above(rows: deque[_Row], after_id: int) -> int:
    lo, hi = 0, len(rows)
    while lo < hi:
        mid = (lo + hi) // 2
        if rows[mid][0] <= after_id:
            lo = mid + 1
        else:
            hi = mid
    return lo
