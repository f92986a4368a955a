"""Reading the database: `_Reader` opens a SQLite file read-only and builds its `_Table`s.

Per table: the columns (generated and hidden ones left out), the key (primary key,
composite key, or rowid), the rows, the column types checked against the values, CHECK
constraints, defaults, foreign keys and unique indexes. What it cannot keep becomes a
warning in the report; what stops it becomes an error and `_Stop`.
"""

from __future__ import annotations

import re
import sqlite3
from datetime import date, datetime
from pathlib import Path
from typing import Any

from agentenv.synth.sqlite.model import (
    _FAMILY_TYPES,
    _Column,
    _fits,
    _ForeignKey,
    _kind_order,
    _merge_types,
    _Table,
    _value_kind,
    sql_type_family,
)
from agentenv.synth.sqlite.naming import _field_name, _qi, _snake, _unique
from agentenv.synth.sqlite.report import SqliteReport, _Stop
from agentenv.synth.sqlite.sqltext import check_constraints, parse_check, parse_default


class _Reader:
    def __init__(self, report: SqliteReport, *, enum_max: int, infer_enums: bool, max_rows: int):
        self.report = report
        self.enum_max = enum_max
        self.infer_enums = infer_enums
        self.max_rows = max_rows
        self.tables: list[_Table] = []
        self.date_values: list[date] = []

    def error(self, message: str) -> _Stop:
        self.report.errors.append(message)
        return _Stop()

    def read(self, path: Path) -> list[_Table]:
        if not path.exists():
            raise self.error(f"{path}: no such file")
        if path.is_dir():
            raise self.error(f"{path} is a folder, not a SQLite database file")
        try:
            conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
        except sqlite3.Error as exc:
            raise self.error(f"{path}: cannot open it as a SQLite database ({exc})") from None
        conn.text_factory = lambda b: b.decode("utf-8", "replace")
        try:
            try:
                master = conn.execute(
                    "SELECT type, name, sql FROM sqlite_master "
                    "WHERE type IN ('table', 'view') ORDER BY name"
                ).fetchall()
            except sqlite3.DatabaseError as exc:
                if "not a database" in str(exc) or "encrypted" in str(exc):
                    raise self.error(f"{path} is not a SQLite database ({exc})") from None
                raise self.error(f"cannot read the schema of {path}: {exc}") from None
            self._read_tables(conn, master)
        finally:
            conn.close()
        if not self.tables:
            raise self.error(f"{path} has no tables to make collections of")
        return self.tables

    def _read_tables(self, conn: sqlite3.Connection, master: list[tuple[str, str, str]]) -> None:
        shadow = self._shadow_tables(conn, master)
        taken: set[str] = set()
        views = [name for kind, name, _ in master if kind == "view"]
        if views:
            self.report.notes.append(
                f"left out {len(views)} view{'s' if len(views) > 1 else ''} "
                f"({', '.join(views)}): views hold no records of their own"
            )
        for kind, name, sql in master:
            if kind != "table" or name.lower().startswith("sqlite_"):
                continue
            if (sql or "").lstrip().upper().startswith("CREATE VIRTUAL"):
                self.report.warnings.append(
                    f"table {name}: virtual tables (full-text search and the like) are left out"
                )
                continue
            if name.lower() in shadow:
                continue
            try:
                self.tables.append(self._read_table(conn, name, sql or "", taken))
            except sqlite3.Error as exc:
                raise self.error(f"table {name}: cannot read it ({exc})") from None

    def _shadow_tables(
        self, conn: sqlite3.Connection, master: list[tuple[str, str, str]]
    ) -> set[str]:
        try:
            rows = conn.execute("PRAGMA table_list").fetchall()
            return {r[1].lower() for r in rows if r[2] == "shadow"}
        except sqlite3.Error:  # older SQLite: the shadow tables of FTS are named after it
            virtual = [
                n.lower()
                for k, n, s in master
                if k == "table" and (s or "").lstrip().upper().startswith("CREATE VIRTUAL")
            ]
            return {
                n.lower()
                for _, n, _ in master
                if any(n.lower().startswith(v + "_") for v in virtual)
            }

    def _read_table(
        self, conn: sqlite3.Connection, sql_name: str, create_sql: str, taken: set[str]
    ) -> _Table:
        where = f"table {sql_name}"
        name = _unique(_snake(sql_name, "table"), taken)
        if name != sql_name.lower():
            self.report.notes.append(f"{where} is the collection {name}")
        try:
            info = conn.execute(f"PRAGMA table_xinfo({_qi(sql_name)})").fetchall()
        except sqlite3.Error:
            info = [(*row, 0) for row in conn.execute(f"PRAGMA table_info({_qi(sql_name)})")]
        columns: list[_Column] = []
        fields_taken: set[str] = set()
        for cid, col_name, declared, notnull, default, pk, hidden in info:
            del cid
            if hidden in (2, 3):
                self.report.warnings.append(
                    f"{sql_name}.{col_name} is a generated column: left out (the environment "
                    "does not evaluate SQL expressions)"
                )
                continue
            if hidden:
                continue
            field_name = _unique(_field_name(col_name), fields_taken)
            if field_name != col_name.lower():
                self.report.notes.append(f"column {sql_name}.{col_name} is the field {field_name}")
            columns.append(
                _Column(
                    sql=col_name,
                    name=field_name,
                    declared=declared or "",
                    notnull=bool(notnull),
                    pk=int(pk),
                    default_sql=default,
                )
            )
        if not columns:
            raise self.error(f"{where} has no columns the environment can hold")
        pk_cols = sorted((c for c in columns if c.pk), key=lambda c: c.pk)
        rowid = None
        if pk_cols:
            key_fields = [c.name for c in pk_cols]
            key = key_fields[0] if len(key_fields) == 1 else _unique("_key", set(fields_taken))
        else:
            if re.search(r"\)\s*(,\s*STRICT\s*)?WITHOUT\s+ROWID", create_sql, re.I):
                raise self.error(f"{where} is WITHOUT ROWID and has no primary key")
            lowered = {c.sql.lower() for c in columns}
            rowid = next((a for a in ("rowid", "_rowid_", "oid") if a not in lowered), None)
            if rowid is None:
                raise self.error(
                    f"{where} has no primary key, and columns named rowid, _rowid_ and oid hide "
                    "its rowid: add a primary key"
                )
            key = _unique("rowid", fields_taken)
            key_fields = [key]
        table = _Table(
            sql=sql_name,
            name=name,
            create_sql=create_sql,
            columns=columns,
            key=key,
            key_fields=key_fields,
            rowid=rowid,
        )
        self._read_rows(conn, table)
        self._type_columns(table)
        self._read_checks(table)
        self._read_defaults(table)
        self._read_foreign_keys(conn, table)
        self._read_unique(conn, table)
        return table

    def _read_rows(self, conn: sqlite3.Connection, table: _Table) -> None:
        count = conn.execute(f"SELECT count(*) FROM {_qi(table.sql)}").fetchone()[0]
        if count > self.max_rows:
            raise self.error(
                f"table {table.sql} has {count} rows, more than the limit of {self.max_rows}; "
                "raise max_rows (--max-rows) or make a smaller copy of the database"
            )
        cols = [_qi(c.sql) for c in table.columns]
        names = [c.name for c in table.columns]
        if table.rowid:
            cols.insert(0, table.rowid)
            names.insert(0, table.key)
            order = table.rowid
        else:
            order = ", ".join(_qi(c.sql) for c in sorted(table.columns, key=lambda c: c.pk) if c.pk)
        query = f"SELECT {', '.join(cols)} FROM {_qi(table.sql)} ORDER BY {order}"
        table.rows = [dict(zip(names, row, strict=True)) for row in conn.execute(query)]

    def _type_columns(self, table: _Table) -> None:
        kept = []
        for col in table.columns:
            where = f"{table.sql}.{col.sql}"
            col.family = sql_type_family(col.declared)
            values = [r[col.name] for r in table.rows if r[col.name] is not None]
            if col.family == "boolean":
                for row in table.rows:
                    if row[col.name] in (0, 1) and not isinstance(row[col.name], bool):
                        row[col.name] = bool(row[col.name])
                values = [r[col.name] for r in table.rows if r[col.name] is not None]
            kinds = sorted({_value_kind(v) for v in values}, key=_kind_order)
            unrepresentable = [k for k in kinds if k in ("blob", "bad")]
            if col.family == "blob" or unrepresentable:
                what = (
                    f"type {col.declared}"
                    if col.family == "blob"
                    else "binary data or infinities in its values"
                )
                if col.name in table.key_fields:
                    raise self.error(
                        f"{where} is part of the primary key but has {what}, which JSON cannot hold"
                    )
                self.report.warnings.append(
                    f"{where}: left out, it has {what} (JSON cannot hold it)"
                )
                continue
            if col.family in _FAMILY_TYPES:
                col.types = list(_FAMILY_TYPES[col.family])
                odd = [k for k in kinds if not _fits(k, col.types)]
                if odd:
                    col.types = _merge_types(col.types, odd)
                    example = next(
                        r
                        for r in table.rows
                        if r[col.name] is not None
                        and not _fits(_value_kind(r[col.name]), _FAMILY_TYPES[col.family])
                    )
                    self.report.warnings.append(
                        f"{where} is declared {col.declared} but holds {'/'.join(odd)} values "
                        f"(e.g. {table.describe_key(example)}: {example[col.name]!r}); its "
                        f"schema accepts {' or '.join(col.types)}"
                    )
            else:
                col.types = _merge_types([], kinds)
                if col.family == "unknown":
                    typed = " or ".join(col.types) if col.types else "any JSON value (no values)"
                    self.report.warnings.append(
                        f"{where}: unsupported column type {col.declared!r}; typed from its "
                        f"values as {typed}"
                    )
            if col.family == "string" and col.types == ["string"]:
                self._collect_dates(col, values)
            kept.append(col)
        table.columns = kept
        if not kept:
            raise self.error(f"table {table.sql} has no columns the environment can hold")

    def _collect_dates(self, col: _Column, values: list[Any]) -> None:
        declared = col.declared.upper()
        if not ("DATE" in declared or "TIMESTAMP" in declared):
            return
        for value in values:
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                continue
            self.date_values.append(moment.date())

    def _read_checks(self, table: _Table) -> None:
        for text, body in check_constraints(table.create_sql):
            rules = parse_check(body)
            cols = [table.by_sql(c) for c, _ in rules or []]
            if rules is None or any(c is None for c in cols):
                self.report.warnings.append(
                    f"table {table.sql}: {text} is not enforced by the environment (it keeps "
                    "IN lists, comparisons with numbers, BETWEEN and length limits)"
                )
                continue
            for col, (_, rule) in zip(cols, rules, strict=True):
                assert col is not None
                if "enum" in rule and col.types == ["boolean"]:  # CHECK (flag IN (0, 1))
                    rule = {"enum": [bool(v) if v in (0, 1) else v for v in rule["enum"]]}
                col.rules.update(rule)
                if "enum" in rule:
                    col.enum_source = "check"
                    seen = [
                        r[col.name]
                        for r in table.rows
                        if r[col.name] is not None and r[col.name] not in rule["enum"]
                    ]
                    if seen:
                        col.rules["enum"] = list(dict.fromkeys([*rule["enum"], *seen]))

    def _read_defaults(self, table: _Table) -> None:
        for col in table.columns:
            if col.default_sql is None:
                continue
            kind, value = parse_default(col.default_sql)
            if kind == "now":
                col.now_default = value
            elif kind == "value" and value is not None:
                if col.types == ["boolean"] and value in (0, 1):
                    value = bool(value)
                if _fits(_value_kind(value), col.types or [_value_kind(value)]) and (
                    "enum" not in col.rules or value in col.rules["enum"]
                ):
                    col.default, col.has_default = value, True
                else:
                    self.report.warnings.append(
                        f"{table.sql}.{col.sql}: default {col.default_sql} does not fit the "
                        "column; the environment has no default for it"
                    )
            elif kind == "expr":
                self.report.warnings.append(
                    f"{table.sql}.{col.sql}: default {col.default_sql} is an expression the "
                    "environment does not evaluate; the column has no default"
                )

    def _read_foreign_keys(self, conn: sqlite3.Connection, table: _Table) -> None:
        groups: dict[int, list[tuple[Any, ...]]] = {}
        for row in conn.execute(f"PRAGMA foreign_key_list({_qi(table.sql)})"):
            groups.setdefault(row[0], []).append(row)
        position = {c.sql.lower(): i for i, c in enumerate(table.columns)}
        ordered = sorted(
            groups.values(), key=lambda rows: min(position.get(r[3].lower(), 1 << 30) for r in rows)
        )
        for rows in ordered:
            rows.sort(key=lambda r: r[1])
            cols = [table.by_sql(r[3]) for r in rows]
            text = f"{table.sql}({', '.join(r[3] for r in rows)}) -> {rows[0][2]}"
            if any(c is None for c in cols):
                self.report.warnings.append(
                    f"foreign key {text}: a column was left out; not enforced"
                )
                continue
            to = [r[4] for r in rows]
            table.foreign_keys.append(
                _ForeignKey(
                    fields=[c.name for c in cols if c is not None],
                    parent_sql=rows[0][2],
                    to_sql=None if any(t is None for t in to) else to,
                    on_delete=str(rows[0][6] or "NO ACTION").lower(),
                )
            )

    def _read_unique(self, conn: sqlite3.Connection, table: _Table) -> None:
        for row in conn.execute(f"PRAGMA index_list({_qi(table.sql)})"):
            name, unique, origin = row[1], row[2], row[3]
            partial = row[4] if len(row) > 4 else 0
            if not unique or origin == "pk":
                continue
            if partial:
                self.report.warnings.append(
                    f"table {table.sql}: partial unique index {name} is not enforced"
                )
                continue
            cids = [r[1] for r in conn.execute(f"PRAGMA index_info({_qi(name)})")]
            names = [r[2] for r in conn.execute(f"PRAGMA index_info({_qi(name)})")]
            cols = [table.by_sql(n) if n is not None else None for n in names]
            if any(c < 0 for c in cids) or any(c is None for c in cols):
                self.report.warnings.append(
                    f"table {table.sql}: unique index {name} is on an expression or a left-out "
                    "column; not enforced"
                )
                continue
            fields = [c.name for c in cols if c is not None]
            if fields != table.key_fields and fields not in table.unique:
                table.unique.append(fields)
