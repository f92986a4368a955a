"""How a call's arguments are checked and refused: nesting past the limit, a boolean where
the tool's schema wants a number, and pydantic's verdict as one message (what
`Gateway.call` records and every transport shows).

JSON Schema (draft 2020-12) says a boolean is neither an `integer` nor a `number`, while
pydantic's lax mode takes `true` for an `int` (as 1); `bool_problem` holds the tool to its
schema. A float with no fractional part (`1.0`) *is* an integer in that draft, and pydantic
agrees (it becomes 1); `1.5` is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agentenv.env.tool import ArgumentsInvalid, Tool
from agentenv.spec.json_types import json_type
from agentenv.spec.limits import depth_message, value_depth_path

_CONTAINERS = (dict, list)


def too_deep(args: dict[str, Any]) -> str | None:
    """Why `args` nest past the limit (what and where), or None; flat arguments, the common
    case, cost one pass over their values."""
    for value in args.values():
        if type(value) in _CONTAINERS:
            path = value_depth_path(args)
            if path is None:
                return None
            parts = list(map(str, path))
            where = ".".join(parts)
            if len(parts) > 12:  # a path 64 levels deep says no more than its ends do
                where = f"{'.'.join(parts[:6])}...{'.'.join(parts[-3:])}"
            return f"{where}: {depth_message()}"
    return None


def argument_errors(tool: str, exc: ValidationError) -> str:
    """Pydantic's verdict on a call's arguments as one message naming each field."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        msg = "unknown argument" if err["type"] == "extra_forbidden" else err["msg"]
        if err["type"] == "missing":
            msg = "missing required argument"
        parts.append(f"{loc}: {msg}")
    return f"invalid arguments for {tool!r}: " + "; ".join(parts)


_NUMBERS = ("integer", "number")


def _types(schema: Mapping[str, Any], defs: Mapping[str, Any], seen: int = 0) -> set[str] | None:
    """The JSON types a (sub)schema admits, or None when it admits any (or we cannot
    tell: then the value is left to pydantic)."""
    if seen > 8:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = defs.get(ref.removeprefix("#/$defs/"))
        return _types(target, defs, seen + 1) if isinstance(target, Mapping) else None
    kind = schema.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            out: set[str] = set()
            for option in options:
                found = _types(option, defs, seen + 1) if isinstance(option, Mapping) else None
                if found is None:
                    return None
                out |= found
            return out
    if "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        return {json_type(v) for v in values} if isinstance(values, list) else None
    return None


def _sub(schema: Mapping[str, Any], defs: Mapping[str, Any], key: str | int) -> Any:
    """The subschema of a property (or an array item) of `schema`, or None."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = defs.get(ref.removeprefix("#/$defs/")) or {}
    for key_ in ("anyOf", "oneOf"):
        options = schema.get(key_)
        if isinstance(options, list):  # `X | None`: the one option that has structure
            shaped = [o for o in options if isinstance(o, Mapping) and o.get("type") != "null"]
            if len(shaped) == 1:
                return _sub(shaped[0], defs, key)
            return None
    if isinstance(key, int):
        prefix = schema.get("prefixItems")
        if isinstance(prefix, list) and key < len(prefix):
            return prefix[key]
        return schema.get("items")
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and key in properties:
        return properties[key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, Mapping) else None


def bool_problem(value: Any, schema: Any, defs: Mapping[str, Any], path: str) -> str | None:
    """Where a boolean stands for an `integer` or a `number` in `value` (checked against
    its JSON schema): `argument 'amount': expected integer, got boolean true`, or None."""
    if not isinstance(schema, Mapping):
        return None
    if type(value) is bool:
        types = _types(schema, defs)
        if types and "boolean" not in types and types & set(_NUMBERS):
            wanted = " or ".join(t for t in _NUMBERS if t in types)
            return f"argument {path!r}: expected {wanted}, got boolean {str(value).lower()}"
        return None
    items: Any = ()
    if isinstance(value, Mapping):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        if isinstance(item, bool | Mapping | list):
            where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}"
            found = bool_problem(item, _sub(schema, defs, key), defs, where)
            if found:
                return found
    return None


def arguments_bool_problem(tool: Tool, args: Mapping[str, Any]) -> str | None:
    """`bool_problem` for each argument of a call against the tool's input schema."""
    schema = tool.input_schema
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    defs = schema.get("$defs") or {}
    for name, value in args.items():
        if isinstance(value, bool | Mapping | list) and name in properties:
            found = bool_problem(value, properties[name], defs, name)
            if found:
                return found
    return None


def check_arguments(
    tool: Tool, name: str, args: Any, checked: dict[str, Any] | None
) -> tuple[dict[str, Any], Any, Any, str | None]:
    """The gateway's argument check past its fast path (`env.fast_args` gave `checked`,
    or None): `(values, given, args as recorded, problem)`; `problem` is the message of an
    `invalid_arguments` error, or None. Arguments that nest too deep are recorded as a
    note, not themselves (the record could not hold them)."""
    if args and (deep := too_deep(args)) is not None:
        return {}, (), {"_invalid": deep}, f"invalid arguments for {name!r}: {deep}"
    if checked is not None:
        return checked, args or (), args, None
    if tool.check_args is not None:  # a remote tool: the server's JSON Schema
        try:
            values = tool.check_args(args or {})
        except ArgumentsInvalid as exc:
            return {}, (), args, f"invalid arguments for {name!r}: {exc}"
        return values, values.keys(), args, None
    if args and (wrong := arguments_bool_problem(tool, args)) is not None:
        return {}, (), args, f"invalid arguments for {name!r}: {wrong}"
    try:
        model = tool.args_model.model_validate(args or {})
    except ValidationError as exc:
        return {}, (), args, argument_errors(name, exc)
    return dict(model.__dict__), model.model_fields_set, args, None
