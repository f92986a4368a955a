"""The rules of an environment made from a SQLite database, applied when its tools write.

`agent-env synth env --from-sqlite` (see `agentenv.synth.sqlite`) writes a `tools.py`
whose `create_*`, `update_*` and `delete_*` tools are thin wrappers over one `SqliteRules`.
The table metadata is a literal in that file (`TABLES`), so the generated code stays short
and this module holds the behaviour once:

* **keys**: a table's primary key keys its collection. A single integer key is assigned on
  create when the caller gives none (the highest taken plus one, as SQLite does). A
  composite key is stored in a synthetic string field (`_key`, the parts joined with
  `|`, see `composite_key`); key fields never change on update.
* **foreign keys**: a create or update whose reference points at no record fails, naming
  the table and the key it looked for. A delete of a record others still refer to fails,
  naming each referencing table and how many records refer, unless the foreign key says
  `ON DELETE CASCADE` (they are deleted too) or `ON DELETE SET NULL` (their reference is
  cleared). `RESTRICT`, `NO ACTION` and `SET DEFAULT` all refuse. A reference that is
  null is not checked, as in SQL; a record may refer to itself.
* **unique columns** (UNIQUE constraints and unique indexes) refuse a second record with
  the same non-null values.
* **enum transitions**: an enum column with a transitions table may change only along a
  listed `from -> to` pair; when the table lists rows with a null `from`, new records may
  start only in those values. Enums without a transitions table accept any value.
* **time defaults**: a column whose SQL default is `CURRENT_TIMESTAMP`, `CURRENT_DATE` or
  `CURRENT_TIME` gets the virtual time of the call, in SQLite's text format.

Type, NOT NULL, enum and range rules live in each collection's JSON schema in env.yaml and
are checked by the state on every write; a failed write becomes a tool error here. Every
failure raises `ToolError`, so the gateway rolls the call back and the agent gets the
message, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentenv.env.tool import ToolContext, ToolError
from agentenv.state import StateError

KEY_SEPARATOR = "|"

_TIME_FORMATS = {"timestamp": "%Y-%m-%d %H:%M:%S", "date": "%Y-%m-%d", "time": "%H:%M:%S"}
_REFUSING = ("restrict", "no action", "set default")


def composite_key(values: Sequence[Any]) -> str:
    """The synthetic key of a composite primary key: the parts joined with `|`.

    A `|` or backslash inside a part is escaped with a backslash, so two different keys
    never join to the same string.
    """
    return KEY_SEPARATOR.join(
        _part(v).replace("\\", "\\\\").replace(KEY_SEPARATOR, "\\" + KEY_SEPARATOR) for v in values
    )


def _part(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class ForeignKey:
    """`fields` of one table refer to `to` of `table` (a collection)."""

    fields: tuple[str, ...]
    table: str
    to: tuple[str, ...]
    on_delete: str = "no action"


@dataclass(frozen=True)
class Transitions:
    """The allowed changes of one enum field, and the values a new record may start in."""

    allowed: dict[Any, tuple[Any, ...]]
    initial: tuple[Any, ...] | None = None


@dataclass(frozen=True)
class TableRules:
    """What the runtime knows of one table (one collection)."""

    name: str
    key: str
    key_fields: tuple[str, ...]
    fields: tuple[str, ...]
    auto_key: bool = False
    foreign_keys: tuple[ForeignKey, ...] = ()
    unique: tuple[tuple[str, ...], ...] = ()
    transitions: dict[str, Transitions] = field(default_factory=dict)
    now_defaults: dict[str, str] = field(default_factory=dict)

    @property
    def composite(self) -> bool:
        return self.key not in self.key_fields

    @classmethod
    def from_data(cls, name: str, data: Mapping[str, Any]) -> TableRules:
        """Build from the plain data of a generated `TABLES` entry."""
        key_fields = tuple(data.get("key_fields") or [data["key"]])
        return cls(
            name=name,
            key=data["key"],
            key_fields=key_fields,
            fields=tuple(data.get("fields") or key_fields),
            auto_key=bool(data.get("auto_key", False)),
            foreign_keys=tuple(
                ForeignKey(
                    fields=tuple(fk["fields"]),
                    table=fk["table"],
                    to=tuple(fk["to"]),
                    on_delete=str(fk.get("on_delete", "no action")).lower(),
                )
                for fk in data.get("foreign_keys", [])
            ),
            unique=tuple(tuple(u) for u in data.get("unique", [])),
            transitions={
                f: Transitions(
                    allowed={k: tuple(v) for k, v in t.get("allowed", {}).items()},
                    initial=tuple(t["initial"]) if t.get("initial") is not None else None,
                )
                for f, t in data.get("transitions", {}).items()
            },
            now_defaults=dict(data.get("now_defaults", {})),
        )

    def key_of(self, record: Mapping[str, Any]) -> Any:
        """The collection key of a record (or of a mapping of its key fields)."""
        if self.composite:
            return composite_key([record.get(f) for f in self.key_fields])
        return record.get(self.key)

    def describe(self, record: Mapping[str, Any]) -> str:
        """`books id=7`, `book_tags book_id=1, tag='poetry'`: a record, for messages."""
        parts = ", ".join(f"{f}={record.get(f)!r}" for f in self.key_fields)
        return f"{self.name} {parts}"


class SqliteRules:
    """Create, update, delete (and, for composite keys, get) with a database's rules.

    `tables` is the `TABLES` literal of a generated tools.py: collection name -> `key`,
    `key_fields`, `fields`, `auto_key`, `foreign_keys` (`fields`, `table`, `to`,
    `on_delete`), `unique`, `transitions` (field -> `allowed`, `initial`) and
    `now_defaults` (field -> `timestamp`, `date` or `time`).
    """

    def __init__(self, tables: Mapping[str, Mapping[str, Any]]) -> None:
        self.tables = {name: TableRules.from_data(name, data) for name, data in tables.items()}
        self.referrers: dict[str, list[tuple[TableRules, ForeignKey]]] = {
            name: [] for name in self.tables
        }
        for table in self.tables.values():
            for fk in table.foreign_keys:
                if fk.table in self.referrers:
                    self.referrers[fk.table].append((table, fk))

    # -- the four operations -----------------------------------------------------------

    def get(self, ctx: ToolContext, collection: str, key: Mapping[str, Any]) -> dict[str, Any]:
        """The record with these key values; a tool error if there is none."""
        table = self._table(collection)
        return self._require(ctx, table, key)

    def create(
        self, ctx: ToolContext, collection: str, values: Mapping[str, Any]
    ) -> dict[str, Any]:
        """Insert a record built from `values` (None means: not given) after every check."""
        table = self._table(collection)
        record: dict[str, Any] = {f: values.get(f) for f in table.fields}
        for name, kind in table.now_defaults.items():
            if record.get(name) is None:
                record[name] = _format_now(ctx.now, kind)
        if table.auto_key and record.get(table.key) is None:
            record[table.key] = self._next_key(ctx, table)
        missing = [f for f in table.key_fields if record.get(f) is None]
        if missing:
            raise ToolError(f"a new {table.name} record needs {', '.join(missing)}")
        if table.composite:
            record = {table.key: table.key_of(record), **record}
        else:
            record = {table.key: record.pop(table.key), **record}
        key = table.key_of(record)
        if ctx.state.has(collection, key):
            raise ToolError(f"{table.describe(record)} already exists")
        for name, rules in table.transitions.items():
            value = record.get(name)
            if value is not None and rules.initial is not None and value not in rules.initial:
                raise ToolError(
                    f"a new {table.name} record cannot start with {name}={value!r} "
                    f"(allowed: {_listing(rules.initial)})"
                )
        self._check_references(ctx, table, record, record)
        self._check_unique(ctx, table, record)
        try:
            return ctx.state.insert(collection, record)
        except StateError as exc:
            raise ToolError(str(exc)) from None

    def update(
        self,
        ctx: ToolContext,
        collection: str,
        key: Mapping[str, Any],
        changes: Mapping[str, Any],
        clear: Iterable[str] | None = None,
    ) -> dict[str, Any]:
        """Change fields of one record: `changes` (None means: leave it), `clear` (set null)."""
        table = self._table(collection)
        current = self._require(ctx, table, key)
        new = {k: v for k, v in changes.items() if v is not None and k in table.fields}
        for name in clear or ():
            if name not in table.fields:
                raise ToolError(f"{table.name} has no field {name!r}")
            if name in new:
                raise ToolError(f"{name!r} is both given a value and cleared")
            new[name] = None
        for name in table.key_fields:
            if name in new and new[name] != current.get(name):
                raise ToolError(
                    f"the key field {name!r} of {table.describe(current)} cannot change"
                )
        changed = {k: v for k, v in new.items() if current.get(k) != v}
        if not changed:
            return current
        for name, rules in table.transitions.items():
            if name in changed:
                self._check_transition(table, current, name, changed[name], rules)
        merged = {**current, **changed}
        self._check_references(ctx, table, merged, changed)
        self._check_unique(ctx, table, merged)
        self._check_still_referenced(ctx, table, current, changed)
        try:
            return ctx.state.update(collection, table.key_of(current), changed)
        except StateError as exc:
            raise ToolError(str(exc)) from None

    def delete(self, ctx: ToolContext, collection: str, key: Mapping[str, Any]) -> dict[str, Any]:
        """Delete a record, following ON DELETE CASCADE / SET NULL; refuse if still referenced.

        The whole plan is worked out before anything is written, so a refusal changes
        nothing even outside a transaction.
        """
        table = self._table(collection)
        record = self._require(ctx, table, key)
        doomed: dict[tuple[str, str], dict[str, Any]] = {}
        nulled: dict[tuple[str, str], tuple[TableRules, dict[str, Any], set[str]]] = {}
        blockers: dict[tuple[str, str], dict[str, Any]] = {}  # (referrer, fields) -> details
        queue = [(table, record)]
        doomed[(table.name, str(table.key_of(record)))] = record
        while queue:
            parent, row = queue.pop(0)
            for child, fk in self.referrers.get(parent.name, []):
                values = [row.get(f) for f in fk.to]
                if any(v is None for v in values):
                    continue
                for ref in ctx.state.find(child.name, **dict(zip(fk.fields, values, strict=True))):
                    ref_id = (child.name, str(child.key_of(ref)))
                    if ref_id in doomed:
                        continue
                    if fk.on_delete == "cascade":
                        doomed[ref_id] = ref
                        queue.append((child, ref))
                    elif fk.on_delete == "set null":
                        entry = nulled.setdefault(ref_id, (child, ref, set()))
                        entry[2].update(fk.fields)
                    else:
                        group = blockers.setdefault(
                            (child.name, ", ".join(fk.fields)), {"keys": set()}
                        )
                        group["keys"].add(ref_id)
        refusals = []
        for (child_name, fields), group in blockers.items():
            live = sorted(k for k in group["keys"] if k not in doomed)
            if live:
                word = "record" if len(live) == 1 else "records"
                refusals.append(f"{len(live)} {child_name} {word} ({fields})")
        if refusals:
            raise ToolError(
                f"cannot delete {table.describe(record)}: still referenced by "
                f"{_and(refusals)}; delete or change those first"
            )
        try:
            for ref_id, (child, ref, fields) in nulled.items():
                if ref_id not in doomed:
                    ctx.state.update(child.name, child.key_of(ref), dict.fromkeys(fields))
            for (name, _), row in reversed(list(doomed.items())):
                ctx.state.delete(name, self.tables[name].key_of(row))
        except StateError as exc:
            raise ToolError(str(exc)) from None
        result: dict[str, Any] = {"deleted": {table.name: [table.key_of(record)]}}
        for (name, _), row in list(doomed.items())[1:]:
            result["deleted"].setdefault(name, []).append(self.tables[name].key_of(row))
        cleared = [(c, r) for rid, (c, r, _) in nulled.items() if rid not in doomed]
        if cleared:
            result["cleared"] = {}
            for child, ref in cleared:
                result["cleared"].setdefault(child.name, []).append(child.key_of(ref))
        return result

    # -- checks --------------------------------------------------------------------------

    def _table(self, collection: str) -> TableRules:
        try:
            return self.tables[collection]
        except KeyError:
            raise ToolError(f"unknown table {collection!r}") from None

    def _require(
        self, ctx: ToolContext, table: TableRules, key: Mapping[str, Any]
    ) -> dict[str, Any]:
        record = ctx.state.get(table.name, table.key_of(key))
        if record is None:
            raise ToolError(f"no {table.describe(key)}")
        return record

    def _next_key(self, ctx: ToolContext, table: TableRules) -> int:
        taken = [
            r[table.key]
            for r in ctx.state.list(table.name)
            if isinstance(r.get(table.key), int) and not isinstance(r.get(table.key), bool)
        ]
        return max(taken, default=0) + 1

    def _check_references(
        self,
        ctx: ToolContext,
        table: TableRules,
        record: Mapping[str, Any],
        changed: Mapping[str, Any],
    ) -> None:
        for fk in table.foreign_keys:
            if not any(f in changed for f in fk.fields):
                continue
            values = [record.get(f) for f in fk.fields]
            if any(v is None for v in values):
                continue  # a null reference points nowhere, and SQL does not check it
            wanted = dict(zip(fk.to, values, strict=True))
            if fk.table == table.name and all(record.get(t) == v for t, v in wanted.items()):
                continue  # the record refers to itself
            parent = self.tables.get(fk.table)
            if parent is not None and set(fk.to) == set(parent.key_fields):
                found = ctx.state.has(fk.table, parent.key_of(wanted))
            else:
                found = bool(ctx.state.find(fk.table, **wanted))
            if not found:
                where = ", ".join(f"{k}={v!r}" for k, v in wanted.items())
                refs = ", ".join(f"{table.name}.{f}" for f in fk.fields)
                raise ToolError(f"no {fk.table} record with {where} ({refs} refers to it)")

    def _check_unique(self, ctx: ToolContext, table: TableRules, record: Mapping[str, Any]) -> None:
        own = str(table.key_of(record))
        for fields in table.unique:
            values = {f: record.get(f) for f in fields}
            if any(v is None for v in values.values()):
                continue
            for other in ctx.state.find(table.name, **values):
                if str(table.key_of(other)) != own:
                    shown = ", ".join(f"{f}={v!r}" for f, v in values.items())
                    raise ToolError(
                        f"{table.name} {shown} is taken by {table.describe(other)} "
                        "(the column is unique)"
                    )

    def _check_transition(
        self,
        table: TableRules,
        current: Mapping[str, Any],
        name: str,
        new: Any,
        rules: Transitions,
    ) -> None:
        old = current.get(name)
        if new is None:
            return
        if old is None:
            if rules.initial is not None and new not in rules.initial:
                raise ToolError(
                    f"{table.describe(current)}: {name} cannot be set to {new!r} "
                    f"(allowed start values: {_listing(rules.initial)})"
                )
            return
        allowed = rules.allowed.get(old, ())
        if new not in allowed:
            raise ToolError(
                f"{table.describe(current)}: {name} cannot change from {old!r} to {new!r} "
                f"(allowed from {old!r}: {_listing(allowed)})"
            )

    def _check_still_referenced(
        self,
        ctx: ToolContext,
        table: TableRules,
        current: Mapping[str, Any],
        changed: Mapping[str, Any],
    ) -> None:
        """A referenced non-key column (a unique one) may not change under its referrers."""
        for child, fk in self.referrers.get(table.name, []):
            if not any(t in changed for t in fk.to):
                continue
            values = [current.get(t) for t in fk.to]
            if any(v is None for v in values):
                continue
            refs = ctx.state.find(child.name, **dict(zip(fk.fields, values, strict=True)))
            refs = [
                r for r in refs if not (child is table and table.key_of(r) == table.key_of(current))
            ]
            if refs:
                raise ToolError(
                    f"cannot change {', '.join(fk.to)} of {table.describe(current)}: "
                    f"{len(refs)} {child.name} record{'s' if len(refs) != 1 else ''} "
                    f"({', '.join(fk.fields)}) still refer to it"
                )


def _format_now(now: datetime, kind: str) -> str:
    moment = now.astimezone(UTC) if now.tzinfo is not None else now
    return moment.strftime(_TIME_FORMATS.get(kind, _TIME_FORMATS["timestamp"]))


def _listing(values: Iterable[Any]) -> str:
    shown = [repr(v) for v in values]
    return ", ".join(shown) if shown else "none"


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


__all__ = [
    "KEY_SEPARATOR",
    "ForeignKey",
    "SqliteRules",
    "TableRules",
    "Transitions",
    "composite_key",
]
