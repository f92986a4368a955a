"""State: named collections of JSON records with transactions, snapshots and forks.

Design notes (the figures are in docs/state.md, from benchmarks/bench_state.py)
-----------------------------------------------------------------------------
* A collection is a `_Table` (see `_table.py`): a persistent map (the C HAMT of
  `immutables`) from key to `(seq, record, digest)`, plus the order keys were added in.
  Tables are shared between a state and its forks and snapshots; a state copies a table
  the first time it writes to it, and that copy is O(1) (it shares the map, whose writes
  make new versions that share all but one path). Forks, snapshots, and the first write
  after either, cost the same at ten records or ten million.
* Insertion order is visible (`list`, `keys`, `to_dict`): each key holds a seq, its slot in
  the table's order. `put` of an existing key keeps it; a rolled-back delete puts the entry
  back, seq and all, so the record is back in its place. Delete is O(log32 n), no scan.
* The hash is a multiset hash (sum of record digests), kept up to date on every write,
  so reading it is O(number of collections) and a call pays only for what it changed.
* A transaction is an undo log. On an exception the log is played backwards, which
  restores records, digests, order and the change counter exactly. `transaction()`
  returns a small class-based context manager (a generator one costs ~1 µs more per call).
* Records are stored as private JSON copies, parsed back from their canonical text (the
  text is made anyway, for the digest), and handed out as copies, so no caller can
  change the state behind its back.
* A schema is validated "fast accept, slow reject" (`collection.py`): `CollectionInfo.create`
  compiles the simple keywords into one Python check (`_fastcheck.py`, exact for it);
  a record it refuses, or any record of a schema it cannot compile, goes to jsonschema,
  whose verdict and message are the ones reported.
* A state may keep a changelog (`keep_changelog`, see `changelog.py`): a row per write
  when it commits, made from the undo log when the outermost transaction ends, so a
  rolled-back write never becomes a row. Only a gateway instance's state keeps one.
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable, Mapping
from types import TracebackType
from typing import Any

from agentenv.state import _table
from agentenv.state._bulk import load_rows
from agentenv.state._canonical import (
    copy_json,
    digest,
    record_digest,
)
from agentenv.state._table import _ABSENT, _Table
from agentenv.state.changelog import DEFAULT_CAP, Changelog
from agentenv.state.collection import CollectionInfo, Record, fresh, prepare
from agentenv.state.errors import (
    RecordExists,
    RecordInvalid,
    RecordNotFound,
    UnknownCollection,
)

_MASK = (1 << 256) - 1


class Snapshot:
    """A frozen state: cheap to take, cheap to fork from, never changes."""

    __slots__ = ("_hash", "_tables", "changes")

    def __init__(self, tables: dict[str, _Table], changes: int) -> None:
        self._tables = tables
        self.changes = changes
        self._hash: str | None = None

    def fork(self) -> State:
        """A new mutable State that starts equal to this snapshot and shares its data."""
        return State._from_tables(dict(self._tables), self.changes)

    def hash(self) -> str:
        """The canonical hash of the snapshot's state."""
        if self._hash is None:
            self._hash = _hash_tables(self._tables)
        return self._hash

    def to_dict(self) -> dict[str, list[Record]]:
        """All records, by collection, as JSON data."""
        return _dump(self._tables)

    def infos(self) -> dict[str, CollectionInfo]:
        """Key field and schema of every collection."""
        return {name: table.info for name, table in self._tables.items()}

    def collection_hash(self, collection: str) -> str:
        """The canonical hash of one collection (see `State.collection_hash`)."""
        return _collection_hash(self._tables, collection)


def _collection_hash(tables: Mapping[str, _Table], name: str) -> str:
    table = tables.get(name)
    if table is None:
        raise UnknownCollection(name, list(tables))
    return format((table.hash_base + table.total + _name_digest(name)) & _MASK, "064x")


def _hash_tables(tables: Mapping[str, _Table]) -> str:
    return format(_hash_total(tables), "064x")


