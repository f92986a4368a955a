"""Bulk loading: many records into an empty table's base in one pass (seed data).

The same checks, errors and stored form as inserting the records one by one (`_prepare`),
with the per-record steps inlined for the common case (a dict holding its key field,
plain JSON, accepted by the compiled schema check). Anything else, and every refusal,
goes through `_prepare` itself, so errors read exactly as an insert's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from agentenv.state._canonical import canonical_json, parse_canonical, record_hasher
from agentenv.state.errors import RecordExists

if TYPE_CHECKING:
    from agentenv.state.store import CollectionInfo

Prepare = Callable[[str, "CollectionInfo", Mapping[str, Any]], tuple[str, dict[str, Any], str]]


def load_rows(
    name: str, info: CollectionInfo, rows: Iterable[Mapping[str, Any]], prepare: Prepare
) -> tuple[dict[str, tuple[int, dict[str, Any], int]], int]:
    """The base `{key: (seq, record, digest)}` of these rows, in order, and the digests' sum.

    `prepare` is the store's per-record check (`store._prepare`), called for every row the
    inlined path does not accept, so that it accepts it or raises its own error.
    """
    field = info.key
    check = info.check
    validated = info.validator is not None
    prefix = record_hasher(name)
    base: dict[str, tuple[int, dict[str, Any], int]] = {}
    total = 0
    for seq, row in enumerate(rows):
        value = row.get(field) if type(row) is dict else None
        stored: Any = None
        if value is not None:
            key = str(value)
            try:
                text = canonical_json(row)
            except (TypeError, ValueError):
                text = ""
            else:
                stored = parse_canonical(text)
                if validated and (check is None or not check(stored)):
                    stored = None
        if stored is None:  # the slow path decides: accept, or raise the insert's error
            key, stored, text = prepare(name, info, row)
        own = stored.get(field)
        if type(own) is str and own == key:  # key by the record's own string: one object
            key = own
        if key in base:
            raise RecordExists(name, key)
        h = prefix.copy()
        h.update(f"{key}\x00{text}\x00".encode())
        record_hash = int.from_bytes(h.digest(), "big")
        base[key] = (seq, stored, record_hash)
        total += record_hash
    return base, total
