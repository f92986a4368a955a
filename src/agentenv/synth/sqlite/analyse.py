"""The whole database: references, transitions, enums, cycles and the seed's references.

Once every table is read, `_analyse` resolves foreign keys to collections, turns
`<table>_<column>_transitions` tables into allowed changes of that column, infers enums
of status-like columns, orders tables so referenced ones come first, names the tools
(singular where it is unambiguous), and warns about foreign-key cycles and seed rows
that refer to nothing.
"""

from __future__ import annotations

import re
from typing import Any

from agentenv.synth.sqlite.model import _Column, _ForeignKey, _Table
from agentenv.synth.sqlite.naming import _singular
from agentenv.synth.sqlite.reader import _Reader
from agentenv.synth.sqlite.report import SqliteReport

_STATUS_NAME = re.compile(r"(^|_)(status|state|stage|phase)$")


def _analyse(reader: _Reader) -> None:
    tables = reader.tables
    report = reader.report
    by_sql = {t.sql.lower(): t for t in tables}
    _find_transitions(reader, by_sql)
    for table in tables:
        for fk in table.foreign_keys:
            _resolve_fk(report, table, fk, by_sql)
    referenced = {fk.parent for t in tables if t.kept for fk in t.foreign_keys if fk.parent}
    for table in tables:
        if not table.kept and table.name in referenced:
            table.kept = True
    if reader.infer_enums:
        for table in tables:
            if table.kept:
                _infer_enums(reader, table)
    kept = [t for t in tables if t.kept]
    for table in kept:
        table.foreign_keys = [
            fk for fk in table.foreign_keys if fk.parent and _by_name(kept, fk.parent)
        ]
        if table.rowid:
            report.warnings.append(
                f"table {table.sql} has no primary key: its records are keyed by their SQLite "
                f"rowid (field {table.key}); new records get the next rowid"
            )
    reader.tables = kept = _dependency_order(kept)
    _name_tools(kept)
    _check_cycles(report, kept)
    _check_seed_references(report, kept)


def _dependency_order(tables: list[_Table]) -> list[_Table]:
    """Referenced tables before the tables that refer to them; ties (and cycles) by name."""
    waiting = {
        t.name: {fk.parent for fk in t.foreign_keys if fk.parent and fk.parent != t.name}
        for t in tables
    }
    ordered: list[_Table] = []
    while waiting:
        ready = sorted(n for n, deps in waiting.items() if not deps & waiting.keys())
        pick = ready[0] if ready else min(waiting)  # a cycle: break it at the first name
        ordered.append(next(t for t in tables if t.name == pick))
        del waiting[pick]
    return ordered


def _by_name(tables: list[_Table], name: str) -> _Table | None:
    return next((t for t in tables if t.name == name), None)


def _resolve_fk(
    report: SqliteReport, table: _Table, fk: _ForeignKey, by_sql: dict[str, _Table]
) -> None:
    text = f"foreign key {table.sql}({', '.join(fk.fields)}) -> {fk.parent_sql}"
    parent = by_sql.get(fk.parent_sql.lower())
    if parent is None:
        report.warnings.append(
            f"{text}: no table {fk.parent_sql} (or it was left out); not enforced"
        )
        return
    if fk.to_sql is None:
        if parent.rowid:
            report.warnings.append(f"{text}: {fk.parent_sql} has no primary key; not enforced")
            return
        to = list(parent.key_fields)
    else:
        cols = [parent.by_sql(c) for c in fk.to_sql]
        if any(c is None for c in cols):
            report.warnings.append(f"{text}: a referenced column is missing; not enforced")
            return
        to = [c.name for c in cols if c is not None]
    if len(to) != len(fk.fields):
        report.warnings.append(f"{text}: the column counts differ; not enforced")
        return
    if fk.on_delete not in ("cascade", "set null", "restrict", "no action", "set default"):
        fk.on_delete = "no action"
    fk.parent, fk.to = parent.name, to


def _find_transitions(reader: _Reader, by_sql: dict[str, _Table]) -> None:
    """Tables named `<table>_<column>_transitions` (or `<column>_transitions`) whose `from`
    and `to` columns list the allowed changes of that column."""
    column_owners: dict[str, list[tuple[_Table, _Column]]] = {}
    for table in reader.tables:
        for col in table.columns:
            column_owners.setdefault(col.sql.lower(), []).append((table, col))
    for rules_table in reader.tables:
        low = rules_table.sql.lower()
        if not low.endswith("_transitions"):
            continue
        stem = low[: -len("_transitions")]
        target = None
        for table in reader.tables:
            if table is rules_table:
                continue
            for col in table.columns:
                names = {
                    f"{table.sql.lower()}_{col.sql.lower()}",
                    f"{table.name}_{col.name}",
                    f"{_singular(table.name)}_{col.name}",
                }
                if stem in names:
                    target = (table, col)
        if target is None and len(column_owners.get(stem, [])) == 1:
            target = column_owners[stem][0]
        if target is None:
            continue
        from_col = _role_column(rules_table, "from")
        to_col = _role_column(rules_table, "to")
        if from_col is None or to_col is None:
            reader.report.warnings.append(
                f"table {rules_table.sql} looks like a transitions table but has no single "
                "from/to column pair; it is an ordinary table"
            )
            continue
        _apply_transitions(reader, rules_table, target[0], target[1], from_col, to_col)


