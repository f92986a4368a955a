"""Rendering `tools.py`: typed create, update and delete tools over one `SqliteRules`.

`_ToolsWriter` writes one wrapper per tool whose parameters come from the columns, the
table metadata as the `TABLES` literal, and `Literal` aliases for enums, all formatted as
ruff would format them so that the file is stable. The behaviour lives in
`agentenv.synth.sqlite.runtime`.
"""

from __future__ import annotations

import json
import keyword
import textwrap
from dataclasses import dataclass
from typing import Any

from agentenv.synth.sqlite.model import _Column, _ForeignKey, _Table
from agentenv.synth.sqlite.naming import _camel
from agentenv.synth.sqlite.render_env import _tool_names, _update_fields
from agentenv.synth.sqlite.sqltext import _split_commas, _tokens

_WIDTH = 100


def _py_str(value: str) -> str:
    if '"' in value and "'" not in value:
        return "'" + json.dumps(value, ensure_ascii=False)[1:-1].replace('\\"', '"') + "'"
    return json.dumps(value, ensure_ascii=False)


def _py_one(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_py_one(k)}: {_py_one(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_py_one(v) for v in value) + "]"
    if isinstance(value, str):
        return _py_str(value)
    return repr(value)


def _py(value: Any, indent: int, lead: int, trail: int = 0) -> str:
    """A Python literal the way ruff formats it: on one line if it fits, else exploded."""
    one = _py_one(value)
    if lead + len(one) + trail <= _WIDTH or not isinstance(value, dict | list | tuple) or not value:
        return one
    pad = " " * (indent + 4)
    lines = []
    if isinstance(value, dict):
        for k, v in value.items():
            head = f"{_py_one(k)}: "
            lines.append(pad + head + _py(v, indent + 4, indent + 4 + len(head), 1) + ",")
        return "{\n" + "\n".join(lines) + "\n" + " " * indent + "}"
    for v in value:
        lines.append(pad + _py(v, indent + 4, indent + 4, 1) + ",")
    return "[\n" + "\n".join(lines) + "\n" + " " * indent + "]"


def _tables_literal(tables: list[_Table]) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for t in tables:
        entry: dict[str, Any] = {"key": t.key}
        if t.composite:
            entry["key_fields"] = list(t.key_fields)
        entry["fields"] = [*([t.key] if t.rowid else []), *(c.name for c in t.columns)]
        if t.auto_key:
            entry["auto_key"] = True
        if t.foreign_keys:
            entry["foreign_keys"] = [
                {"fields": fk.fields, "table": fk.parent, "to": fk.to, "on_delete": fk.on_delete}
                for fk in t.foreign_keys
            ]
        if t.unique:
            entry["unique"] = t.unique
        transitions = {c.name: c.transitions for c in t.columns if c.transitions}
        if transitions:
            entry["transitions"] = transitions
        now = {c.name: c.now_default for c in t.columns if c.now_default}
        if now:
            entry["now_defaults"] = now
        data[t.name] = entry
    return data


@dataclass
class _Param:
    name: str
    annotation: str
    default: str | None  # Python source, None for required
    doc: str


class _ToolsWriter:
    def __init__(self, tables: list[_Table], db_name: str, env_name: str) -> None:
        self.tables = tables
        self.db_name = db_name
        self.env_name = env_name
        self.aliases: dict[str, str] = {}  # alias name -> Literal source
        self.uses_any = False

    def alias(self, base: str, values: list[Any]) -> str:
        source = "Literal[" + ", ".join(_py_one(v) for v in values) + "]"
        if self.aliases.get(base) == source:
            return base
        name = _unique_alias(base, self.aliases)
        self.aliases[name] = source
        return name

    def annotation(self, table: _Table, col: _Column) -> str:
        if "enum" in col.rules:
            base = self.alias(_camel(table.singular) + _camel(col.name), col.rules["enum"])
        else:
            parts = []
            for t in col.types:
                if t == "number":
                    parts.append("float" if col.family == "real" else "int | float")
                else:
                    parts.append({"integer": "int", "string": "str", "boolean": "bool"}[t])
            if not parts:
                self.uses_any = True
                return "Any"
            base = " | ".join(dict.fromkeys(" | ".join(parts).split(" | ")))
        return base

    def column_doc(self, table: _Table, col: _Column, fk_of: dict[str, _ForeignKey]) -> str:
        bits = [f"{col.declared or 'Untyped'}{', not null' if col.notnull else ''}."]
        if col.sql != col.name:
            bits.insert(0, f"Column {col.sql!r}:")
        fk = fk_of.get(col.name)
        if fk is not None:
            bits.append(f"Refers to {fk.parent}.{fk.to[fk.fields.index(col.name)]}.")
        if "enum" in col.rules:
            bits.append("One of: " + ", ".join(str(v) for v in col.rules["enum"]) + ".")
        for k, label in (
            ("minimum", "At least"),
            ("exclusiveMinimum", "More than"),
            ("maximum", "At most"),
            ("exclusiveMaximum", "Less than"),
            ("minLength", "Characters at least"),
            ("maxLength", "Characters at most"),
        ):
            if k in col.rules:
                bits.append(f"{label} {col.rules[k]}.")
        if [col.name] in table.unique:
            bits.append("Unique.")
        return " ".join(bits)

    def render(self) -> str:
        body: list[str] = []
        for table in self.tables:
            body += self.table_tools(table)
        header = [
            f'"""Tools of the {self.env_name} environment: create, update and delete, with the rules',
            f"of the SQLite database {self.db_name}.",
            "",
            "Generated by `agent-env synth env --from-sqlite`; regenerate rather than edit. The rules",
            "(keys, foreign keys, unique columns, enum transitions) are the data in TABLES; the code",
            "that applies them is agentenv.synth.sqlite.runtime. The get, list and search tools are",
            "document (CRUD) tools in env.yaml.",
            '"""',
            "",
            "from __future__ import annotations",
            "",
            "from typing import Any" + (", Literal" if self.aliases else ""),
            "",
            "from agentenv import ToolContext, tool",
            "from agentenv.synth.sqlite.runtime import SqliteRules",
            "",
        ]
        for name, source in self.aliases.items():
            header += _alias_lines(name, source)
        if self.aliases:
            header.append("")
        literal = _tables_literal(self.tables)
        lead = "TABLES: dict[str, Any] = "
        header += [lead + _py(literal, 0, len(lead)), "", "RULES = SqliteRules(TABLES)", ""]
        return "\n".join(header + body).rstrip("\n") + "\n"

    def table_tools(self, table: _Table) -> list[str]:
        fk_of = {f: fk for fk in table.foreign_keys for f in fk.fields}
        names = _tool_names(table)
        out = ["", f"# -- {table.name} " + "-" * max(0, 90 - len(table.name)), ""]
        keys = [table.column(f) or _rowid_column(table) for f in table.key_fields]
        key_params = [
            _Param(c.name, self.annotation(table, c), None, self.column_doc(table, c, fk_of))
            for c in keys
        ]
        key_map = "{" + ", ".join(f"{_py_str(p.name)}: {p.name}" for p in key_params) + "}"
        coll = _py_str(table.name)
        if table.composite:
            out += self.function(
                names["get"],
                "read",
                key_params,
                f"Get one {table.name} record by its key ({', '.join(table.key_fields)}).",
                "",
                [f"return RULES.get(ctx, {coll}, {key_map})"],
            )
        # create
        required, optional = [], []
        for col in table.columns:
            doc = self.column_doc(table, col, fk_of)
            ann = self.annotation(table, col)
            nullable = table.nullable(col)
            if col.now_default:
                optional.append(
                    _Param(col.name, f"{ann} | None", "None", doc + " Default: the current time.")
                )
            elif col.has_default:
                full = f"{ann} | None" if nullable else ann
                optional.append(
                    _Param(
                        col.name,
                        full,
                        _py_one(col.default),
                        doc + f" Default: {json.dumps(col.default, ensure_ascii=False)}.",
                    )
                )
            elif table.auto_key and col.name == table.key:
                optional.append(
                    _Param(
                        col.name, f"{ann} | None", "None", doc + " Default: the next free number."
                    )
                )
            elif col.notnull or col.name in table.key_fields:
                required.append(_Param(col.name, ann, None, doc))
            else:
                optional.append(_Param(col.name, f"{ann} | None", "None", doc))
        if table.rowid:
            optional.insert(
                0,
                _Param(
                    table.key, "int | None", "None", "The rowid. Default: the next free number."
                ),
            )
        params = required + optional
        values = "{" + ", ".join(f"{_py_str(p.name)}: {p.name}" for p in params) + "}"
        out += self.function(
            names["create"],
            "write",
            params,
            f"Create one {table.name} record (a row of table {table.sql}).",
            self.rules_text(table, create=True),
            [*_assign("record", values), f"return RULES.create(ctx, {coll}, record)"],
        )
        # update
        if "update" in names:
            fields = _update_fields(table)
            params = list(key_params)
            for col in fields:
                doc = self.column_doc(table, col, fk_of)
                if col.transitions:
                    doc += " " + _transitions_text(col.transitions)
                params.append(
                    _Param(
                        col.name,
                        f"{self.annotation(table, col)} | None",
                        "None",
                        "New value: " + doc,
                    )
                )
            nullable = [c.name for c in fields if table.nullable(c)]
            if nullable:
                alias = self.alias(_camel(table.singular) + "Clearable", nullable)
                params.append(
                    _Param(
                        "clear",
                        f"list[{alias}] | None",
                        "None",
                        "Fields to set to null: " + ", ".join(nullable) + ".",
                    )
                )
            changes = "{" + ", ".join(f"{_py_str(c.name)}: {c.name}" for c in fields) + "}"
            out += self.function(
                names["update"],
                "write",
                params,
                f"Change fields of one {table.name} record, found by its key.",
                "Fields not given stay as they are. " + self.rules_text(table, create=False),
                [
                    *_assign("changes", changes),
                    f"return RULES.update(ctx, {coll}, {key_map}, changes"
                    + (", clear)" if nullable else ")"),
                ],
            )
        # delete
        out += self.function(
            names["delete"],
            "write",
            key_params,
            f"Delete one {table.name} record, found by its key.",
            self.delete_text(table),
            [f"return RULES.delete(ctx, {coll}, {key_map})"],
        )
        return out

    def rules_text(self, table: _Table, *, create: bool) -> str:
        bits = []
        if table.foreign_keys:
            refs = "; ".join(
                f"{', '.join(fk.fields)} must name an existing {fk.parent} record"
                for fk in table.foreign_keys
            )
            bits.append(f"{refs}.")
        if table.unique:
            bits.append("Unique fields: " + "; ".join(", ".join(u) for u in table.unique) + ".")
        for col in table.columns:
            if col.transitions and create and col.transitions.get("initial"):
                starts = ", ".join(str(v) for v in col.transitions["initial"])
                bits.append(f"A new record's {col.name} must be one of: {starts}.")
        return " ".join(bits)

    def delete_text(self, table: _Table) -> str:
        refused, cascade, nulled = [], [], []
        for other in self.tables:
            for fk in other.foreign_keys:
                if fk.parent != table.name:
                    continue
                label = f"{other.name} ({', '.join(fk.fields)})"
                {"cascade": cascade, "set null": nulled}.get(fk.on_delete, refused).append(label)
        bits = []
        if refused:
            bits.append(f"Refused while records of {', '.join(refused)} refer to it.")
        if cascade:
            bits.append(f"Records of {', '.join(cascade)} that refer to it are deleted with it.")
        if nulled:
            bits.append(f"References from {', '.join(nulled)} are set to null.")
        return " ".join(bits)

    def function(
        self,
        name: str,
        kind: str,
        params: list[_Param],
        summary: str,
        details: str,
        body: list[str],
    ) -> list[str]:
        lines = ["", f'@tool(kind="{kind}")', f"def {name}(", "    ctx: ToolContext,"]
        for p in params:
            default = "" if p.default is None else f" = {p.default}"
            lines.append(f"    {p.name}: {p.annotation}{default},")
        lines.append(") -> dict[str, Any]:")
        lines.append(f'    """{summary}')
        if details.strip():
            wrapped = textwrap.wrap(details.strip(), width=_WIDTH - 8, break_on_hyphens=False)
            lines += ["", *("    " + w for w in wrapped)]
        if params:
            lines += ["", "    Args:"]
            for p in params:
                text = textwrap.wrap(
                    f"{p.name}: {p.doc}",
                    width=_WIDTH - 8,
                    subsequent_indent="    ",
                    break_on_hyphens=False,
                )
                lines += ["        " + t for t in text]
        lines.append('    """')
        lines += ["    " + b for b in body]
        lines.append("")
        return lines


def _alias_lines(name: str, source: str) -> list[str]:
    """`Name = Literal[...]` as ruff formats it: one line, the items on one line, or exploded."""
    line = f"{name} = {source}"
    if len(line) <= _WIDTH:
        return [line]
    inner = source[len("Literal[") : -1]
    if 4 + len(inner) <= _WIDTH:
        return [f"{name} = Literal[", f"    {inner}", "]"]
    items = _split_commas([t for t in _tokens(inner)])
    texts = [inner[i[0].start : i[-1].end] for i in items]
    return [f"{name} = Literal[", *(f"    {t}," for t in texts), "]"]


def _assign(name: str, source: str) -> list[str]:
    line = f"{name} = {source}"
    if len(line) + 4 <= _WIDTH:
        return [line]
    inner = source[1:-1].split(", ")
    return [f"{name} = {{", *[f"    {item}," for item in inner], "}"]


def _unique_alias(base: str, taken: dict[str, str]) -> str:
    candidate, n = base, 2
    while (
        candidate in taken
        or keyword.iskeyword(candidate)
        or candidate in ("Any", "Literal", "ToolContext", "SqliteRules", "RULES", "TABLES")
    ):
        candidate, n = f"{base}{n}", n + 1
    return candidate


def _rowid_column(table: _Table) -> _Column:
    return _Column(
        sql="rowid",
        name=table.key,
        declared="INTEGER",
        notnull=True,
        pk=1,
        default_sql=None,
        family="integer",
        types=["integer"],
    )


def _transitions_text(transitions: dict[str, Any]) -> str:
    allowed = transitions["allowed"]
    if not allowed:
        return "It cannot change."
    moves = "; ".join(f"{old} -> {', '.join(str(v) for v in new)}" for old, new in allowed.items())
    return f"Allowed changes: {moves}."
