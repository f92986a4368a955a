"""What a state check names that its state cannot have: an unknown collection, or a field
no record of the collection has.

A misspelled field in a count check's `where:` (or a field check's `field:`) matches no
record, so the check quietly scores 0 and a broken verifier looks like a bad agent. Before
an agent runs, `field_problems` compares what the checks name with what is known of each
collection's records:

* **its schema**: the `properties` it declares, level by level (`address.city`: `city`
  among the properties of `address`; a digit segment, `items.0.sku`, goes into an array's
  `items`). A field a schema level does not declare is an error;
* **its seed records**: the fields they have, added to the schema's at each level it
  declares. A collection with no schema (or one that declares no `properties`) is known by
  its seed records' top-level fields alone, and since a tool may add a field no seed record
  has, a field missing there is an error only when it is close to one they have (`stauts`
  for `status`: a misspelling; `frozen`, set by a tool, is let through).

A level that neither tells (no `properties` there, `patternProperties`, or a collection
with no schema and no seed records) is not checked: any field may be there. The key field
is always known. A close name is offered (`difflib`). A `where:` value that is an object
is matched as a subset, so its keys are checked as fields too.

    >>> field_problems(
    ...     [{"collection": "tickets", "where": {"stauts": "open"}, "count": 1}],
    ...     known_fields(env.seed),
    ... )
    [((0, 'where', 'stauts'), "no record of collection 'tickets' has a field 'stauts'
    (did you mean 'status'?; fields known from its schema: id, status, subject)")]
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agentenv.grading.state_checks import STATE_CHECKS, CountCheck, FieldCheck
from agentenv.state import Snapshot, State

_SHOWN = 12
"""At most this many known fields are listed in a message."""


@dataclass
class FieldTree:
    """The fields known at one level of a record: each with what is known below it, and
    (for an array) what is known of its items. `keys` None: this level is not known (any
    field may be there)."""

    keys: dict[str, FieldTree] | None = None
    items: FieldTree | None = None
    declared: bool = False
    """The keys come from a schema's `properties` (not only from seed records)."""

    def child(self, segment: str) -> FieldTree | None:
        """What is known below `segment` (a key, or an index into an array); None when the
        segment itself is not known here (see `allows`)."""
        if self.keys is not None and segment in self.keys:
            return self.keys[segment]
        if _index(segment) and self.items is not None:
            return self.items
        return None

    def allows(self, segment: str) -> bool:
        """Whether a record may have `segment` at this level, as far as is known."""
        if self.keys is None:
            return True
        return segment in self.keys or (_index(segment) and self.items is not None)


def _index(segment: str) -> bool:
    """Whether a path segment can index a list (as `checklist.lookup` reads it)."""
    return segment.lstrip("-").isdigit()


_OPEN = FieldTree()
"""A level nothing is known of."""


@dataclass
class CollectionFields:
    """What is known of one collection's record fields, and where it was learned."""

    name: str
    tree: FieldTree
    source: str = field(metadata={"doc": "'its schema', 'its seed records' or both."})

    def unknown(self, path: str) -> tuple[str, list[str], bool] | None:
        """The first prefix of dotted `path` that no known record has, with the fields
        known at that level and whether a schema declares them; None when the path is
        known (or cannot be told)."""
        node: FieldTree | None = self.tree
        parts = path.split(".")
        for i, segment in enumerate(parts):
            if node is not None and node.items is not None and _index(segment):
                node = node.items
                continue
            if node is None or node.keys is None:
                return None
            if not node.allows(segment):
                return ".".join(parts[: i + 1]), sorted(node.keys), node.declared
            node = node.child(segment)
        return None


