"""The store against a model of what it must mean: random sequences of writes, forks,
snapshots, restores and nested transactions (some rolled back), compared after every step
with plain dicts deep-copied at every fork (records, their order, the hash from scratch,
`changes`). Compaction is forced often (a tiny threshold) so that it is exercised too."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from agentenv.state import (
    CollectionInfo,
    RecordExists,
    RecordInvalid,
    RecordNotFound,
    Snapshot,
    State,
)
from agentenv.state import _table as table_module
from agentenv.state._canonical import canonical_json, digest

COLLECTIONS = {"a": "id", "b": "sku"}
KEYS = [str(i) for i in range(8)]
_MASK = (1 << 256) - 1


class Model:
    """The meaning: ordered dicts of records, copied whole on every fork."""

    def __init__(self) -> None:
        self.tables: dict[str, dict[str, dict[str, Any]]] = {n: {} for n in COLLECTIONS}
        self.changes = 0

    def clone(self) -> Model:
        other = Model()
        other.tables = copy.deepcopy(self.tables)
        other.changes = self.changes
        return other

    def become(self, other: Model) -> None:
        self.tables, self.changes = other.tables, other.changes

    def hash(self) -> str:
        total = 0
        for name, rows in self.tables.items():
            part = digest("collection", "", COLLECTIONS[name]) + digest("collection-name", name)
            for key, record in rows.items():
                part += digest(name, key, canonical_json(record))
            total = (total + part) & _MASK
        return format(total, "064x")


def _check(state: State | Snapshot, model: Model) -> None:
    assert state.to_dict() == {n: list(rows.values()) for n, rows in model.tables.items()}
    assert state.hash() == model.hash()
    assert state.changes == model.changes
    if isinstance(state, State):
        for name, rows in model.tables.items():
            assert state.keys(name) == list(rows)
            assert state.count(name) == len(rows)
            assert [r[COLLECTIONS[name]] for r in state.list(name)] == list(rows)
    for table in state._tables.values():  # the slot bookkeeping adds up
        slots = sum(len(c) for c in table.chunks) + len(table.tail)
        assert slots == table.size == table.count + table.stale
        assert table.count == sum(1 for _ in table.items())


def _record(rng: random.Random, name: str, key: str) -> dict[str, Any]:
    record: dict[str, Any] = {COLLECTIONS[name]: key, "v": rng.randrange(4)}
    if rng.random() < 0.3:
        record["nested"] = {"xs": [rng.randrange(3)], "é": "ü"}
    return record


def _write(rng: random.Random, state: State, model: Model) -> None:
    name = rng.choice(list(COLLECTIONS))
    key = rng.choice(KEYS)
    rows = model.tables[name]
    op = rng.choice(["put", "put", "insert", "update", "delete", "delete"])
    if op == "put":
        record = _record(rng, name, key)
        state.put(name, record)
        rows[key] = record  # a replaced key keeps its place
    elif op == "insert":
        record = _record(rng, name, key)
        if key in rows:
            with pytest.raises(RecordExists):
                state.insert(name, record)
            return
        state.insert(name, record)
        rows[key] = record
    elif op == "update":
        changes = {"v": rng.randrange(4), "w": "x"}
        if key not in rows:
            with pytest.raises(RecordNotFound):
                state.update(name, key, changes)
            return
        state.update(name, key, changes)
        rows[key] = {**rows[key], **changes}
    else:
        if key not in rows:
            with pytest.raises(RecordNotFound):
                state.delete(name, key)
            return
        assert state.delete(name, key) == rows.pop(key)
    model.changes += 1


class Boom(Exception):
    pass


def _steps(rng: random.Random, state: State, model: Model, depth: int, n: int) -> None:
    """Run n random steps on `state`, keeping `model` in step with it."""
    snapshots: list[tuple[Snapshot, Model]] = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.6:
            _write(rng, state, model)
        elif roll < 0.7 and depth < 3:
            before = model.clone()
            fail = rng.random() < 0.5
            try:
                with state.transaction():
                    _steps(rng, state, model, depth + 1, rng.randrange(1, 6))
                    if fail:
                        raise Boom
            except Boom:
                model.become(before)
                model_restored = True
            else:
                model_restored = False
            _check(state, model)
            assert model_restored == fail
        elif roll < 0.78:
            snapshots.append((state.snapshot(), model.clone()))
        elif roll < 0.84 and snapshots and depth == 0:
            snap, snap_model = rng.choice(snapshots)
            state.restore(snap)
            model.become(snap_model.clone())
        elif roll < 0.92:
            fork, fork_model = state.fork(), model.clone()
            for _ in range(rng.randrange(4)):
                _write(rng, fork, fork_model)
            _check(fork, fork_model)
            if rng.random() < 0.5:  # carry on in the fork; the parent must be untouched
                _check(state, model)
        else:
            committed = state.committed()
            if depth == 0:
                _check(committed, model)
        _check(state, model)
    for snap, snap_model in snapshots:  # a snapshot never changes
        _check(snap, snap_model)


@pytest.mark.parametrize("seed", range(60))
def test_the_store_means_what_the_model_means(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table_module, "COMPACT_AT", 2)
    rng = random.Random(seed)
    state = State(dict(COLLECTIONS))
    model = Model()
    _steps(rng, state, model, 0, 120)


def test_an_undone_delete_puts_the_record_back_in_its_place_after_forks() -> None:
    state = State.from_records({"a": [{"id": str(i)} for i in range(5)]})
    snap = state.snapshot()
    with pytest.raises(Boom), state.transaction():
        state.delete("a", "2")
        state.fork()  # the table is shared from here: the rollback must not touch the fork's
        state.insert("a", {"id": "9"})
        state.delete("a", "0")
        raise Boom
    assert state.keys("a") == ["0", "1", "2", "3", "4"]
    assert state.hash() == snap.hash()
    state.delete("a", "2")
    state.insert("a", {"id": "2"})  # a new insert goes last, as in a dict
    assert state.keys("a") == ["0", "1", "3", "4", "2"]


def test_compaction_keeps_order_and_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(table_module, "COMPACT_AT", 4)
    state = State.from_records({"a": [{"id": str(i)} for i in range(20)]})
    before = state.snapshot()
    odd_first = [*range(1, 20, 2), 0]
    for i in odd_first[:-1]:
        state.delete("a", str(i))
    assert state._tables["a"].stale == 10  # half dead: not yet
    state.delete("a", "0")
    table = state._tables["a"]
    assert table.stale == 0 and table.size == 9  # compacted
    assert state.keys("a") == [str(i) for i in range(2, 20, 2)]
    assert before.fork().keys("a") == [str(i) for i in range(20)]  # the snapshot kept its own
    state.insert("a", {"id": "0"})
    assert state.keys("a") == [*(str(i) for i in range(2, 20, 2)), "0"]
    rebuilt = State.from_records({"a": [{"id": str(i)} for i in range(0, 20, 2)]})
    assert state.hash() == rebuilt.hash()


def test_from_records_equals_inserting_one_by_one() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    rows = [{"id": str(i), "n": i, "tags": ["x"] * (i % 3)} for i in range(50)]
    bulk = State.from_records({"a": rows}, {"a": CollectionInfo.create("id", schema)})
    one = State({"a": CollectionInfo.create("id", schema)})
    for row in rows:
        one.insert("a", row)
    assert (bulk.to_dict(), bulk.hash(), bulk.changes) == (one.to_dict(), one.hash(), one.changes)
    rows[0]["tags"].append("later")  # the stored records are private copies
    assert bulk.get("a", "0") == {"id": "0", "n": 0, "tags": []}
    with pytest.raises(RecordExists):
        State.from_records({"a": [{"id": "1"}, {"id": 1}]})


def test_a_snapshot_pickles_with_its_order_hash_and_schema() -> None:
    import pickle

    schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    state = State.from_records(
        {"a": [{"id": str(i), "n": i} for i in range(5)]},
        {"a": CollectionInfo.create("id", schema)},
    )
    state.delete("a", "1")
    state.put("a", {"id": "9", "n": 9})
    back = pickle.loads(pickle.dumps(state.snapshot())).fork()
    assert (back.keys("a"), back.hash(), back.changes) == (
        state.keys("a"),
        state.hash(),
        state.changes,
    )
    with pytest.raises(RecordInvalid, match="n: 'x' is not of type 'integer'"):
        back.put("a", {"id": "2", "n": "x"})