def _role_column(table: _Table, role: str) -> _Column | None:
    found = [
        c for c in table.columns if c.sql.lower() == role or c.sql.lower().startswith(role + "_")
    ]
    return found[0] if len(found) == 1 else None


def _apply_transitions(
    reader: _Reader,
    rules_table: _Table,
    table: _Table,
    col: _Column,
    from_col: _Column,
    to_col: _Column,
) -> None:
    where = f"{table.sql}.{col.sql}"
    pairs = [(r[from_col.name], r[to_col.name]) for r in rules_table.rows]
    if "enum" not in col.rules:
        values = {r[col.name] for r in table.rows if r[col.name] is not None}
        values |= {v for pair in pairs for v in pair if v is not None}
        col.rules["enum"] = sorted(values, key=lambda v: (str(type(v)), v))
        col.enum_source = "transitions"
    enum = col.rules["enum"]
    unknown = sorted({str(v) for pair in pairs for v in pair if v is not None and v not in enum})
    if unknown:
        reader.report.warnings.append(
            f"table {rules_table.sql}: values {', '.join(unknown)} are not allowed in {where}; "
            "those transitions are ignored"
        )
    allowed: dict[Any, list[Any]] = {}
    initial: list[Any] = []
    for old, new in pairs:
        if new is None or new not in enum or (old is not None and old not in enum):
            continue
        if old is None:
            initial.append(new)
        else:
            allowed.setdefault(old, []).append(new)
    col.transitions = {
        "allowed": {v: sorted(set(allowed[v]), key=enum.index) for v in enum if v in allowed},
        "initial": sorted(set(initial), key=enum.index) if initial else None,
    }
    rules_table.kept = False
    reader.report.notes.append(
        f"table {rules_table.sql} gives the allowed transitions of {where}; it is not a collection"
    )


def _infer_enums(reader: _Reader, table: _Table) -> None:
    fk_fields = {f for fk in table.foreign_keys for f in fk.fields}
    unique_fields = {f for u in table.unique for f in u}
    for col in table.columns:
        if (
            "enum" in col.rules
            or col.types != ["string"]
            or col.name in table.key_fields
            or col.name in fk_fields
            or col.name in unique_fields
            or not _STATUS_NAME.search(col.name)
        ):
            continue
        values = [r[col.name] for r in table.rows if r[col.name] is not None]
        distinct = sorted(set(values))
        if not distinct or len(distinct) > reader.enum_max or len(distinct) >= len(values):
            continue
        col.rules["enum"] = distinct
        col.enum_source = "inferred"
        reader.report.notes.append(
            f"{table.sql}.{col.sql} is treated as an enum of the {len(distinct)} values in "
            f"the data ({', '.join(distinct)}): its name says status and it has few values"
        )


def _name_tools(tables: list[_Table]) -> None:
    singulars = [_singular(t.name) for t in tables]
    plural_names = {t.name for t in tables}
    for table, singular in zip(tables, singulars, strict=True):
        clash = singulars.count(singular) > 1 or (
            singular in plural_names and singular != table.name
        )
        table.singular = table.name if clash else singular


def _check_cycles(report: SqliteReport, tables: list[_Table]) -> None:
    """Warn about foreign keys that form a cycle between tables (a self-reference is fine)."""
    edges = {
        t.name: sorted({fk.parent for fk in t.foreign_keys if fk.parent and fk.parent != t.name})
        for t in tables
    }
    order = {t.name: i for i, t in enumerate(tables)}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, []):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component, key=order.__getitem__))

    for t in tables:
        if t.name not in index:
            visit(t.name)
    for component in sorted(components, key=lambda c: order[c[0]]):
        members = set(component)
        links = [
            (t, fk)
            for t in tables
            if t.name in members
            for fk in t.foreign_keys
            if fk.parent in members and fk.parent != t.name
        ]
        strict = all(
            all(t.column(f) is not None and t.column(f).notnull for f in fk.fields)
            for t, fk in links
        )  # type: ignore[union-attr]
        cycle = " -> ".join([*component, component[0]])
        if strict:
            report.warnings.append(
                f"foreign keys form a cycle ({cycle}) and every one is NOT NULL: the seed "
                "loads as it is, but a new record needs an existing one on the other side "
                "(create in an empty cycle is impossible), and a record of the cycle cannot "
                "be deleted while the other side refers to it"
            )
        else:
            report.warnings.append(
                f"foreign keys form a cycle ({cycle}): the seed loads as it is; to add linked "
                "records, create one with the nullable reference empty, then update it"
            )


def _check_seed_references(report: SqliteReport, tables: list[_Table]) -> None:
    for table in tables:
        for fk in table.foreign_keys:
            parent = _by_name(tables, fk.parent or "")
            if parent is None:
                continue
            present = {tuple(r.get(f) for f in fk.to) for r in parent.rows}
            dangling = [
                r
                for r in table.rows
                if all(r.get(f) is not None for f in fk.fields)
                and tuple(r.get(f) for f in fk.fields) not in present
            ]
            if dangling:
                report.warnings.append(
                    f"seed: {len(dangling)} {table.name} record{'s' if len(dangling) > 1 else ''} "
                    f"refer to no {parent.name} record ({', '.join(fk.fields)}), e.g. "
                    f"{table.describe_key(dangling[0])}; kept as they are"
                )
