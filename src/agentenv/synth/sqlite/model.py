"""The model of a database: column types, and the columns, foreign keys and tables read.

`sql_type_family` maps a declared SQL type to a family by SQLite's affinity rules made
stricter; the helpers after it type values as JSON and merge the types a column holds.
`_Column`, `_ForeignKey` and `_Table` are what the reader fills in, the analysis adjusts
and the renderers write out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


def sql_type_family(declared: str) -> str:
    """The family of a declared column type, by SQLite's affinity rules made stricter.

    One of integer, real, number, string, boolean, blob, any (no declared type) and
    unknown (a type name we do not recognise; typed from its values).
    """
    base = re.sub(r"\(.*", "", declared.upper()).strip()
    if not base:
        return "any"
    if "BOOL" in base:
        return "boolean"
    if "INT" in base:
        return "integer"
    if any(w in base for w in ("CHAR", "CLOB", "TEXT", "STRING", "UUID", "JSON")):
        return "string"
    if "DATE" in base or "TIME" in base:
        return "string"
    if any(w in base for w in ("REAL", "FLOA", "DOUB")):
        return "real"
    if any(w in base for w in ("NUMERIC", "DECIMAL", "NUMBER", "MONEY")):
        return "number"
    if "BLOB" in base or base in ("BINARY", "VARBINARY", "BYTEA", "IMAGE", "BYTES"):
        return "blob"
    return "unknown"


_FAMILY_TYPES = {
    "integer": ["integer"],
    "real": ["number"],
    "number": ["number"],
    "string": ["string"],
    "boolean": ["boolean"],
}
_JSON_ORDER = ["boolean", "integer", "number", "string"]


def _value_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number" if value == value and abs(value) != float("inf") else "bad"
    if isinstance(value, str):
        return "string"
    return "blob"


def _fits(kind: str, types: list[str]) -> bool:
    return kind in types or (kind == "integer" and "number" in types)


def _kind_order(kind: str) -> int:
    return _JSON_ORDER.index(kind) if kind in _JSON_ORDER else len(_JSON_ORDER)


def _merge_types(types: list[str], more: list[str]) -> list[str]:
    merged = set(types) | set(more)
    if "number" in merged:
        merged.discard("integer")
    return sorted(merged, key=_kind_order)


@dataclass
class _Column:
    sql: str
    name: str
    declared: str
    notnull: bool
    pk: int
    default_sql: str | None
    family: str = "any"
    types: list[str] = field(default_factory=list)  # JSON types, no "null"
    rules: dict[str, Any] = field(default_factory=dict)  # enum, minimum, ...
    enum_source: str | None = None
    default: Any = None
    has_default: bool = False
    now_default: str | None = None
    transitions: dict[str, Any] | None = None


@dataclass
class _ForeignKey:
    fields: list[str]
    parent_sql: str
    to_sql: list[str] | None
    on_delete: str
    parent: str | None = None  # collection, once resolved
    to: list[str] = field(default_factory=list)


@dataclass
class _Table:
    sql: str
    name: str
    create_sql: str
    columns: list[_Column]
    key: str
    key_fields: list[str]
    rowid: str | None = None  # the rowid alias that keys a table without a primary key
    rows: list[dict[str, Any]] = field(default_factory=list)
    foreign_keys: list[_ForeignKey] = field(default_factory=list)
    unique: list[list[str]] = field(default_factory=list)
    singular: str = ""
    kept: bool = True

    @property
    def composite(self) -> bool:
        return len(self.key_fields) > 1

    @property
    def auto_key(self) -> bool:
        if self.rowid:
            return True
        if self.composite:
            return False
        col = self.column(self.key)
        return col is not None and col.types == ["integer"]

    def column(self, name: str) -> _Column | None:
        return next((c for c in self.columns if c.name == name), None)

    def by_sql(self, sql_name: str) -> _Column | None:
        low = sql_name.lower()
        return next((c for c in self.columns if c.sql.lower() == low), None)

    def nullable(self, col: _Column) -> bool:
        return not col.notnull and col.name not in self.key_fields

    def describe_key(self, row: dict[str, Any]) -> str:
        return f"{self.name} " + ", ".join(f"{f}={row.get(f)!r}" for f in self.key_fields)
