"""One collection's data: a persistent map of entries plus the order records were added in.

`entries` is an `immutables.Map` (a C hash array mapped trie): setting a key makes a new
map that shares all but one path of ~log32(n) nodes with the old one, so copying a table is
O(1) and a write costs the same on a table just forked as on one written a thousand times.
An entry is `(seq, record, digest)`: the record's place in the order, the stored record
(never mutated once stored) and its hash digest.

Order: `chunks` (lists of keys, never changed once a table holding them is shared) then
`tail` (this table's own appends) are the keys in the order they were first added; slot
`i` of that sequence holds seq `i`. A slot is live while its key's entry has that seq; a
delete leaves its slot stale, so putting the entry back (a rolled-back delete) puts the
record back in its place, and `put` of an existing key keeps the entry's seq and so its
place. `stale` counts the dead slots; `State` compacts a table (renumbering its seqs) when
most of its slots are dead and no transaction is open.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from immutables import Map

from agentenv.state._canonical import digest

if TYPE_CHECKING:
    from agentenv.state.store import CollectionInfo

Entry = tuple[int, dict[str, Any], int]

COMPACT_AT = 1024
"""Dead slots a table may hold before compaction is considered (and then only when more
than half of its slots are dead)."""


class _Table:
    """One collection's data. Never mutated once shared (see State._own); copy() is O(1)."""

    __slots__ = ("base", "chunks", "entries", "info", "size", "stale", "tail", "total")

    def __init__(self, info: CollectionInfo, base: int | None = None) -> None:
        self.info = info
        # The collection itself counts in the hash, so an empty collection is not "absent".
        self.base = digest("collection", "", info.key) if base is None else base
        self.entries: Map[str, Entry] = Map()
        self.chunks: tuple[list[str], ...] = ()
        self.tail: list[str] = []
        self.size = 0
        self.stale = 0
        self.total = 0

    def copy(self) -> _Table:
        """A table equal to this one that may be written; this one stays as it is."""
        table = _Table.__new__(_Table)
        table.info = self.info
        table.base = self.base
        table.entries = self.entries
        table.chunks = _frozen(self.chunks, self.tail) if self.tail else self.chunks
        table.tail = []
        table.size = self.size
        table.stale = self.stale
        table.total = self.total
        return table

    def __len__(self) -> int:
        return len(self.entries)

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record (not a copy) under this key, or None."""
        entry = self.entries.get(key)
        return None if entry is None else entry[1]

    def items(self) -> Iterator[tuple[str, Entry]]:
        """(key, entry) of every record, in order."""
        get = self.entries.get
        if self.stale == 0:  # every slot is live: no seq to compare
            for chunk in self.chunks:
                for key in chunk:
                    yield key, get(key)  # type: ignore[misc]
            for key in self.tail:
                yield key, get(key)  # type: ignore[misc]
            return
        pos = 0
        for chunk in (*self.chunks, self.tail):
            for key in chunk:
                entry = get(key)
                if entry is not None and entry[0] == pos:
                    yield key, entry
                pos += 1

    def records(self) -> Iterator[dict[str, Any]]:
        """The stored records (not copies), in order."""
        for _, entry in self.items():
            yield entry[1]

    def key_list(self) -> list[str]:
        """The keys, in order."""
        if self.stale == 0:
            out: list[str] = []
            for chunk in self.chunks:
                out += chunk
            out += self.tail
            return out
        return [key for key, _ in self.items()]

    def append(self, key: str) -> int:
        """A new slot at the end for this key; returns its seq."""
        seq = self.size
        self.tail.append(key)
        self.size = seq + 1
        return seq

    def unappend(self, key: str, seq: int) -> None:
        """Give back the slot of an insert being rolled back (or leave it dead)."""
        if seq == self.size - 1 and self.tail and self.tail[-1] == key:
            self.tail.pop()
            self.size = seq
        else:  # the slot is in a chunk shared with a fork or snapshot: leave it dead
            self.stale += 1

    def wants_compaction(self) -> bool:
        """Whether most slots are dead (and there are enough to be worth the pass)."""
        return self.stale > COMPACT_AT and self.stale > len(self.entries)

    def compact(self) -> None:
        """Drop the dead slots, renumbering seqs. Only outside transactions: undo entries
        hold seqs."""
        keys = self.key_list()
        with self.entries.mutate() as entries:
            for seq, key in enumerate(keys):
                _, record, record_digest = entries[key]
                entries[key] = (seq, record, record_digest)
            self.entries = entries.finish()
        self.chunks = ()
        self.tail = keys
        self.size = len(keys)
        self.stale = 0

    def load(self, rows: list[tuple[str, dict[str, Any], int]]) -> None:
        """Fill an empty table from (key, record, digest) rows, keys distinct (bulk load)."""
        assert not self.entries and not self.size
        with self.entries.mutate() as entries:
            total = 0
            for seq, (key, record, record_digest) in enumerate(rows):
                entries[key] = (seq, record, record_digest)
                total += record_digest
            self.entries = entries.finish()
        self.tail = [key for key, _, _ in rows]
        self.size = len(rows)
        self.total = total & ((1 << 256) - 1)


def _frozen(chunks: tuple[list[str], ...], tail: list[str]) -> tuple[list[str], ...]:
    """`chunks` with `tail` frozen after them, merging neighbours of like size so that the
    number of chunks stays logarithmic in the number of keys (each key is merged O(log n)
    times in all, however many forks and snapshots are taken)."""
    out = [*chunks, tail]
    while len(out) >= 2 and len(out[-2]) <= 2 * len(out[-1]):
        last = out.pop()
        out[-1] = out[-1] + last
    return tuple(out)
