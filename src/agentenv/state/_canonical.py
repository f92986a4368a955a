"""Canonical JSON and record digests: the ground the state hash stands on.

The canonical form is `json.dumps` with sorted keys, no whitespace and UTF-8 text. It is
stable across processes and Python versions (float repr has been shortest-round-trip
since 3.1), which is what makes a state hash comparable between two machines.
"""

from __future__ import annotations

import json
from hashlib import blake2b
from typing import Any

_MASK = (1 << 256) - 1


def canonical_json(value: Any) -> str:
    """Serialise a JSON-compatible value in the one form used for hashing and comparison."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def digest(*parts: str) -> int:
    """A 256-bit digest of some strings, as an int so that digests can be summed."""
    h = blake2b(digest_size=32)
    for part in parts:
        h.update(part.encode())
        h.update(b"\x00")
    return int.from_bytes(h.digest(), "big")


def combine(total: int, add: int = 0, remove: int = 0) -> int:
    """Add and remove digests from a multiset hash (sum modulo 2**256).

    A sum is order-independent and can be updated by what a call changed alone, so the
    hash after every call costs as much as the call's writes, not the state's size.
    """
    return (total + add - remove) & _MASK


_CONTAINERS = (dict, list)


def copy_json(value: Any) -> Any:
    """A deep copy of JSON data (dicts, lists, scalars), several times faster than deepcopy.

    Scalars are immutable, so only containers are copied (and recursed into); this sits on
    the hot path of every call (record copies, trajectory records).
    """
    kind = type(value)
    if kind is dict:
        return {k: copy_json(v) if type(v) in _CONTAINERS else v for k, v in value.items()}
    if kind is list:
        return [copy_json(v) if type(v) in _CONTAINERS else v for v in value]
    return value
