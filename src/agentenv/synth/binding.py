"""Binding a tool call's arguments during a walk.

Each argument is bound, in this order of preference:

1. from an **upstream output**: the field the sampled graph edge names, else the latest
   earlier result holding a field of the same normalised name (and a fitting type);
2. from a **state record**: the collection field the parameter stands for (a `ticket_id`
   is a `tickets` key; a parameter named like a field, or whose description names one,
   is that field), preferring the record already used by this call and records related
   to the values bound so far, so that one call's arguments agree with each other;
3. from the **schema**: an enum value, a number in range, a short unique text.

Optional parameters are bound only from upstream outputs (a CRUD `update` also gets one
field to change), so a call stays as plain as its tool allows. Every choice takes the
walk's `random.Random`, so a seed gives the same bindings every time.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from agentenv.env.tool import Tool
from agentenv.spec.json_types import json_type
from agentenv.state import State
from agentenv.synth.fill import fresh_key, schema_value
from agentenv.synth.schema import (
    Leaf,
    Param,
    crud_target,
    key_norm,
    schema_types,
    types_compatible,
)

Source = Literal["upstream", "state", "schema"]
_GENERIC = frozenset({"name", "type", "text", "data", "value", "item", "items", "note"})
_NAME_LIKE = ("email", "name", "title", "subject", "username", "login", "sku", "code", "label")
UNNAMED = len(_NAME_LIKE)
"""What `name_rank` gives a field that does not name anything."""


MAX_ROWS = 500
"""Records a state binding looks at in one collection (a random sample of larger ones)."""


def sample_rows(state: State, collection: str, rng: random.Random) -> list[dict[str, Any]]:
    """The records of a collection, or a random sample of MAX_ROWS of them (in order)."""
    keys = state.keys(collection)
    if len(keys) > MAX_ROWS:
        keys = [keys[i] for i in sorted(rng.sample(range(len(keys)), MAX_ROWS))]
    return [r for r in (state.get(collection, k) for k in keys) if r is not None]


class BindError(Exception):
    """No value could be found for a required argument."""


@dataclass
class Bound:
    """How one argument got its value."""

    param: str
    value: Any
    source: Source
    step: int | None = None
    """The upstream call (0-based) the value came from."""
    path: str | None = None
    """The upstream result's field path, or the state record's field."""
    collection: str | None = None
    key: str | None = None
    """The state record's key, or the key of the upstream record holding the value."""
    hint: tuple[str, Any] | None = None
    """A field and value that tell the chosen upstream list item from the others."""
    position: int | None = None
    """The 1-based position of the chosen list item, when no field tells it apart."""

    def to_json(self) -> dict[str, Any]:
        """The binding as provenance data."""
        out: dict[str, Any] = {"source": self.source}
        for name in ("step", "path", "collection", "key", "position"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value + 1 if name == "step" else value
        if self.hint is not None:
            out["hint"] = {"field": self.hint[0], "value": self.hint[1]}
        return out


@dataclass
class Executed:
    """A call already made in a walk, as later bindings see it."""

    tool: str
    args: dict[str, Any]
    result: Any
    leaves: list[Leaf] = field(default_factory=list)


def name_rank(name: str) -> int:
    """How well a field names a record for a person (lower is better)."""
    for i, word in enumerate(_NAME_LIKE):
        if word in name:
            return i
    return len(_NAME_LIKE)


class Resolver:
    """Which collection fields a parameter stands for, from the state's collections."""

    def __init__(self, state: State) -> None:
        self.keys = {c: state.info(c).key for c in state.collections}
        self.sizes = {c: state.count(c) for c in state.collections}
        self.fields: dict[str, dict[str, frozenset[str]]] = {}
        for coll in state.collections:
            schema = state.info(coll).schema or {}
            props = dict(schema.get("properties", {}))
            found: dict[str, frozenset[str]] = {
                f: schema_types(p) for f, p in props.items() if isinstance(p, dict)
            }
            for record in (state.get(coll, k) or {} for k in state.keys(coll)[:50]):
                for f, v in record.items():
                    if f not in found or not found[f]:
                        found[f] = frozenset({json_type(v)}) - {"null"}
            self.fields[coll] = found
        self._cache: dict[tuple[str, str], list[tuple[str, str]]] = {}
        self._described: dict[tuple[str, str], frozenset[str]] = {}

    def aliases(self, tool: Tool, param: Param) -> frozenset[str]:
        """Field names a parameter's description names (`to`: "The recipient's email
        address" names `email`)."""
        self.targets(tool, param)
        return self._described.get((tool.name, param.name), frozenset())

    def targets(self, tool: Tool, param: Param) -> list[tuple[str, str]]:
        """`(collection, field)` pairs a parameter may be bound from, best first."""
        cached = self._cache.get((tool.name, param.name))
        if cached is not None:
            return cached
        out: list[tuple[str, str]] = []
        crud = crud_target(tool)
        if crud is not None and crud[0] in self.fields and param.name in self.fields[crud[0]]:
            out.append((crud[0], param.name))
        if crud is not None and crud[1] == "search" and crud[0] in self.fields and not out:
            # a search box: the text of a record's naming field finds that record
            texts = [f for f, t in self.fields[crud[0]].items() if "string" in t]
            best = min((name_rank(f) for f in texts), default=len(_NAME_LIKE))
            out += [(crud[0], f) for f in sorted(texts) if name_rank(f) == best]
        for coll, key in self.keys.items():
            if param.norm == key_norm(coll, key) or param.name == key_norm(coll, key):
                out.append((coll, key))
        for coll in sorted(self.fields):
            if param.name in self.fields[coll]:
                out.append((coll, param.name))
        if not any(self.sizes[c] for c, _ in out) and param.description:
            # named like nothing with records: what the description names, e.g. `to`,
            # "The recipient's email address", is an `email`
            text = param.description.lower()
            described = [
                (coll, f)
                for coll in sorted(self.fields)
                for f in sorted(self.fields[coll])
                if len(f) >= 4 and f not in _GENERIC and re.search(rf"\b{re.escape(f)}\b", text)
            ]
            out += described
            self._described[(tool.name, param.name)] = frozenset(f for _, f in described)
        typed = [
            t
            for t in dict.fromkeys(out)
            if types_compatible(param.types, self.fields[t[0]].get(t[1], frozenset()))
        ]
        self._cache[(tool.name, param.name)] = typed
        return typed


class Binder:
    """Binds the arguments of one call at a time (see the module's docstring)."""

    def __init__(self, resolver: Resolver) -> None:
        self.resolver = resolver

    def bind(
        self,
        tool: Tool,
        params: list[Param],
        feeds: dict[str, tuple[int, str]],
        history: list[Executed],
        state: State,
        rng: random.Random,
        *,
        optional: bool = True,
    ) -> tuple[dict[str, Any], list[Bound]]:
        """Arguments for a call of `tool`; `feeds` maps a parameter to the (step, field
        path) the walk's edge feeds it from. `optional=False` leaves optional parameters
        the edges do not feed unset. BindError when a required one has no value."""
        args: dict[str, Any] = {}
        bounds: list[Bound] = []
        anchor: tuple[str, dict[str, Any]] | None = None
        used: set[str] = set()  # records upstream values came from: take more from them
        ordered = sorted(params, key=lambda p: (p.name not in feeds, not p.required))
        for p in ordered:
            found: Bound | None = None
            if p.name in feeds:
                step, path = feeds[p.name]
                found = self.upstream(p, history, rng, step=step, path=path)
                if found is None:
                    raise BindError(f"step {step + 1} gave no {path!r} for {p.name!r}")
            if found is None and (optional or p.required):
                found = self.upstream(p, history, rng, near=used)
            if found is None and p.required:
                aliases = self.resolver.aliases(tool, p)
                found = self.upstream(p, history, rng, aliases=aliases, near=used)
            if found is None and p.required:
                found, anchor = self.from_state(tool, p, state, args, anchor, rng)
                if found is None:
                    found = self.from_schema(tool, p, state, rng)
                if found is None:
                    raise BindError(f"no value for {tool.name}.{p.name}")
            if found is not None:
                if found.source == "upstream" and found.key is not None:
                    used.add(found.key)
                args[p.name] = found.value
                bounds.append(found)
        self._update_needs_a_change(tool, params, args, bounds, state, rng)
        order = {p.name: i for i, p in enumerate(params)}
        bounds.sort(key=lambda b: order[b.param])
        return {b.param: args[b.param] for b in bounds}, bounds

    def upstream(
        self,
        p: Param,
        history: list[Executed],
        rng: random.Random,
        *,
        step: int | None = None,
        path: str | None = None,
        prefer: Any = None,
        aliases: frozenset[str] = frozenset(),
        near: set[str] | None = None,
    ) -> Bound | None:
        """A value from an earlier result: `step`'s field `path`, or else the latest
        result holding a field of `p`'s normalised name (or one its description names)."""
        if p.norm == "result":
            return None
        steps = [step] if step is not None else list(range(len(history) - 1, -1, -1))
        names = {p.norm} | aliases
        for j in steps:
            if j >= len(history):
                continue
            leaves = [
                leaf
                for leaf in history[j].leaves
                if (leaf.path == path if path is not None else leaf.norm in names)
                and p.accepts(leaf.value)
            ]
            if not leaves:
                continue
            pool = leaves
            if near:  # the same list item as the call's other upstream values, if it has one
                pool = [lf for lf in leaves if lf.record_key in near] or leaves
            values = list(dict.fromkeys(_hashable(leaf.value) for leaf in pool))
            chosen = prefer if prefer in values else rng.choice(values)
            leaf = next(leaf for leaf in pool if _hashable(leaf.value) == chosen)
            bound = Bound(
                p.name, leaf.value, "upstream", step=j, path=leaf.path, key=leaf.record_key
            )
            if len({_hashable(lf.value) for lf in leaves}) > 1:
                bound.hint, bound.position = _tell_apart(leaf, leaves)
            return bound
        return None

    def from_state(
        self,
        tool: Tool,
        p: Param,
        state: State,
        args: dict[str, Any],
        anchor: tuple[str, dict[str, Any]] | None,
        rng: random.Random,
    ) -> tuple[Bound | None, tuple[str, dict[str, Any]] | None]:
        """A value from a state record (the call's anchor record first)."""
        targets = self.resolver.targets(tool, p)
        if not targets:
            return None, anchor
        keys = self.resolver.keys
        if anchor is not None:
            coll, record = anchor
            for t_coll, f in targets:
                if t_coll == coll and record.get(f) is not None and p.accepts(record[f]):
                    key = str(record[keys[coll]])
                    return Bound(
                        p.name, record[f], "state", path=f, collection=coll, key=key
                    ), anchor
        crud = crud_target(tool)
        if crud is not None and crud[1] == "create" and p.name == keys.get(crud[0]):
            return None, anchor  # a new record needs a new key: the schema gives one
        related_to = {v for v in args.values() if isinstance(v, str) and len(v) >= 3}
        options = []
        for coll, f in targets:
            rows = [
                r for r in sample_rows(state, coll, rng) if r.get(f) is not None and p.accepts(r[f])
            ]
            if rows:
                options.append((coll, f, rows))
        if not options:
            return None, anchor
        related = [
            (coll, f, [r for r in rows if related_to & set(map(_hashable, r.values()))])
            for coll, f, rows in options
        ]
        related = [o for o in related if o[2]]
        coll, f, rows = rng.choice(related or options)
        record = rng.choice(rows)
        key = str(record[keys[coll]])
        bound = Bound(p.name, record[f], "state", path=f, collection=coll, key=key)
        return bound, anchor or (coll, record)

    def from_schema(self, tool: Tool, p: Param, state: State, rng: random.Random) -> Bound | None:
        """A value made from the parameter's schema (a new key for a CRUD create)."""
        crud = crud_target(tool)
        keys = self.resolver.keys
        if crud is not None and crud[1] == "create" and p.name == keys.get(crud[0]):
            value = fresh_key(state, crud[0], rng)
            return None if value is None else Bound(p.name, value, "schema")
        value = schema_value(p, rng, state)
        return None if value is None else Bound(p.name, value, "schema")

    def _update_needs_a_change(
        self,
        tool: Tool,
        params: list[Param],
        args: dict[str, Any],
        bounds: list[Bound],
        state: State,
        rng: random.Random,
    ) -> None:
        crud = crud_target(tool)
        if crud is None or crud[1] != "update":
            return
        key = self.resolver.keys.get(crud[0])
        if any(b.param != key for b in bounds):
            return
        choices = [p for p in params if p.name not in args and p.name != key and p.enum is None]
        choices += [p for p in params if p.name not in args and p.enum]
        if not choices:
            return
        p = rng.choice(choices)
        found = self.from_schema(tool, p, state, rng)
        if found is not None:
            args[p.name] = found.value
            bounds.append(found)


def _hashable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else repr(value)


def _tell_apart(leaf: Leaf, leaves: list[Leaf]) -> tuple[tuple[str, Any] | None, int | None]:
    """A field of the chosen item's object whose value no other candidate item shares;
    else the item's position in its list."""
    others = [lf.holder for lf in leaves if lf.holder is not leaf.holder]
    fields = sorted(
        (f for f, v in leaf.holder.items() if isinstance(v, str) and 0 < len(v) <= 80),
        key=lambda f: (name_rank(f), f),
    )
    for f in fields:
        if f == leaf.name:
            continue
        value = leaf.holder[f]
        if all(o.get(f) != value for o in others):
            return (f, value), None
    return None, (leaf.index[-1] + 1 if leaf.index else None)
