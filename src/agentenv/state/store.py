"""State: named collections of JSON records with transactions, snapshots and forks.

Design notes
------------
* A collection is a `_Table`: records by key, each record's digest, and the digests' sum.
  Tables are shared between a state and its forks and snapshots; a state copies a table
  the first time it writes to it (copy on write, per table). Forking is therefore
  O(number of collections), whatever the number of records.
* The hash is a multiset hash (sum of record digests), kept up to date on every write,
  so reading it is O(number of collections) and a call pays only for what it changed.
* A transaction is an undo log. On an exception the log is played backwards, which
  restores records, digests and the change counter exactly.
* Records are stored as private JSON copies (parsed back from their canonical form) and
  handed out as copies, so no caller can change the state behind its back.
* A state may keep a changelog (`keep_changelog`, see `changelog.py`): a row per write
  when it commits, made from the undo log when the outermost transaction ends, so a
  rolled-back write never becomes a row. Only a gateway instance's state keeps one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from agentenv.state._canonical import canonical_json, combine, copy_json, digest
from agentenv.state.changelog import DEFAULT_CAP, Changelog
from agentenv.state.errors import (
    RecordExists,
    RecordInvalid,
    RecordNotFound,
    UnknownCollection,
)

Record = dict[str, Any]


@dataclass(frozen=True)
class CollectionInfo:
    """What a collection is: the field that keys its records and an optional JSON schema."""

    key: str = "id"
    schema: Mapping[str, Any] | None = None
    validator: Draft202012Validator | None = field(default=None, compare=False, repr=False)

    @classmethod
    def create(cls, key: str = "id", schema: Mapping[str, Any] | None = None) -> CollectionInfo:
        """Build the info, compiling the schema's validator once."""
        validator = Draft202012Validator(dict(schema)) if schema else None
        return cls(key=key, schema=schema, validator=validator)


class _Table:
    """One collection's data. Never mutated once shared; see State._own."""

    __slots__ = ("base", "digests", "info", "records", "total")

    def __init__(self, info: CollectionInfo, base: int | None = None) -> None:
        self.info = info
        # The collection itself counts in the hash, so an empty collection is not "absent".
        self.base = digest("collection", "", info.key) if base is None else base
        self.records: dict[str, Record] = {}
        self.digests: dict[str, int] = {}
        self.total = 0

    def copy(self) -> _Table:
        table = _Table(self.info, self.base)
        table.records = dict(self.records)
        table.digests = dict(self.digests)
        table.total = self.total
        return table


_MISSING = object()


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


def _hash_tables(tables: Mapping[str, _Table]) -> str:
    total = 0
    for name, table in tables.items():
        total = combine(total, table.base + table.total + _name_digest(name))
    return format(total, "064x")


_NAME_DIGESTS: dict[str, int] = {}


def _name_digest(name: str) -> int:
    found = _NAME_DIGESTS.get(name)
    if found is None:
        found = _NAME_DIGESTS[name] = digest("collection-name", name)
    return found


def _dump(tables: Mapping[str, _Table]) -> dict[str, list[Record]]:
    return {name: [copy_json(r) for r in t.records.values()] for name, t in tables.items()}


