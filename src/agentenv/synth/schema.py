"""What synthesis reads from tools and their results: typed parameters, typed output
fields, the records they are about, and the normalised names that join them.

A parameter's *normalised name* is what it means, not how it is spelled: the `id` of a
CRUD `get` on `tickets` is a `ticket_id`; a `ticket_id` filter stays `ticket_id`. An
output field's normalised name works the same way once the object holding it has been
recognised as a record of a collection (its key field names a record of that
collection and its other fields agree with the record): the `id` of a ticket summary is
a `ticket_id`. Equal normalised names (with compatible types) are what the tool graph
joins on and what walks bind arguments from.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agentenv.env.tool import Tool
from agentenv.spec.json_types import json_type
from agentenv.state import SEPARATOR, State

SCALARS = ("string", "integer", "number", "boolean")
_COUNTS = frozenset({"total", "count", "limit", "offset", "page", "pages"})


def singular(name: str) -> str:
    """`tickets` -> `ticket`, `categories` -> `category`, `inbox` -> `inbox` (the last
    part of a composed collection name)."""
    word = name.rsplit(SEPARATOR, 1)[-1]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


def key_norm(collection: str, key: str) -> str:
    """The normalised name of a collection's key field: `tickets`, `id` -> `ticket_id`."""
    return f"{singular(collection)}_{key}"


def schema_types(prop: dict[str, Any]) -> frozenset[str]:
    """The JSON types a schema accepts, `null` left out (`anyOf`, type lists, enums)."""
    found: set[str] = set()
    kind = prop.get("type")
    if isinstance(kind, str):
        found.add(kind)
    elif isinstance(kind, list):
        found.update(k for k in kind if isinstance(k, str))
    for sub in list(prop.get("anyOf", [])) + list(prop.get("oneOf", [])):
        if isinstance(sub, dict):
            found |= schema_types(sub)
    if not found and prop.get("enum"):
        found.update(json_type(v) for v in prop["enum"])
    found.discard("null")
    return frozenset(found)


def types_compatible(wanted: frozenset[str], given: frozenset[str]) -> bool:
    """Whether a value of one of `given` types fits a parameter of `wanted` types (an
    untyped parameter takes anything; a number takes an integer)."""
    if not wanted or not given:
        return True
    if wanted & given:
        return True
    return "number" in wanted and "integer" in given


def _subschema(prop: dict[str, Any], key: str) -> Any:
    if key in prop:
        return prop[key]
    for sub in list(prop.get("anyOf", [])) + list(prop.get("oneOf", [])):
        if isinstance(sub, dict) and key in sub:
            return sub[key]
    return None


@dataclass(frozen=True)
class Param:
    """One input parameter of a tool."""

    name: str
    norm: str
    types: frozenset[str]
    required: bool
    description: str
    schema: dict[str, Any]
    collection: str | None = None
    """The collection a CRUD tool's parameter belongs to."""

    @property
    def enum(self) -> list[Any] | None:
        """The allowed values, if the schema lists them."""
        found = _subschema(self.schema, "enum")
        return list(found) if isinstance(found, list) else None

    @property
    def pattern(self) -> str | None:
        """The schema's regular expression for a string, if any."""
        found = _subschema(self.schema, "pattern")
        return found if isinstance(found, str) else None

    def accepts(self, value: Any) -> bool:
        """Whether a value fits the parameter's type, enum and pattern."""
        if not types_compatible(self.types, frozenset({json_type(value)})):
            return False
        enum = self.enum
        if enum is not None and value not in enum:
            return False
        pattern = self.pattern
        if pattern is not None and isinstance(value, str):
            try:
                return re.search(pattern, value) is not None
            except re.error:
                return True
        return True


def crud_target(tool: Tool) -> tuple[str, str] | None:
    """`(collection, op)` of a CRUD tool (from its source `crud:coll.op`), else None."""
    if not tool.source.startswith("crud:"):
        return None
    coll, _, op = tool.source[5:].rpartition(".")
    return (coll, op) if coll and op else None


