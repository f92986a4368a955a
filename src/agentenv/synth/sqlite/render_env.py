"""Rendering the data files: the seed (`seed/<table>.json`) and `env.yaml`.

`_document` builds env.yaml as data (collections with their JSON schemas, the document
tools, roles, clock, access) and `_yaml` writes it in a fixed, readable layout, checked
against PyYAML's reading of it. The tool-name helpers here (`_tool_names`, `_list_fields`,
`_text_fields`, `_update_fields`) decide which tools a table gets, for tools.py too.
"""

from __future__ import annotations

import json
import re
import textwrap
from datetime import datetime
from typing import Any

import yaml

from agentenv.synth.sqlite.model import _Column, _ForeignKey, _Table
from agentenv.synth.sqlite.runtime import composite_key

# -- seeds ---------------------------------------------------------------------------------


def _seed_records(table: _Table) -> list[dict[str, Any]]:
    names = [c.name for c in table.columns]
    out = []
    skipped = 0
    for row in table.rows:
        if any(row.get(f) is None for f in table.key_fields):
            skipped += 1
            continue
        record = {n: row.get(n) for n in names}
        if table.rowid:
            record = {table.key: row[table.key], **record}
        elif table.composite:
            record = {table.key: composite_key([row[f] for f in table.key_fields]), **record}
        out.append(record)
    table.rows = out
    return out


def _seed_text(records: list[dict[str, Any]]) -> str:
    if not records:
        return "[]\n"
    lines = [json.dumps(r, ensure_ascii=False, allow_nan=False) for r in records]
    return "[\n  " + ",\n  ".join(lines) + "\n]\n"


# -- env.yaml ------------------------------------------------------------------------------


def _schema(table: _Table) -> dict[str, Any]:
    fk_of = {f: fk for fk in table.foreign_keys for f in fk.fields}
    props: dict[str, Any] = {}
    if table.rowid or table.composite:
        props[table.key] = {"type": "integer"} if table.rowid else {"type": "string"}
    for col in table.columns:
        props[col.name] = _column_schema(table, col, fk_of.get(col.name))
    required = [table.key] if (table.rowid or table.composite) else []
    required += [c.name for c in table.columns if c.notnull or c.name in table.key_fields]
    return {
        "type": "object",
        "required": list(dict.fromkeys(required)),
        "properties": props,
        "additionalProperties": False,
    }


def _column_schema(table: _Table, col: _Column, fk: _ForeignKey | None) -> dict[str, Any]:
    nullable = table.nullable(col)
    types = list(col.types)
    prop: dict[str, Any] = {}
    if types:
        all_types = [*types, "null"] if nullable else types
        prop["type"] = all_types[0] if len(all_types) == 1 else all_types
    if "enum" in col.rules:
        prop["enum"] = [*col.rules["enum"], *([None] if nullable else [])]
    for k, v in col.rules.items():
        if k != "enum":
            prop[k] = v
    if col.declared.upper().strip() == "DATE" and types == ["string"]:
        prop["format"] = "date"
    if fk is not None:
        i = fk.fields.index(col.name)
        prop["description"] = f"refers to {fk.parent}.{fk.to[i]}"
    return prop


def _collection_description(table: _Table, db_name: str) -> str:
    parts = [f"Rows of table {table.sql} of {db_name} ({len(table.rows)} at generation)."]
    if table.rowid:
        parts.append("It has no primary key: records are keyed by rowid.")
    if table.composite:
        joined = ", ".join(table.key_fields)
        parts.append(f"The key `{table.key}` is {joined} joined with '|'.")
    for fk in table.foreign_keys:
        parts.append(f"{', '.join(fk.fields)} refers to {fk.parent}.{', '.join(fk.to)}.")
    return " ".join(parts)


def _tool_names(table: _Table) -> dict[str, str]:
    s, p = table.singular, table.name
    names = {"get": f"get_{s}", "list": f"list_{p}"}
    if _text_fields(table):
        names["search"] = f"search_{p}"
    names["create"] = f"create_{s}"
    if _update_fields(table):
        names["update"] = f"update_{s}"
    names["delete"] = f"delete_{s}"
    return names


def _text_fields(table: _Table) -> list[str]:
    fk_fields = {f for fk in table.foreign_keys for f in fk.fields}
    return [
        c.name
        for c in table.columns
        if "string" in c.types
        and "enum" not in c.rules
        and c.name not in fk_fields
        and not c.name.endswith(("_at", "_on", "date"))
        and "DATE" not in c.declared.upper()
        and "TIME" not in c.declared.upper()
    ]


def _list_fields(table: _Table) -> list[str]:
    """The filters of list_*: references, unique, enum and boolean fields (and the parts of
    a composite key); a table with none of those gets its other text and integer fields."""
    fk_fields = {f for fk in table.foreign_keys for f in fk.fields}
    unique_fields = {f for u in table.unique for f in u}

    def chosen(c: _Column) -> bool:
        if c.name in table.key_fields:
            return table.composite
        return (
            c.name in fk_fields
            or c.name in unique_fields
            or "enum" in c.rules
            or c.types == ["boolean"]
        )

    fields = [c.name for c in table.columns if chosen(c)]
    return fields or [
        c.name
        for c in table.columns
        if c.name not in table.key_fields and c.types in (["string"], ["integer"])
    ]


def _update_fields(table: _Table) -> list[_Column]:
    return [c for c in table.columns if c.name not in table.key_fields]