def _hash_total(tables: Mapping[str, _Table]) -> int:
    """The state hash as a number: `combine` of every table's part, summed and masked once
    (the same sum modulo 2**256; no call per table on the path after every write)."""
    total = 0
    names = _NAME_DIGESTS
    for name, table in tables.items():
        named = names.get(name)
        if named is None:
            named = _name_digest(name)
        total += table.hash_base + table.total + named
    return total & _MASK


_NAME_DIGESTS: dict[str, int] = {}


def _name_digest(name: str) -> int:
    found = _NAME_DIGESTS.get(name)
    if found is None:
        found = _NAME_DIGESTS[name] = digest("collection-name", name)
    return found


def _dump(tables: Mapping[str, _Table]) -> dict[str, list[Record]]:
    return {name: [copy_json(r) for r in t.records()] for name, t in tables.items()}


class _Transaction:
    """What `State.transaction()` returns: opens on enter, commits or rolls back on exit."""

    __slots__ = ("_mark", "_outer", "_state")

    def __init__(self, state: State) -> None:
        self._state = state

    def __enter__(self) -> State:
        state = self._state
        if state._undo is None:
            state._undo = []
            self._outer = True
            self._mark = 0
        else:
            self._outer = False
            self._mark = len(state._undo)
        return state

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        state = self._state
        undo = state._undo
        assert undo is not None
        try:
            if kind is not None:
                state._rollback(self._mark)
            elif self._outer and undo:
                entry = undo[0]
                if len(undo) == 1 and entry[0] == "row":  # one write, the common case
                    _, collection, key, old, deleted = entry
                    table = state._tables[collection]
                    if state._changelog is not None:
                        state._changelog.add(
                            state._changes,
                            collection,
                            key,
                            None if old is None else old[1],
                            None if deleted else table.get(key),
                            deleted,
                        )
                    limit = _table.COMPACT_AT  # read here, so tests may lower it
                    if len(table.overlay) > limit or (
                        table.stale > limit and table.stale > table.count
                    ):
                        _tidy(state._own(collection))
                else:
                    if state._changelog is not None:
                        state._changelog.commit(state._changes, undo, state._current)
                    state._compact_touched(undo)
        finally:
            if self._outer:
                state._undo = None


