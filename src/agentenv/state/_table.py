"""One collection's data: a frozen base, a persistent overlay, and the order of the keys.

An entry is `(seq, record, digest)`: the record's place in the order, the stored record
(never mutated once stored) and its hash digest.

Where entries live:

* `base`, a plain dict, is never changed once built (a bulk load builds it in one pass, at
  dict speed; a merge builds a new one). Tables share it freely.
* `overlay`, an `immutables.Map` (a C hash array mapped trie), holds what was written
  since: an entry, or None where a base entry was deleted. Setting a key makes a new map
  that shares all but one path of ~log32(n) nodes with the old one, so copying a table is
  O(1) and a write costs the same on a table just forked as on one written a thousand
  times. When the overlay outgrows the base it is merged into a new base (O(n), once per
  n writes: amortised O(1); outside transactions only).

Building a large HAMT is slow (3.6 µs a key at a million keys), a dict is not: that is why
a bulk-loaded seed goes to the base, and only writes pay for the persistent map.

Order: `chunks` (lists of keys, never changed once a table holding them is shared) then
`tail` (this table's own appends) are the keys in the order they were first added; slot
`i` of that sequence holds seq `i`. A slot is live while its key's entry has that seq; a
delete leaves its slot dead, so putting the entry back (a rolled-back delete) puts the
record back in its place, and `put` of an existing key keeps the entry's seq and so its
place. `stale` counts the dead slots; `State` compacts a table (renumbering its seqs) when
most of its slots are dead, or merges it when the overlay outgrows the base (the same
pass), only when no transaction is open (undo entries hold seqs). So the base is dense:
its seqs are 0, 1, ... in dict order, and reading a whole collection walks the dict at C
speed with the overlay's few keys spliced in (see `_spliced`), not a lookup per key.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain, islice
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from immutables import Map

from agentenv.state._canonical import digest

if TYPE_CHECKING:
    from agentenv.state.store import CollectionInfo

Entry = tuple[int, dict[str, Any], int]

COMPACT_AT = 1024
"""Dead slots (or overlay entries) a table may hold before compacting (or merging) is
considered; then only when they outnumber the live records (or the base)."""

_EMPTY: Map[str, Entry | None] = Map()
_ABSENT: Any = object()
_RECORD = itemgetter(1)
_FIRST = itemgetter(0)


class _Table:
    """One collection's data. Never mutated once shared (see State._own); copy() is O(1)."""

    __slots__ = (
        "base",
        "base_end",
        "chunks",
        "count",
        "hash_base",
        "info",
        "overlay",
        "size",
        "stale",
        "tail",
        "total",
    )

    def __init__(self, info: CollectionInfo, hash_base: int | None = None) -> None:
        self.info = info
        # The collection itself counts in the hash, so an empty collection is not "absent".
        self.hash_base = digest("collection", "", info.key) if hash_base is None else hash_base
        self.base: dict[str, Entry] = {}
        self.base_end = 0
        self.overlay = _EMPTY
        self.count = 0
        self.chunks: tuple[list[str], ...] = ()
        self.tail: list[str] = []
        self.size = 0
        self.stale = 0
        self.total = 0

    def copy(self) -> _Table:
        """A table equal to this one that may be written; this one stays as it is."""
        table = _Table.__new__(_Table)
        table.info = self.info
        table.hash_base = self.hash_base
        table.base = self.base
        table.base_end = self.base_end
        table.overlay = self.overlay
        table.count = self.count
        table.chunks = _frozen(self.chunks, self.tail) if self.tail else self.chunks
        table.tail = []
        table.size = self.size
        table.stale = self.stale
        table.total = self.total
        return table

    # -- entries ---------------------------------------------------------------------------

    def entry(self, key: str) -> Entry | None:
        """The entry under this key, or None."""
        found = self.overlay.get(key, _ABSENT)
        return self.base.get(key) if found is _ABSENT else found

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record (not a copy) under this key, or None."""
        found = self.entry(key)
        return None if found is None else found[1]

    def set(self, key: str, entry: Entry) -> None:
        """Store an entry (its key's count must have been adjusted by the caller)."""
        self.overlay = self.overlay.set(key, entry)

    def drop(self, key: str) -> None:
        """Remove a key's entry."""
        if key in self.base:
            self.overlay = self.overlay.set(key, None)
        else:
            self.overlay = self.overlay.delete(key)

    def maybe_merge(self) -> None:
        """Merge the overlay into a new base once it outgrows the old one (amortised O(1)).

        A merge is a compaction (seqs renumbered), so only outside transactions (the store
        sees to it): undo entries hold seqs.
        """
        overlay = self.overlay
        if len(overlay) > COMPACT_AT and len(overlay) > len(self.base):
            self.compact()

    # -- order -----------------------------------------------------------------------------
    # The base is dense: its entries' seqs are 0, 1, ... in dict order, and its keys hold
    # slots 0 .. base_end - 1. A key the overlay holds over the base either keeps that
    # place (a replaced record, same seq) or leaves it (deleted: None; deleted and added
    # again: a new seq, at a slot from base_end on, like every key not in the base).
    # So a walk is the base in dict order, at C speed (itertools over the dict's own
    # iterator), with the overlay's few substitutions spliced in, then the slots after.

    def _substitutions(self) -> list[tuple[int, str, Entry | None]]:
        """(base position, key, entry that stays there or None) of the overlay's keys that
        are in the base, by position."""
        base = self.base
        subs = []
        for key, found in self.overlay.items():
            entry = base.get(key)
            if entry is not None:
                stays = found if found is not None and found[0] == entry[0] else None
                subs.append((entry[0], key, stays))
        subs.sort(key=_FIRST)
        return subs

    def _spliced(self, source: Iterator[Any], record_only: bool) -> Iterator[Any]:
        """`source` (an iterator over the base, in order) with the overlay spliced in."""
        if not len(self.overlay):
            return source
        pieces: list[Iterable[Any]] = []
        pos = 0
        for at, key, stays in self._substitutions():
            if at > pos:
                pieces.append(islice(source, at - pos))
            pieces.append(islice(source, 1, 1))  # consumes the base's item, yields nothing
            if stays is not None:
                pieces.append((stays[1] if record_only else (key, stays),))
            pos = at + 1
        pieces.append(source)
        return chain.from_iterable(pieces)

    def _after_base(self, record_only: bool) -> Iterator[Any]:
        """The live entries at slots from base_end on."""
        get = self.overlay.get
        pos = 0
        start = self.base_end
        for chunk in (*self.chunks, self.tail):
            end = pos + len(chunk)
            if end > start:
                skip = max(0, start - pos)
                for seq, key in enumerate(chunk[skip:] if skip else chunk, pos + skip):
                    found = get(key)
                    if found is not None and found[0] == seq:
                        yield found[1] if record_only else (key, found)
            pos = end

    def items(self) -> Iterator[tuple[str, Entry]]:
        """(key, entry) of every record, in order."""
        walk = self._spliced(iter(self.base.items()), record_only=False)
        if self.size > self.base_end:
            return chain(walk, self._after_base(record_only=False))
        return walk

    def records(self) -> Iterator[dict[str, Any]]:
        """The stored records (not copies), in order."""
        walk = self._spliced(map(_RECORD, self.base.values()), record_only=True)
        if self.size > self.base_end:
            return chain(walk, self._after_base(record_only=True))
        return walk

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
        return self.stale > COMPACT_AT and self.stale > self.count

    def compact(self) -> None:
        """Drop the dead slots, renumbering seqs, into a fresh base. Only outside
        transactions: undo entries hold seqs."""
        base: dict[str, Entry] = {}
        for seq, (key, (_, record, record_digest)) in enumerate(self.items()):
            base[key] = (seq, record, record_digest)
        self.base = base
        self.base_end = len(base)
        self.overlay = _EMPTY
        self.chunks = ()
        self.tail = list(base)
        self.size = len(base)
        self.stale = 0

    def load(self, base: dict[str, Entry], total: int) -> None:
        """Fill an empty table from entries whose seqs are 0, 1, ... in dict order."""
        assert not self.count and not self.size
        self.base = base
        self.overlay = _EMPTY
        self.count = self.size = self.base_end = len(base)
        self.tail = list(base)
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
