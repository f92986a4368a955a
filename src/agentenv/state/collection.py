"""What a record of a collection must be, and how the store makes its private copy.

`CollectionInfo` is a collection's key field and JSON schema, with the schema compiled
once: a `Draft202012Validator`, and beside it the fast exact check of the simple keywords
(`_fastcheck.py`). `prepare` is what every write runs first: the key, the canonical text
(made anyway, for the digest), the stored copy parsed back from it, and the schema
validated "fast accept, slow reject" (a record the fast check refuses, or any record of a
schema it cannot compile, goes to jsonschema, whose verdict and message are reported).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from agentenv.state._canonical import canonical_json, parse_canonical
from agentenv.state._fastcheck import Check, compile_check
from agentenv.state.errors import RecordInvalid

Record = dict[str, Any]


@dataclass(frozen=True)
class CollectionInfo:
    """What a collection is: the field that keys its records and an optional JSON schema."""

    key: str = "id"
    schema: Mapping[str, Any] | None = None
    validator: Draft202012Validator | None = field(default=None, compare=False, repr=False)
    check: Check | None = field(default=None, compare=False, repr=False)
    """The schema compiled to a fast exact check (None: jsonschema alone decides)."""

    @classmethod
    def create(cls, key: str = "id", schema: Mapping[str, Any] | None = None) -> CollectionInfo:
        """Build the info, compiling the schema's validator (and its fast check) once."""
        if not schema:
            return cls(key=key, schema=schema)
        validator = Draft202012Validator(dict(schema))
        return cls(key=key, schema=schema, validator=validator, check=compile_check(schema))

    def __reduce__(self) -> tuple[Any, ...]:
        # The validator and the compiled check do not pickle; they are rebuilt from the
        # schema (a state or snapshot sent to another process keeps validating).
        if self.validator is None:
            return (CollectionInfo, (self.key, self.schema))
        return (CollectionInfo.create, (self.key, self.schema))


def prepare(
    collection: str, info: CollectionInfo, record: Mapping[str, Any]
) -> tuple[str, Record, str]:
    """The record's key, its private stored copy and its canonical text, or RecordInvalid."""
    if type(record) is not dict and not isinstance(record, Mapping):
        raise RecordInvalid(collection, None, f"expected an object, got {type(record).__name__}")
    if info.key not in record or record[info.key] is None:
        raise RecordInvalid(collection, None, f"missing key field {info.key!r}")
    key = str(record[info.key])
    try:
        text = canonical_json(record)
    except (TypeError, ValueError) as exc:
        raise RecordInvalid(collection, key, f"not JSON-serialisable: {exc}") from None
    stored = parse_canonical(text)
    validator = info.validator
    if validator is not None and (info.check is None or not info.check(stored)):
        error = next(iter(validator.iter_errors(stored)), None)
        if error is not None:
            where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.path)
            raise RecordInvalid(
                collection, key, f"{where.lstrip('.') or 'record'}: {error.message}"
            )
    return key, stored, text


def fresh(stored: Record, text: str) -> Record:
    """A copy of a record just stored, for the writer to keep: a flat record (its
    canonical text has no bracket but the outer one, so every value is a scalar) is
    copied one level, at C speed; any other is parsed again from its text."""
    if "[" not in text and text.count("{") == 1:
        return dict(stored)
    return parse_canonical(text)