class State:
    """Collections of JSON records: the whole mutable world of one environment instance.

    Reads return copies. Writes validate the record (JSON, key field, schema) and keep the
    hash current. Wrap a group of writes in `transaction()` to make it all-or-nothing.
    """

    __slots__ = (
        "_changelog",
        "_changes",
        "_hash",
        "_last_hash",
        "_owned",
        "_sum",
        "_tables",
        "_undo",
    )

    def __init__(self, collections: Mapping[str, CollectionInfo | str] | None = None) -> None:
        self._tables: dict[str, _Table] = {}
        self._owned: set[str] = set()
        self._undo: list[tuple[Any, ...]] | None = None
        self._changes = 0
        self._hash: str | None = None
        self._last_hash: tuple[int, str] | None = None  # the last hash, as number and text
        # The hash as a number, kept up to date by `_write` (every call's path); None
        # after anything else that changes the tables (then summed again when asked).
        self._sum: int | None = None
        self._changelog: Changelog | None = None
        for name, info in (collections or {}).items():
            self.add_collection(name, info)

    @classmethod
    def _from_tables(cls, tables: dict[str, _Table], changes: int) -> State:
        state = cls()
        state._tables = tables
        state._changes = changes
        return state

    # -- shape -------------------------------------------------------------------------

    @property
    def collections(self) -> list[str]:
        """The collection names, in the order they were added."""
        return list(self._tables)

    def info(self, collection: str) -> CollectionInfo:
        """The key field and schema of a collection."""
        return self._table(collection).info

    def add_collection(
        self,
        name: str,
        info: CollectionInfo | str = "id",
        schema: Mapping[str, Any] | None = None,
    ) -> None:
        """Add an empty collection; `info` is a CollectionInfo or the name of the key field."""
        if name in self._tables:
            raise RecordInvalid(name, None, "collection already exists")
        if isinstance(info, str):
            info = CollectionInfo.create(info, schema)
        self._tables[name] = _Table(info)
        self._owned.add(name)
        self._hash = self._sum = None
        self._log(("table", name))

    # -- reads -------------------------------------------------------------------------

    def get(self, collection: str, key: Any) -> Record | None:
        """A copy of the record with this key, or None."""
        entry = self._table(collection).entry(str(key))
        return None if entry is None else copy_json(entry[1])

    def require(self, collection: str, key: Any) -> Record:
        """A copy of the record with this key; RecordNotFound if there is none."""
        entry = self._table(collection).entry(str(key))
        if entry is None:
            raise RecordNotFound(collection, str(key))
        return copy_json(entry[1])

    def has(self, collection: str, key: Any) -> bool:
        """Whether the collection holds a record with this key."""
        return self._table(collection).entry(str(key)) is not None

    def list(self, collection: str) -> list[Record]:
        """Copies of all records of a collection, in insertion order."""
        return [copy_json(r) for r in self._table(collection).records()]

    def find(
        self, collection: str, where: Callable[[Record], bool] | None = None, **equals: Any
    ) -> list[Record]:
        """Copies of the records whose fields equal `equals` and that pass `where`."""
        out = []
        wanted = tuple(equals.items())
        for record in self._table(collection).records():
            for name, value in wanted:  # a loop, not any(genexpr): this runs per record
                if record.get(name, _MISSING) != value:
                    break
            else:
                if where is None or where(record):
                    out.append(copy_json(record))
        return out

    def keys(self, collection: str) -> list[str]:
        """The keys of a collection, in insertion order."""
        return self._table(collection).key_list()

    def count(self, collection: str) -> int:
        """How many records a collection holds."""
        return self._table(collection).count

    @property
    def changes(self) -> int:
        """How many writes this state has seen: the changelog id of the protocol."""
        return self._changes

    @property
    def changelog(self) -> Changelog | None:
        """The committed writes of this state since `keep_changelog`, or None."""
        return self._changelog

    def keep_changelog(self, cap: int = DEFAULT_CAP) -> Changelog:
        """Start keeping a changelog of committed writes (its newest `cap` rows).

        Forks and snapshots do not inherit it: a fork's writes are its own, and a fork
        merged back is written again, and logged, by the state it merges into.
        """
        if self._changelog is None:
            self._changelog = Changelog(cap, start=self._changes)
        return self._changelog

    def hash(self) -> str:
        """The canonical hash: equal states have equal hashes in any process.

        Cached between writes; recomputing it sums one number per collection (and a
        write that leaves the state as it was gets the text it had, not formatted again).
        """
        if self._hash is None:
            total = self._sum
            if total is None:
                total = self._sum = _hash_total(self._tables)
            last = self._last_hash
            if last is None or last[0] != total:
                last = self._last_hash = (total, format(total, "064x"))
            self._hash = last[1]
        return self._hash

    def collection_hash(self, collection: str) -> str:
        """The canonical hash of one collection alone (its records and name): what a
        workspace's tree hash is. Kept up to date by every write, so it costs the same
        however large the collection is."""
        return _collection_hash(self._tables, collection)

    def to_dict(self) -> dict[str, list[Record]]:
        """All records, by collection, as JSON data."""
        return _dump(self._tables)

    # -- writes ------------------------------------------------------------------------

    def put(self, collection: str, record: Mapping[str, Any]) -> Record:
        """Insert or replace a record (keyed by its key field); returns the stored copy."""
        table = self._table(collection)
        key, stored, text = prepare(collection, table.info, record)
        self._write(collection, key, stored, text)
        return fresh(stored, text)

    def insert(self, collection: str, record: Mapping[str, Any]) -> Record:
        """Add a new record; RecordExists if its key is taken."""
        table = self._table(collection)
        key, stored, text = prepare(collection, table.info, record)
        if table.entry(key) is not None:
            raise RecordExists(collection, key)
        self._write(collection, key, stored, text)
        return fresh(stored, text)

    def update(self, collection: str, key: Any, changes: Mapping[str, Any]) -> Record:
        """Merge `changes` into an existing record; returns the new record."""
        table = self._table(collection)
        entry = table.entry(str(key))
        if entry is None:
            raise RecordNotFound(collection, str(key))
        info = table.info
        if info.key in changes and str(changes[info.key]) != str(key):
            raise RecordInvalid(collection, str(key), f"cannot change key field {info.key!r}")
        # A shallow copy is enough: canonical_json only reads it, and what is stored is
        # parsed back from the text, so the stored record (shared) is never touched.
        current = dict(entry[1])
        current.update(changes)
        _, stored, text = prepare(collection, info, current)
        self._write(collection, str(key), stored, text)
        return fresh(stored, text)

    def delete(self, collection: str, key: Any) -> Record:
        """Remove a record and return it; RecordNotFound if there is none."""
        key = str(key)
        old = self._table(collection).entry(key)
        if old is None:
            raise RecordNotFound(collection, key)
        table = self._own(collection)
        table.drop(key)
        table.count -= 1
        table.stale += 1  # its slot stays, so a rollback puts the record back in place
        table.total = (table.total - old[2]) & _MASK
        self._sum = None
        self._changes += 1
        if self._undo is not None:
            self._undo.append(("row", collection, key, old, True))
        else:
            self._log(("row", collection, key, old, True))
            _tidy(table)
        return copy_json(old[1])

    def clear(self, collection: str | None = None) -> None:
        """Remove every record of one collection, or of all collections."""
        for name in [collection] if collection else list(self._tables):
            for key in self._table(name).key_list():
                self.delete(name, key)

    # -- transactions, snapshots, forks ---------------------------------------------------

    def transaction(self) -> _Transaction:
        """All-or-nothing writes: if the block raises, the state is exactly as before.

        Use as `with state.transaction():` (it gives the state itself to `as`).
        Transactions nest; an inner one that raises undoes only its own writes.
        """
        return _Transaction(self)

    @property
    def in_transaction(self) -> bool:
        """Whether a transaction is open."""
        return self._undo is not None

    def snapshot(self) -> Snapshot:
        """A frozen copy of the state now; O(number of collections)."""
        self._owned.clear()  # the tables are shared from now on
        return Snapshot(dict(self._tables), self._changes)

    def committed(self) -> Snapshot:
        """A snapshot of the state as its last committed transaction left it.

        Outside a transaction this is `snapshot()`. Inside one (a call in flight, seen
        from another task) it is a fork with the open transaction's writes undone, so
        readers never see a write that may still roll back.
        """
        if self._undo is None:
            return self.snapshot()
        view = self.fork()
        view._undo = list(self._undo)
        view._rollback(0)
        view._undo = None
        return view.snapshot()

    def restore(self, snapshot: Snapshot) -> None:
        """Make this state equal to a snapshot (outside any transaction)."""
        if self._undo is not None:
            raise RuntimeError("cannot restore a snapshot inside a transaction")
        self._tables = dict(snapshot._tables)
        self._owned = set()
        self._hash = self._sum = None
        self._changes = snapshot.changes
        if self._changelog is not None:
            self._changelog.rewind(snapshot.changes)

    def fork(self) -> State:
        """An independent state equal to this one; unchanged data stays shared."""
        self._owned.clear()
        return State._from_tables(dict(self._tables), self._changes)

    @classmethod
    def from_records(
        cls,
        records: Mapping[str, Iterable[Mapping[str, Any]]],
        collections: Mapping[str, CollectionInfo | str] | None = None,
    ) -> State:
        """A state holding these records; collections not described are keyed by `id`.

        The same as inserting them one by one (the same errors, the same state, the same
        `changes`), in bulk: each collection's map is built in one pass.
        """
        state = cls(collections)
        # A million records are millions of new containers: the cyclic GC would walk the
        # growing heap again and again (a fifth of the load) for data that holds no cycles.
        collecting = gc.isenabled()
        gc.disable()
        try:
            state._load(records)
        finally:
            if collecting:
                gc.enable()
        return state

    def _load(self, records: Mapping[str, Iterable[Mapping[str, Any]]]) -> None:
        state = self
        for name, rows in records.items():
            if name not in state._tables:
                state.add_collection(name)
            table = state._own(name)
            if table.count:  # not a fresh table: insert one by one
                for row in rows:
                    state.insert(name, row)
                continue
            base, total = load_rows(name, table.info, rows, prepare)
            table.load(base, total)
            state._sum = None
            state._changes += len(base)

    # -- internals -----------------------------------------------------------------------

    def _table(self, collection: str) -> _Table:
        try:
            return self._tables[collection]
        except KeyError:
            raise UnknownCollection(collection, list(self._tables)) from None

    def _own(self, collection: str) -> _Table:
        self._hash = None
        if collection in self._owned:
            return self._tables[collection]
        table = self._tables[collection].copy()
        self._tables[collection] = table
        self._owned.add(collection)
        return table

    def _write(self, collection: str, key: str, stored: Record, text: str) -> None:
        new_digest = record_digest(collection, key, text)
        if collection in self._owned:
            self._hash = None
            table = self._tables[collection]
        else:
            table = self._own(collection)
        # table.entry() and table.set(), inlined: this is every write's path.
        overlay = table.overlay
        old = overlay.get(key, _ABSENT)
        if old is _ABSENT:
            old = table.base.get(key)
        if old is None:
            overlay = overlay.set(key, (table.append(key), stored, new_digest))
            table.count += 1
            change = new_digest
        else:
            overlay = overlay.set(key, (old[0], stored, new_digest))
            change = new_digest - old[2]
        table.total = (table.total + change) & _MASK
        if self._sum is not None:
            self._sum = (self._sum + change) & _MASK
        table.overlay = overlay
        self._changes += 1
        if self._undo is not None:
            self._undo.append(("row", collection, key, old, False))
        else:
            if self._changelog is not None:
                self._log(("row", collection, key, old, False))
            if len(overlay) > _table.COMPACT_AT:  # read here, so tests may lower it
                table.maybe_merge()

    def _log(self, entry: tuple[Any, ...]) -> None:
        if self._undo is not None:
            self._undo.append(entry)
        elif self._changelog is not None and entry[0] == "row":
            _, collection, key, old, deleted = entry
            self._changelog.record(
                self._changes,
                collection,
                key,
                None if old is None else old[1],
                None if deleted else self._current(collection, key),
                deleted=deleted,
            )

    def _current(self, collection: str, key: str) -> Record | None:
        table = self._tables.get(collection)
        return None if table is None else table.get(key)

    def _compact_touched(self, undo: list[tuple[Any, ...]]) -> None:
        """After a commit: merge or compact the tables it wrote, where due (never inside a
        transaction: undo entries hold seqs, and a merge must not meet a rollback)."""
        limit = _table.COMPACT_AT  # read here, so tests may lower it
        if len(undo) == 1:  # the common case: one write
            if undo[0][0] != "row":
                return
            names: Iterable[str] = (undo[0][1],)
        else:
            names = {entry[1] for entry in undo if entry[0] == "row"}
        for name in names:
            table = self._tables.get(name)
            if table is not None and (
                len(table.overlay) > limit or (table.stale > limit and table.stale > table.count)
            ):
                _tidy(self._own(name))

    def _rollback(self, mark: int) -> None:
        undo = self._undo
        assert undo is not None
        self._sum = None
        while len(undo) > mark:
            entry = undo.pop()
            if entry[0] == "table":
                self._hash = None
                del self._tables[entry[1]]
                self._owned.discard(entry[1])
                continue
            _, collection, key, old, deleted = entry
            table = self._own(collection)
            current = table.entry(key)
            if old is None:  # an insert: take it out and give its slot back
                assert current is not None
                table.drop(key)
                table.count -= 1
                table.unappend(key, current[0])
                table.total = (table.total - current[2]) & _MASK
            else:  # a replace or a delete: the old entry, seq and all, goes back
                table.set(key, old)
                if deleted:
                    table.count += 1
                    table.stale -= 1
                table.total = (
                    table.total + old[2] - (0 if current is None else current[2])
                ) & _MASK
            self._changes -= 1


_MISSING = object()


def _tidy(table: _Table) -> None:
    """Outside transactions: compact a table mostly dead, else merge an overlay grown big."""
    if table.wants_compaction():
        table.compact()
    else:
        table.maybe_merge()
