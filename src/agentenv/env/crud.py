"""CRUD tools declared in a document: get/list/search/create/update/delete on a collection.

Parameters come from the collection's record schema (or the tool's `params`), so simple
record-keeping environments need no Python at all. Writes are checked against the schema
by the state itself; a missing record or a taken key is a tool error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, create_model

from agentenv.env.tool import Tool, ToolContext, ToolError
from agentenv.spec.environment import CollectionSpec, ParamSpec, ToolSpec
from agentenv.state import StateError

_PY_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": int | float,  # smart union: 5 stays 5, so hashes match direct inserts
    "boolean": bool,
    "array": list,
    "object": dict,
}

_DESCRIPTIONS = {
    "get": "Get one {c} record by its {k}.",
    "list": "List {c} records, optionally filtered by exact field values.",
    "search": "Search {c} records whose text fields contain the query (case-insensitive).",
    "create": "Create a new {c} record.",
    "update": "Update fields of an existing {c} record, found by its {k}.",
    "delete": "Delete a {c} record by its {k}.",
}


def _python_type(prop: dict[str, Any]) -> Any:
    if prop.get("enum"):
        return Literal[tuple(prop["enum"])]  # type: ignore[misc]
    kind = prop.get("type")
    if isinstance(kind, list):
        types = [_PY_TYPES.get(t, Any) if t != "null" else type(None) for t in kind]
        union = types[0]
        for t in types[1:]:
            union = union | t
        return union
    return _PY_TYPES.get(kind, Any) if isinstance(kind, str) else Any


def _properties(
    collection: CollectionSpec, params: dict[str, ParamSpec] | None
) -> tuple[dict[str, dict[str, Any]], set[str]]:
    if params:
        props = {
            n: {
                k: v
                for k, v in p.model_dump(exclude_none=True, exclude={"required"}).items()
                if v != ""
            }
            for n, p in params.items()
        }
        required = {n for n, p in params.items() if p.required}
        return props, required
    schema = collection.record_schema or {}
    return dict(schema.get("properties", {})), set(schema.get("required", []))


def build_crud_tool(spec: ToolSpec, collection: CollectionSpec) -> Tool:
    """The Tool for a `crud:` entry of a document."""
    assert spec.crud is not None and spec.name is not None
    name, op, coll, key = spec.name, spec.crud.op, spec.crud.collection, collection.key
    props, required = _properties(collection, spec.params)
    key_prop = props.get(key, {"type": "string"})
    key_schema = {**key_prop, "description": key_prop.get("description") or f"The {key}."}

    schema_props: dict[str, dict[str, Any]]
    if op in ("get", "delete"):
        schema_props, req = {key: key_schema}, {key}
    elif op == "list":
        filters = spec.crud.fields or [
            f for f, p in props.items() if p.get("type") in ("string", "integer", "boolean")
        ]
        schema_props = {
            f: {**props.get(f, {}), "description": f"Only records whose {f} equals this."}
            for f in filters
        }
        schema_props["limit"] = {
            "type": "integer",
            "default": 50,
            "minimum": 1,
            "description": "At most this many records.",
        }
        schema_props["offset"] = {
            "type": "integer",
            "default": 0,
            "minimum": 0,
            "description": "Skip this many records first.",
        }
        req = set()
    elif op == "search":
        schema_props = {
            "query": {"type": "string", "description": "Text to look for."},
            "limit": {
                "type": "integer",
                "default": 20,
                "minimum": 1,
                "description": "At most this many records.",
            },
        }
        req = {"query"}
    elif op == "create":
        schema_props = props or {"record": {"type": "object", "description": "The new record."}}
        req = required if props else {"record"}
    else:  # update
        schema_props = {key: key_schema, **{f: p for f, p in props.items() if f != key}}
        req = {key}

    fields: dict[str, Any] = {}
    for field_name, prop in schema_props.items():
        py = _python_type(prop)
        bounds = {"ge": prop.get("minimum"), "le": prop.get("maximum")}
        if field_name in req:
            fields[field_name] = (py, Field(..., **bounds))
        else:
            fields[field_name] = (py | None, Field(prop.get("default"), **bounds))
    args_model = create_model(  # type: ignore[call-overload]
        f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    input_schema: dict[str, Any] = {"type": "object", "properties": schema_props}
    if req:  # upstream's tool-schema check flags an empty `required` list
        input_schema["required"] = sorted(req)
    input_schema["additionalProperties"] = False
    if op == "search":
        text_fields = spec.crud.fields or [f for f, p in props.items() if p.get("type") == "string"]

    def invoke(ctx: ToolContext, args: dict[str, Any]) -> Any:
        state = ctx.state
        try:
            if op == "get":
                return state.require(coll, args[key])
            if op == "delete":
                state.delete(coll, args[key])
                return {"deleted": args[key]}
            if op == "list":
                limit, offset = args.pop("limit"), args.pop("offset")
                limit = 50 if limit is None else limit
                offset = 0 if offset is None else offset
                equals = {k: v for k, v in args.items() if v is not None}
                rows = state.find(coll, **equals)
                return {coll: rows[offset : offset + limit], "total": len(rows)}
            if op == "search":
                needle = args["query"].lower()
                fields_ = text_fields or None

                def hit(record: dict[str, Any]) -> bool:
                    values = (record.get(f) for f in fields_) if fields_ else record.values()
                    return any(isinstance(v, str) and needle in v.lower() for v in values)

                rows = state.find(coll, where=hit)
                limit = 20 if args["limit"] is None else args["limit"]
                return {coll: rows[:limit], "total": len(rows)}
            if op == "create":
                record = args["record"] if "record" in schema_props and not props else args
                return state.insert(coll, {k: v for k, v in record.items() if v is not None})
            changes = {k: v for k, v in args.items() if k != key and v is not None}
            return state.update(coll, args[key], changes)
        except StateError as exc:
            raise ToolError(str(exc)) from None

    return Tool(
        name=name,
        description=spec.description or _DESCRIPTIONS[op].format(c=coll, k=key),
        input_schema=input_schema,
        args_model=args_model,
        invoke=invoke,
        roles=tuple(spec.roles) if spec.roles is not None else None,
        kind=spec.kind or ("read" if op in ("get", "list", "search") else "write"),
        duration=spec.duration,
        timeout=spec.timeout,
        source=f"crud:{coll}.{op}",
    )
