"""The mirror: a server's data plane (`data/get`) as records in an instance's State.

A process environment with a data plane keeps no state of its own: after each successful
write call the runtime reads `data/get` and this module writes it into the instance's State
inside the gateway's transaction, so state checks, diffs and hashes see the server's data
(and a call that fails leaves the State as it was).

How `data/get` parts become collections (the protocol's parts are free-form JSON):

- a `data` part's object is `{name: value, ...}`; each name is a collection;
- a value that is a list of objects which all carry a non-null `id` is that collection's
  records, keyed by `id`, exactly as given;
- a list of objects without one: records keyed by their position, each given an `_index`
  field (the only field we add; positions shift when the server inserts in the middle);
- any other value (an object, a scalar, a list of scalars) is one record
  `{"id": name, "value": value}` in the collection `_values`;
- a `data` part whose data is not an object is `{"id": "data", "value": ...}` in `_values`;
- several data parts are merged in order (a later one wins per collection);
- `text` and `file` parts are not state: they stay with the server (`data/get` still
  returns them).

Writing is a replacement: records the server no longer has are deleted, changed ones put,
unchanged ones left alone (so the changelog and the diff show only what moved), and a
collection the server no longer names is emptied.
"""

from __future__ import annotations

from typing import Any

from agentenv.state import CollectionInfo, State, StateView

VALUES = "_values"
"""The collection of data-plane values that are not lists of records."""


def parts_of(answer: Any) -> list[dict[str, Any]]:
    """The parts of a `data/get` answer (`{"parts": [...]}`, a bare list, or one part)."""
    if isinstance(answer, dict) and isinstance(answer.get("parts"), list):
        return [p for p in answer["parts"] if isinstance(p, dict)]
    if isinstance(answer, list):
        return [p for p in answer if isinstance(p, dict)]
    if isinstance(answer, dict) and answer.get("kind") == "data":
        return [answer]
    return []


def collections_of(answer: Any) -> dict[str, tuple[str, list[dict[str, Any]]]]:
    """`data/get` as {collection: (key field, records)} (the mapping in the docstring)."""
    out: dict[str, tuple[str, list[dict[str, Any]]]] = {}
    values: list[dict[str, Any]] = []
    for part in parts_of(answer):
        if part.get("kind", "data") != "data" or "data" not in part:
            continue
        data = part["data"]
        if not isinstance(data, dict):
            values.append({"id": "data", "value": data})
            continue
        for name, value in data.items():
            name = str(name)
            records = value if isinstance(value, list) else None
            if records is not None and all(isinstance(r, dict) for r in records):
                if all(r.get("id") is not None for r in records):
                    out[name] = ("id", list(records))
                else:
                    out[name] = ("_index", [{"_index": i, **r} for i, r in enumerate(records)])
            else:
                values = [v for v in values if v["id"] != name]
                values.append({"id": name, "value": value})
    if values:
        out[VALUES] = ("id", values)
    return out


def seed_records(answer: Any) -> tuple[dict[str, CollectionInfo], dict[str, list[dict[str, Any]]]]:
    """The collections and records of a first `data/get`, for an environment's seed."""
    found = collections_of(answer)
    infos = {name: CollectionInfo.create(key) for name, (key, _) in found.items()}
    return infos, {name: rows for name, (_, rows) in found.items()}


def mirror_into(state: State | StateView, answer: Any) -> None:
    """Make `state` hold what `data/get` answered (call it inside a transaction)."""
    found = collections_of(answer)
    existing = set(state.collections)
    for name in existing - set(found):
        for key in state.keys(name):
            state.delete(name, key)
    for name, (key_field, rows) in found.items():
        if name not in existing:
            _add_collection(state, name, key_field)
        key_of = state.info(name).key
        wanted: dict[str, dict[str, Any]] = {}
        for row in rows:
            if row.get(key_of) is not None:
                wanted[str(row[key_of])] = row
        for key in state.keys(name):
            if key not in wanted:
                state.delete(name, key)
        for key, row in wanted.items():
            if state.get(name, key) != row:
                state.put(name, row)


def _add_collection(state: State | StateView, name: str, key_field: str) -> None:
    if isinstance(state, State):
        state.add_collection(name, key_field)
        return
    # A composed child's view: the collection is added to the whole state, in its namespace.
    base, prefix = state._base, state._prefix
    _add_collection(base, prefix + name, key_field)