def _from_schema(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> FieldTree:
    if not isinstance(schema, Mapping) or depth > 16:
        return _OPEN
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        return _from_schema(defs.get(ref.removeprefix("#/$defs/")), defs, depth + 1)
    for key in ("anyOf", "oneOf"):  # `X | null`: the one option with structure
        options = schema.get(key)
        if isinstance(options, list):
            shaped = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
            return _from_schema(shaped[0], defs, depth + 1) if len(shaped) == 1 else _OPEN
    items = schema.get("items")
    tree = FieldTree(items=_from_schema(items, defs, depth + 1) if items is not None else None)
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and "patternProperties" not in schema:
        tree.keys = {
            str(name): _from_schema(sub, defs, depth + 1) for name, sub in properties.items()
        }
        tree.declared = True
    return tree


def _add_values(tree: FieldTree, values: Iterable[Any], *, establish: bool) -> None:
    """Add the keys the seed values have to `tree`, at the levels the tree already knows
    (or, with `establish`, at this level even where it does not)."""
    objects = [v for v in values if isinstance(v, Mapping)]
    if objects and (tree.keys is not None or establish):
        keys = tree.keys if tree.keys is not None else {}
        below: dict[str, list[Any]] = {}
        for obj in objects:
            for key, value in obj.items():
                below.setdefault(str(key), []).append(value)
        for key, found in below.items():
            node = keys.setdefault(key, FieldTree())
            _add_values(node, found, establish=False)
        tree.keys = keys
    arrays = [item for v in values if isinstance(v, list) for item in v]
    if arrays and tree.items is not None:
        _add_values(tree.items, arrays, establish=False)


def collection_fields(
    name: str, key: str, schema: Mapping[str, Any] | None, records: list[Any]
) -> CollectionFields | None:
    """What is known of a collection's fields from its schema and its seed records; None
    when neither tells anything (no schema `properties`, no records)."""
    tree = _from_schema(schema, (schema or {}).get("$defs") or {}) if schema else FieldTree()
    declared = tree.keys is not None
    if not declared and not records:
        return None
    if tree is _OPEN:
        tree = FieldTree()
    _add_values(tree, records, establish=not declared)
    if tree.keys is None:
        return None
    tree.keys.setdefault(key, FieldTree())
    if declared and records:
        source = "its schema and seed records"
    else:
        source = "its schema" if declared else "its seed records (it has no schema)"
    return CollectionFields(name, tree, source)


def known_fields(state: State | Snapshot) -> dict[str, CollectionFields | None]:
    """Per collection of a (seed) state, what is known of its records' fields (None: not
    knowable, see the module docstring)."""
    live = state.fork() if isinstance(state, Snapshot) else state
    out: dict[str, CollectionFields | None] = {}
    for name in live.collections:
        info = live.info(name)
        out[name] = collection_fields(name, info.key, info.schema, live.list(name))
    return out


def _closest(word: str, choices: Iterable[str]) -> str | None:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def _listing(fields: list[str]) -> str:
    shown = ", ".join(fields[:_SHOWN])
    return shown + (f", ... ({len(fields)} in all)" if len(fields) > _SHOWN else "")


def _field_problem(known: CollectionFields, path: str) -> str | None:
    found = known.unknown(path)
    if found is None:
        return None
    prefix, choices, declared = found
    head, _, last = prefix.rpartition(".")
    close = _closest(last, choices)
    if not declared and close is None:
        return None  # seed records only: a tool may add a field no seed record has
    hint = f"did you mean {(head + '.' if head else '') + close!r}?; " if close else ""
    under = f" under {head!r}" if head else ""
    return (
        f"no record of collection {known.name!r} has a field {prefix!r} "
        f"({hint}fields{under} known from {known.source}: {_listing(choices)})"
    )


def _where_paths(where: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, str]]:
    """(the key as written, the dotted path it names) for each `where` key, and for the
    keys of a nested object value (matched as a subset: its keys are fields too)."""
    for key, value in where.items():
        path = f"{prefix}{key}"
        yield key, path
        if isinstance(value, Mapping):
            for _, inner in _where_paths(value, f"{path}."):
                yield key, inner


def field_problems(
    checks: Iterable[Any], known: Mapping[str, CollectionFields | None]
) -> list[tuple[tuple[Any, ...], str]]:
    """What the declarative checks among `checks` name that the state cannot have, as
    (location in the list of checks, message) pairs: `(2, 'collection')` for an unknown
    collection, `(0, 'where', 'stauts')` or `(1, 'field')` for an unknown field. Python
    checks, file checks and checks that do not parse are left alone (the checks' own
    validation reports those)."""
    out: list[tuple[tuple[Any, ...], str]] = []
    for i, raw in enumerate(checks):
        check = raw
        if isinstance(raw, Mapping):
            try:
                check = STATE_CHECKS.validate_python([raw])[0]
            except ValidationError:
                continue
        if not isinstance(check, FieldCheck | CountCheck):
            continue
        if check.collection not in known:
            choices = sorted(known)
            close = _closest(check.collection, choices)
            hint = f"did you mean {close!r}?; " if close else ""
            out.append(
                (
                    (i, "collection"),
                    f"unknown collection {check.collection!r} ({hint}collections: "
                    f"{_listing(choices) or 'none'})",
                )
            )
            continue
        fields = known[check.collection]
        if fields is None:
            continue
        if isinstance(check, FieldCheck):
            if check.field:
                problem = _field_problem(fields, check.field)
                if problem:
                    out.append(((i, "field"), problem))
            continue
        reported: set[str] = set()
        for key, path in _where_paths(check.where):
            if key in reported:
                continue
            problem = _field_problem(fields, path)
            if problem:
                reported.add(key)
                out.append(((i, "where", key), problem))
    return out
