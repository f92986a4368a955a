"""Record-key binding: arguments drawn from the seeded state, so that calls find records.

`RecordKeys` is the state-driven half of argument generation (the other half,
`_schema_values`, draws from the schema). A parameter that names a record (`ticket_id`,
`customer_ids`, the key of a CRUD tool's collection) mostly draws an existing key, in the
spelling its schema accepts; a create's key or a `new_*` parameter may draw a key not
taken yet; other parameters may draw values a field of the same name takes in the seed.
`link` then makes the arguments agree with one record (a ticket's `customer_id` with the
ticket), so calls get past "not this customer's ticket" checks.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from agentenv.env import Environment, Tool
from agentenv.state import SEPARATOR
from agentenv.synth._schema_values import SchemaValues


@dataclass
class _Source:
    """Where a parameter may draw values from, besides its schema."""

    keys: list[Any] = field(default_factory=list)  # existing record keys
    fresh: str | None = None  # a collection a new key may be invented for (CRUD create)
    values: list[Any] = field(default_factory=list)  # values a field takes in the seed


def crud_target(tool: Tool) -> tuple[str, str] | None:
    """The (collection, op) of a CRUD tool, namespaced as the state stores it, else None."""
    at = tool.source.find("crud:")
    if at < 0:
        return None
    aliases = [a for a in tool.source[:at].split(":") if a]
    collection, _, op = tool.source[at + len("crud:") :].rpartition(".")
    return SEPARATOR.join([*aliases, collection]), op


def _singular_matches(stem: str, collection: str) -> bool:
    c = collection.lower()
    return (
        stem in (c, c[:-1] if c.endswith("s") else c)
        or (c.endswith("ies") and stem == c[:-3] + "y")
        or (c.endswith("es") and stem == c[:-2])
    )


class RecordKeys:
    """The keys, records and field values of one environment's seed, and what each
    parameter of a tool may draw from them."""

    def __init__(self, env: Environment, schemas: SchemaValues) -> None:
        self.schemas = schemas
        self.infos = env.seed.infos()
        data = env.seed.to_dict()
        self.keys: dict[str, list[Any]] = {}
        self.fields: dict[str, dict[str, list[Any]]] = {}
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        for name, rows in data.items():
            key = self.infos[name].key
            self.records[name] = {str(r[key]): r for r in rows if r.get(key) is not None}
            self.keys[name] = [r[key] for r in rows if r.get(key) is not None]
            pools: dict[str, dict[str, Any]] = {}
            for row in rows:
                for f, v in row.items():
                    if isinstance(v, str | int | float | bool) and len(pools.get(f, ())) < 50:
                        pools.setdefault(f, {})[json.dumps(v, sort_keys=True)] = v
            self.fields[name] = {f: list(vs.values()) for f, vs in pools.items()}

    def _scope(self, tool: Tool) -> dict[str, str]:
        """The collections a tool's names refer to: bare name -> stored name."""
        prefix = tool.name.rpartition(SEPARATOR)[0] if SEPARATOR in tool.name else ""
        scope = {}
        for name in self.infos:
            owner, _, bare = name.rpartition(SEPARATOR)
            if owner == prefix and not bare.startswith("_"):
                scope[bare] = name
        if not scope:
            scope = {n: n for n in self.infos if not n.startswith("_")}
        return scope

    def _collection_named(self, tool: Tool, name: str) -> str | None:
        n = name.lower()
        m = re.fullmatch(r"(.+)_(?:id|ids|key|keys)", n)
        base = m.group(1) if m else n
        stems = [base, base.rsplit("_", 1)[-1]]
        scope = self._scope(tool)
        for stem in stems:
            for bare, full in scope.items():
                if _singular_matches(stem, bare):
                    return full
        for stem in (n, n.rsplit("_", 1)[-1]):
            for full in scope.values():
                key = self.infos[full].key
                if key not in ("id", "_key") and stem == key.lower():
                    return full
        return None

    def source(self, tool: Tool, name: str) -> _Source:
        """What a parameter may draw from the seeded state."""
        crud = crud_target(tool)
        found = self._collection_named(tool, name)
        named = self.keys.get(found, []) if found is not None else []
        if crud is not None and crud[0] in self.infos:
            collection, op = crud
            if name == self.infos[collection].key:
                fresh = collection if op == "create" else None
                return _Source(keys=self.keys[collection], fresh=fresh)
            if name in self.fields.get(collection, {}):
                return _Source(keys=named, values=self.fields[collection][name])
        if found is not None:
            if name.lower().startswith("new_"):  # new_path: a key that is not taken yet
                return _Source(fresh=found)
            return _Source(keys=named)
        values: list[Any] = []
        for part in name.split("_or_"):  # name_or_email: either field's values
            for full in self._scope(tool).values():
                values += self.fields.get(full, {}).get(part, [])
        return _Source(values=values[:50])

    def link(
        self, tool: Tool, args: dict[str, Any], root: dict[str, Any], rng: random.Random
    ) -> dict[str, Any]:
        """Make arguments agree with one record: when `ticket_id` names an existing ticket,
        take `customer_id` (and any other argument the ticket has a field for) from it, so
        that calls get past "not this customer's ticket" checks."""
        props = root.get("properties", {})
        best: dict[str, Any] = {}
        for anchor in args:
            collection = self._collection_named(tool, anchor)
            if collection is None:
                continue
            record = self.records.get(collection, {}).get(str(args[anchor]))
            if record is None:
                continue
            agreeing = {
                p: record[p]
                for p, schema in props.items()
                if p != anchor and p in record and self.schemas.fits(record[p], schema, root)
            }
            if len(agreeing) > len(best) or (len(agreeing) == len(best) and rng.random() < 0.5):
                best = agreeing
        return {**args, **best}

    def value(
        self,
        schema: dict[str, Any],
        root: dict[str, Any],
        name: str,
        src: _Source,
        rng: random.Random,
    ) -> Any:
        """A value for one parameter: from the seed where it names a record, else the schema."""
        resolved = self.schemas.resolve(schema, root)
        if src.keys and rng.random() < 0.8:
            if any(b.get("type") == "array" for b in self.schemas.branches(resolved, root)):
                picked = [rng.choice(src.keys) for _ in range(rng.randint(1, 2))]
                if self.schemas.fits(picked, schema, root):
                    return picked
            for candidate in _spellings(rng.choice(src.keys)):
                if self.schemas.fits(candidate, schema, root):
                    return candidate
        if src.fresh and rng.random() < 0.7:
            fresh = self._fresh_key(src.fresh, rng)
            for candidate in _spellings(fresh):
                if self.schemas.fits(candidate, schema, root):
                    return candidate
        if src.values and rng.random() < 0.5:
            candidate = rng.choice(src.values)
            if self.schemas.fits(candidate, schema, root):
                return candidate
        return self.schemas.generate(schema, root, rng, name)

    def _fresh_key(self, collection: str, rng: random.Random) -> Any:
        """A key not in the collection, shaped like its keys (digits re-drawn)."""
        taken = {str(k) for k in self.keys.get(collection, [])}
        model = str(rng.choice(self.keys[collection])) if self.keys.get(collection) else "new"
        for _ in range(20):
            candidate = re.sub(r"\d", lambda _: str(rng.randint(0, 9)), model)
            if candidate == model or not any(c.isdigit() for c in model):
                candidate = f"{model}-{rng.randint(100, 999)}"
            if candidate not in taken:
                return candidate
        return f"{model}-new"


def _spellings(key: Any) -> list[Any]:
    """A record key as the parameter might type it: as stored, as text, as a number."""
    out = [key]
    if not isinstance(key, str):
        out.append(str(key))
    elif key.lstrip("-").isdigit():
        out.append(int(key))
    return out