class State:
    """Collections of JSON records: the whole mutable world of one environment instance.

    Reads return copies. Writes validate the record (JSON, key field, schema) and keep the
    hash current. Wrap a group of writes in `transaction()` to make it all-or-nothing.
    """

    __slots__ = ("_changelog", "_changes", "_hash", "_owned", "_tables", "_undo")

    def __init__(self, collections: Mapping[str, CollectionInfo | str] | None = None) -> None:
        self._tables: dict[str, _Table] = {}
        self._owned: set[str] = set()
        self._undo: list[tuple[Any, ...]] | None = None
        self._changes = 0
        self._hash: str | None = None
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
        self._hash = None
        self._log(("table", name, _MISSING))

    # -- reads -------------------------------------------------------------------------

    def get(self, collection: str, key: Any) -> Record | None:
        """A copy of the record with this key, or None."""
        record = self._table(collection).records.get(str(key))
        return None if record is None else copy_json(record)

    def require(self, collection: str, key: Any) -> Record:
        """A copy of the record with this key; RecordNotFound if there is none."""
        record = self._table(collection).records.get(str(key))
        if record is None:
            raise RecordNotFound(collection, str(key))
        return copy_json(record)

    def has(self, collection: str, key: Any) -> bool:
        """Whether the collection holds a record with this key."""
        return str(key) in self._table(collection).records

    def list(self, collection: str) -> list[Record]:
        """Copies of all records of a collection, in insertion order."""
        return [copy_json(r) for r in self._table(collection).records.values()]

    def find(
        self, collection: str, where: Callable[[Record], bool] | None = None, **equals: Any
    ) -> list[Record]:
        """Copies of the records whose fields equal `equals` and that pass `where`."""
        out = []
        for record in self._table(collection).records.values():
            if any(record.get(k, _MISSING) != v for k, v in equals.items()):
                continue
            if where is not None and not where(record):
                continue
            out.append(copy_json(record))
        return out

    def keys(self, collection: str) -> list[str]:
        """The keys of a collection, in insertion order."""
        return list(self._table(collection).records)

    def count(self, collection: str) -> int:
        """How many records a collection holds."""
        return len(self._table(collection).records)

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

        Cached between writes; recomputing it sums one number per collection.
        """
        if self._hash is None:
            self._hash = _hash_tables(self._tables)
        return self._hash

    def to_dict(self) -> dict[str, list[Record]]:
        """All records, by collection, as JSON data."""
        return _dump(self._tables)

    # -- writes ------------------------------------------------------------------------

    def put(self, collection: str, record: Mapping[str, Any]) -> Record:
        """Insert or replace a record (keyed by its key field); returns the stored copy."""
        table = self._table(collection)
        key, stored, text = self._prepare(collection, table.info, record)
        self._write(collection, key, stored, text)
        return copy_json(stored)

    def insert(self, collection: str, record: Mapping[str, Any]) -> Record:
        """Add a new record; RecordExists if its key is taken."""
        table = self._table(collection)
        key, stored, text = self._prepare(collection, table.info, record)
        if key in table.records:
            raise RecordExists(collection, key)
        self._write(collection, key, stored, text)
        return copy_json(stored)

    def update(self, collection: str, key: Any, changes: Mapping[str, Any]) -> Record:
        """Merge `changes` into an existing record; returns the new record."""
        current = self.require(collection, key)
        info = self._table(collection).info
        if info.key in changes and str(changes[info.key]) != str(key):
            raise RecordInvalid(collection, str(key), f"cannot change key field {info.key!r}")
        current.update(changes)
        _, stored, text = self._prepare(collection, info, current)
        self._write(collection, str(key), stored, text)
        return copy_json(stored)

    def delete(self, collection: str, key: Any) -> Record:
        """Remove a record and return it; RecordNotFound if there is none."""
        key = str(key)
        table = self._table(collection)
        if key not in table.records:
            raise RecordNotFound(collection, key)
        table = self._own(collection)
        # Where it stood, so that a rollback puts it back in place (order is visible).
        position = next(i for i, k in enumerate(table.records) if k == key)
        old, old_digest = table.records.pop(key), table.digests.pop(key)
        table.total = combine(table.total, 0, old_digest)
        self._changes += 1
        self._log(("row", collection, key, old, old_digest, position))
        return copy_json(old)

    def clear(self, collection: str | None = None) -> None:
        """Remove every record of one collection, or of all collections."""
        for name in [collection] if collection else list(self._tables):
            for key in list(self._table(name).records):
                self.delete(name, key)

    # -- transactions, snapshots, forks ---------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[State]:
        """All-or-nothing writes: if the block raises, the state is exactly as before.

        Transactions nest; an inner one that raises undoes only its own writes.
        """
        outer = self._undo is None
        if outer:
            self._undo = []
        mark = len(self._undo)  # type: ignore[arg-type]
        try:
            yield self
        except BaseException:
            self._rollback(mark)
            raise
        else:
            if outer and self._changelog is not None and self._undo:
                self._changelog.commit(self._changes, self._undo, self._current, _MISSING)
        finally:
            if outer:
                self._undo = None

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
        self._hash = None
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
        """A state holding these records; collections not described are keyed by `id`."""
        state = cls(collections)
        for name, rows in records.items():
            if name not in state._tables:
                state.add_collection(name)
            for row in rows:
                state.insert(name, row)
        return state

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

    @staticmethod
    def _prepare(
        collection: str, info: CollectionInfo, record: Mapping[str, Any]
    ) -> tuple[str, Record, str]:
        if not isinstance(record, Mapping):
            raise RecordInvalid(
                collection, None, f"expected an object, got {type(record).__name__}"
            )
        if info.key not in record or record[info.key] is None:
            raise RecordInvalid(collection, None, f"missing key field {info.key!r}")
        key = str(record[info.key])
        try:
            text = canonical_json(record)
        except (TypeError, ValueError) as exc:
            raise RecordInvalid(collection, key, f"not JSON-serialisable: {exc}") from None
        stored = json.loads(text)
        if info.validator is not None:
            error = next(iter(info.validator.iter_errors(stored)), None)
            if error is not None:
                where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.path)
                raise RecordInvalid(
                    collection, key, f"{where.lstrip('.') or 'record'}: {error.message}"
                )
        return key, stored, text

    def _write(self, collection: str, key: str, stored: Record, text: str) -> None:
        table = self._own(collection)
        new_digest = digest(collection, key, text)
        old = table.records.get(key, _MISSING)
        old_digest = table.digests.get(key, 0)
        table.records[key] = stored
        table.digests[key] = new_digest
        table.total = combine(table.total, new_digest, old_digest)
        self._changes += 1
        self._log(("row", collection, key, old, old_digest))

    def _log(self, entry: tuple[Any, ...]) -> None:
        if self._undo is not None:
            self._undo.append(entry)
        elif self._changelog is not None and entry[0] == "row":
            _, collection, key, old, _digest, *rest = entry
            self._changelog.record(
                self._changes,
                collection,
                key,
                None if old is _MISSING else old,
                None if rest else self._current(collection, key),
                deleted=bool(rest),
            )

    def _current(self, collection: str, key: str) -> Record | None:
        table = self._tables.get(collection)
        return None if table is None else table.records.get(key)

    def _rollback(self, mark: int) -> None:
        undo = self._undo
        assert undo is not None
        while len(undo) > mark:
            entry = undo.pop()
            if entry[0] == "table":
                self._hash = None
                del self._tables[entry[1]]
                self._owned.discard(entry[1])
                continue
            _, collection, key, old, old_digest, *rest = entry
            table = self._own(collection)
            table.total = combine(table.total, old_digest, table.digests.get(key, 0))
            if old is _MISSING:
                table.records.pop(key, None)
                table.digests.pop(key, None)
            elif rest and key not in table.records:  # an undone delete: back in its place
                items = list(table.records.items())
                items.insert(rest[0], (key, old))
                table.records = dict(items)
                table.digests[key] = old_digest
            else:
                table.records[key] = old
                table.digests[key] = old_digest
            self._changes -= 1