def tool_params(tool: Tool, keys: dict[str, str]) -> list[Param]:
    """The parameters of a tool, in schema order, with normalised names. `keys` maps
    each collection to its key field."""
    schema = tool.input_schema
    required = set(schema.get("required", []))
    crud = crud_target(tool)
    singulars = {singular(c): c for c in keys}
    out = []
    for name, prop in schema.get("properties", {}).items():
        prop = prop if isinstance(prop, dict) else {}
        norm, collection = name, None
        if crud is not None and crud[0] in keys:
            collection = crud[0]
            if name == keys[collection]:
                norm = key_norm(collection, name)
        elif name == "id":  # a Python tool's bare `id`: the collection its name mentions
            for word in re.split(r"[_\W]+", tool.name.rsplit(SEPARATOR, 1)[-1]):
                if word in singulars and keys[singulars[word]] == "id":
                    norm = key_norm(singulars[word], "id")
                    break
        out.append(
            Param(
                name=name,
                norm=norm,
                types=schema_types(prop),
                required=name in required,
                description=str(prop.get("description") or ""),
                schema=prop,
                collection=collection,
            )
        )
    return out


@dataclass(frozen=True)
class Leaf:
    """One scalar in a tool's result."""

    path: str
    """`tickets[].id`, `customer.email`, `id`: list positions written `[]`."""
    name: str
    norm: str
    value: Any
    entity: str | None
    """The collection of the record that holds this field, when recognised."""
    record_key: str | None
    """That record's key."""
    index: tuple[int, ...]
    """The list positions on the way to the field (empty outside lists)."""
    holder: dict[str, Any]
    """The object that holds the field (for telling one list item from another)."""

    @property
    def in_list(self) -> bool:
        """Whether the field sits inside a list."""
        return bool(self.index)


def entity_of(obj: dict[str, Any], state: State) -> str | None:
    """The collection whose record this object shows, if any: its key field names a
    record there, and most of its other scalar fields agree with that record."""
    best, best_score = None, 0
    for coll in state.collections:
        key = state.info(coll).key
        value = obj.get(key)
        if not isinstance(value, str | int) or isinstance(value, bool):
            continue
        record = state.get(coll, value)
        if record is None:
            continue
        shared = [f for f, v in obj.items() if f != key and f in record and _scalar(v)]
        agree = sum(1 for f in shared if record[f] == obj[f])
        if shared and agree * 2 < len(shared):
            continue
        score = 1 + agree
        if score > best_score:
            best, best_score = coll, score
    return best


def _scalar(value: Any) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def leaves(value: Any, state: State | None) -> list[Leaf]:
    """Every scalar of a result, each with its path, its normalised name and the record
    it belongs to (recognised against `state`, the state the result came from)."""
    out: list[Leaf] = []
    cache: dict[int, str | None] = {}

    def walk(node: Any, path: str, index: tuple[int, ...], parent_name: str) -> None:
        if isinstance(node, dict):
            entity = None
            if state is not None:
                if id(node) not in cache:
                    cache[id(node)] = entity_of(node, state)
                entity = cache[id(node)]
            key_field = state.info(entity).key if (state is not None and entity) else None
            record_key = str(node.get(key_field)) if key_field else None
            for name, child in node.items():
                sub = f"{path}.{name}" if path else name
                if _scalar(child):
                    if child is None:
                        continue
                    norm = key_norm(entity, name) if entity and name == key_field else name
                    out.append(Leaf(sub, name, norm, child, entity, record_key, index, node))
                else:
                    walk(child, sub, index, name)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[]", (*index, i), parent_name)
        elif _scalar(node) and node is not None and not path:
            out.append(Leaf("", "result", "result", node, None, None, index, {}))

    walk(value, "", (), "")
    return out


def informative(value: Any) -> bool:
    """Whether a result says something: a scalar other than counts and paging, or a
    non-empty text. `None`, `{}`, `[]` and `{"items": [], "total": 0}` say nothing."""
    return any(_says_something(leaf) for leaf in _raw_leaves(value))


def _raw_leaves(value: Any, name: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _raw_leaves(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _raw_leaves(v, name)
    else:
        yield name, value


def _says_something(leaf: tuple[str, Any]) -> bool:
    name, value = leaf
    if value is None or value == "":
        return False
    return name not in _COUNTS


def humanise(path: str) -> str:
    """`customer.email` -> `customer email`; `tickets[].id` -> `tickets id`."""
    return re.sub(r"[._\[\]]+", " ", path).strip()
