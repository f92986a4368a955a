"""The state hash kept up to date by writes equals the hash summed afresh, and the hash
of a state built from the same records, after any sequence of operations."""

from __future__ import annotations

import random

import pytest

from agentenv.state import State
from agentenv.state.store import _hash_total


def _fresh_hash(state: State) -> str:
    rebuilt = State.from_records(
        state.to_dict(), {name: state.info(name) for name in state.collections}
    )
    return rebuilt.hash()


@pytest.mark.parametrize("seed", range(12))
def test_kept_hash_equals_the_summed_one(seed: int) -> None:
    rng = random.Random(seed)
    state = State({"a": "id", "b": "id"})
    snapshots = []
    for step in range(300):
        op = rng.random()
        name = rng.choice(state.collections)
        key = f"k{rng.randrange(12)}"
        record = {"id": key, "v": rng.randrange(5), "tags": ["x"] * rng.randrange(2)}
        if op < 0.45:
            state.put(name, record)
        elif op < 0.55 and state.has(name, key):
            state.delete(name, key)
        elif op < 0.62 and state.has(name, key):
            state.update(name, key, {"v": rng.randrange(5)})
        elif op < 0.75:
            try:
                with state.transaction():
                    state.put(name, record)
                    state.put(name, {**record, "v": 9})
                    if rng.random() < 0.5:
                        raise RuntimeError("roll back")
            except RuntimeError:
                pass
        elif op < 0.82:
            snapshots.append(state.snapshot())
        elif op < 0.87 and snapshots:
            state.restore(rng.choice(snapshots))
        elif op < 0.92:
            state = state.fork()
        elif op < 0.94:
            state.add_collection(f"c{step}")
        else:
            state.hash()  # a read between writes caches the text
        assert state.hash() == format(_hash_total(state._tables), "064x")
        if step % 25 == 0:
            assert state.hash() == _fresh_hash(state)
    assert state.hash() == _fresh_hash(state)
