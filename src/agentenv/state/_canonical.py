"""Canonical JSON and record digests: the ground the state hash stands on.

The canonical form is `json.dumps` with sorted keys, no whitespace and UTF-8 text. It is
stable across processes and Python versions (float repr has been shortest-round-trip
since 3.1), which is what makes a state hash comparable between two machines.
"""

from __future__ import annotations

import json
from hashlib import blake2b
from json.decoder import JSONDecoder
from json.encoder import c_make_encoder, encode_basestring
from json.scanner import make_scanner
from typing import Any

_MASK = (1 << 256) - 1


def _not_serialisable(value: Any) -> Any:
    # json.JSONEncoder.default's own message, so errors read as json.dumps's do.
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _dumps_canonical(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


_OPTIONS = (_not_serialisable, encode_basestring, None, ":", ",", True, False, False)
"""c_make_encoder's arguments after `markers` for json.dumps's canonical options: default,
string encoder, indent, key separator, item separator, sort_keys, skipkeys, allow_nan."""


def _checking_encoder() -> Any:
    # The C encoder that json.dumps builds for these options, with a fresh `markers` dict
    # for its circular-reference check (it leaves entries behind when it raises).
    return c_make_encoder({}, *_OPTIONS)


# The same encoder without the circular-reference check, built once: no per-call setup.
_fast_encoder = None if c_make_encoder is None else c_make_encoder(None, *_OPTIONS)


def _encode_canonical(value: Any) -> str:
    try:
        return "".join(_fast_encoder(value, 0))  # type: ignore[misc]
    except RecursionError:
        # A cycle (or nesting too deep for json.dumps too): the checking encoder says which,
        # with json.dumps's own error ("Circular reference detected", or RecursionError).
        return "".join(_checking_encoder()(value, 0))


canonical_json = _dumps_canonical if c_make_encoder is None else _encode_canonical
"""Serialise a JSON-compatible value in the one form used for hashing and comparison.

Exactly `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
allow_nan=False)`, errors included (tests/state/test_canonical.py compares the two), at a
third of its cost for a small record: it skips building a `JSONEncoder` per call."""


_scan = make_scanner(JSONDecoder())


def parse_canonical(text: str) -> Any:
    """`json.loads(text)` for text that `canonical_json` made (one complete JSON value, no
    surrounding whitespace, no NaN): the scanner alone, without `loads`' checks (4x faster)."""
    return _scan(text, 0)[0]


_PREFIXES: dict[str, Any] = {}


def record_hasher(collection: str) -> Any:
    """A BLAKE2b hasher that has taken `digest`'s part for the collection name (copy it,
    never update it)."""
    prefix = _PREFIXES.get(collection)
    if prefix is None:
        if len(_PREFIXES) > 4096:  # names come and go (tests, composed children): stay small
            _PREFIXES.clear()
        prefix = blake2b(collection.encode() + b"\x00", digest_size=32)
        _PREFIXES[collection] = prefix
    return prefix


def record_digest(collection: str, key: str, text: str) -> int:
    """`digest(collection, key, text)`, from a hasher that has already taken the
    collection's part (the same bytes go in, so the same digest comes out)."""
    prefix = _PREFIXES.get(collection) or record_hasher(collection)
    h = prefix.copy()
    h.update(f"{key}\x00{text}\x00".encode())
    return int.from_bytes(h.digest(), "big")


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