def _document(
    tables: list[_Table], name: str, db_name: str, clock_start: datetime
) -> dict[str, Any]:
    records = sum(len(t.rows) for t in tables)
    state = {
        t.name: {
            "key": t.key,
            "description": _collection_description(t, db_name),
            "schema": _schema(t),
        }
        for t in tables
    }
    tools: list[dict[str, Any]] = [{"module": "tools.py"}]
    for t in tables:
        names = _tool_names(t)
        if not t.composite:
            tools.append(
                {
                    "name": names["get"],
                    "crud": {"collection": t.name, "op": "get"},
                    "description": f"Get one {t.name} record by its {t.key}.",
                }
            )
        tools.append(
            {
                "name": names["list"],
                "crud": {"collection": t.name, "op": "list", "fields": _list_fields(t)},
                "description": f"List {t.name} records, optionally only those whose fields equal the values given.",
            }
        )
        if "search" in names:
            fields = _text_fields(t)
            tools.append(
                {
                    "name": names["search"],
                    "crud": {"collection": t.name, "op": "search", "fields": fields},
                    "description": f"Find {t.name} records whose {' or '.join(fields)} contains the text (case-insensitive).",
                }
            )
    deletes = [_tool_names(t)["delete"] for t in tables]
    return {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": name,
        "version": "0.1.0",
        "description": (
            f"The SQLite database {db_name} as an environment: {len(tables)} tables, "
            f"{records} records. Each table is a collection with get, list and search tools "
            "and create, update and delete tools that keep the database's foreign keys, "
            "unique columns and enum transitions."
        ),
        "roles": [
            {"name": "agent", "description": "Reads, creates and updates records; cannot delete."},
            {"name": "admin", "description": "Everything an agent may do, and deletes."},
        ],
        "default_role": "agent",
        "state": state,
        "seed": {t.name: f"seed/{t.name}.json" for t in tables},
        "tools": tools,
        "clock": {"start": clock_start.strftime("%Y-%m-%dT%H:%M:%SZ"), "mode": "stepped"},
        "access": [{"role": "agent", "action": "disable", "tools": deletes}],
    }


_PLAIN = re.compile(r"^[A-Za-z_/][A-Za-z0-9_./-]*$")
_YAML_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~"}


def _flow(value: Any) -> str:
    """One value in YAML flow style (JSON where a plain scalar would be ambiguous)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str) and _PLAIN.match(value) and value.lower() not in _YAML_WORDS:
        return value
    return json.dumps(value, ensure_ascii=False)


def _text(value: str, indent: int) -> str:
    """A long string as a folded block, a short one on the line."""
    if len(value) < 70 or "\n" in value or value != value.strip():
        return _flow(value)
    pad = " " * indent
    lines = textwrap.wrap(value, width=92 - indent, break_on_hyphens=False)
    return ">-\n" + "\n".join(pad + line for line in lines)


def _yaml(doc: dict[str, Any], db_name: str) -> str:
    out = [
        f"# Generated from the SQLite database {db_name} by `agent-env synth env --from-sqlite`.",
        "# Regenerate rather than edit; docs/env-from-database.md explains each part.",
        f"apiVersion: {doc['apiVersion']}",
        f"kind: {doc['kind']}",
        f"name: {_flow(doc['name'])}",
        f"version: {_flow(doc['version'])}",
        f"description: {_text(doc['description'], 2)}",
        "",
        "roles:",
    ]
    for role in doc["roles"]:
        out.append(f"  - name: {_flow(role['name'])}")
        out.append(f"    description: {_text(role['description'], 6)}")
    out += [f"default_role: {_flow(doc['default_role'])}", "", "state:"]
    for name, coll in doc["state"].items():
        schema = coll["schema"]
        out += [
            f"  {_flow(name)}:",
            f"    key: {_flow(coll['key'])}",
            f"    description: {_text(coll['description'], 6)}",
            "    schema:",
            "      type: object",
            f"      required: {_flow(schema['required'])}",
            "      properties:",
        ]
        out += [f"        {_flow(k)}: {_flow(v)}" for k, v in schema["properties"].items()]
        out.append("      additionalProperties: false")
    out += ["", "seed:"]
    out += [f"  {_flow(k)}: {_flow(v)}" for k, v in doc["seed"].items()]
    out += [
        "",
        "tools:",
        "  # create_*, update_* and delete_* (and get_* of tables with a composite key): they",
        "  # check foreign keys, unique columns and enum transitions (agentenv.synth.sqlite.runtime).",
    ]
    for entry in doc["tools"]:
        first = True
        for k, v in entry.items():
            lead = "  - " if first else "    "
            value = _text(v, 6) if k == "description" else _flow(v)
            out.append(f"{lead}{k}: {value}")
            first = False
    clock = doc["clock"]
    out += [
        "",
        "clock:",
        f"  start: {_flow(clock['start'])}",
        f"  mode: {clock['mode']}",
        "",
        "access:",
        "  # Deleting is for the admin role.",
    ]
    for rule in doc["access"]:
        out += [f"  - role: {_flow(rule['role'])}", f"    action: {rule['action']}", "    tools:"]
        out += [f"      - {_flow(t)}" for t in rule["tools"]]
    text = "\n".join(out) + "\n"
    if yaml.safe_load(text) != doc:  # a scalar the emitter got wrong: let PyYAML write it
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=92)
    return text
