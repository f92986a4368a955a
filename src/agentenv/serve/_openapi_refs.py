"""JSON Schema `$defs` moved into an OpenAPI document's `components/schemas`.

pydantic writes a model's nested models as `$defs` with `#/$defs/X` refs. Embedded in an
OpenAPI document, such a ref points at the document's root, where there is no `$defs`: a
client generator or fuzzer cannot resolve it. These helpers move the definitions to
`components/schemas` and point the refs (and discriminator mappings) there; one name held
by two different schemas gets a suffix (`Name2`).
"""

from __future__ import annotations

from typing import Any

SCHEMAS = "#/components/schemas/"
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def hoist_defs(doc: dict[str, Any], schemas: dict[str, Any]) -> None:
    """Move every `$defs` (and every titled body schema, request or response) into
    components/schemas and point the `$ref`s there; a name already taken by another schema
    gets a suffix."""
    for item in doc.get("paths", {}).values():
        for method in _METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            bodies = [op.get("requestBody", {}), *op.get("responses", {}).values()]
            for body in bodies:
                for media in body.get("content", {}).values():
                    if "schema" in media:
                        media["schema"] = hoisted(media["schema"], schemas, top=True)
                for header in body.get("headers", {}).values():
                    if "schema" in header:
                        header["schema"] = hoisted(header["schema"], schemas, top=False)
            for param in op.get("parameters", []):
                if "schema" in param:
                    param["schema"] = hoisted(param["schema"], schemas, top=False)
    for name in list(schemas):
        schemas[name] = hoisted(schemas[name], schemas, top=False)


def add_component(schemas: dict[str, Any], schema: dict[str, Any]) -> None:
    """Put a model's schema (named by its `title`) and its definitions into `schemas`."""
    hoisted(schema, schemas, top=True)


def hoisted(schema: Any, schemas: dict[str, Any], *, top: bool) -> Any:
    """`schema` with its `$defs` (nested ones too) in `schemas`; a titled object schema at
    the top is itself moved there and answered as a `$ref`."""
    if not isinstance(schema, dict):
        return schema
    schema = dict(schema)
    defs = schema.pop("$defs", None) or {}
    # Compared as they will be stored (refs rewritten), so the same model met twice (a
    # route at the root and under /instances) is one component.
    same = {name: name for name in defs}
    renames = {n: free_name(schemas, n, _rewrite(sub, same)) for n, sub in defs.items()}
    schema = _rewrite(schema, renames)
    for name, sub in defs.items():
        target = renames[name]
        if target not in schemas:
            schemas[target] = hoisted(_rewrite(sub, renames), schemas, top=False)
    schema = {
        key: (
            {k: hoisted(v, schemas, top=False) for k, v in value.items()}
            if key in ("properties", "patternProperties")
            else [hoisted(v, schemas, top=False) for v in value]
            if isinstance(value, list) and key in ("anyOf", "oneOf", "allOf", "prefixItems")
            else hoisted(value, schemas, top=False)
            if key in ("items", "additionalProperties", "not", "contains")
            else value
        )
        for key, value in schema.items()
    }
    title = schema.get("title")
    if top and isinstance(title, str) and schema.get("type") == "object":
        target = free_name(schemas, title, schema)
        schemas.setdefault(target, schema)
        return {"$ref": SCHEMAS + target}
    return schema


def free_name(schemas: dict[str, Any], name: str, schema: Any) -> str:
    """`name` if free (or already holding this same schema), else `name2`, `name3`, ..."""
    candidate, n = name, 1
    while candidate in schemas and schemas[candidate] != schema:
        n += 1
        candidate = f"{name}{n}"
    return candidate


def _rewrite(node: Any, renames: dict[str, str]) -> Any:
    """`node` with each `#/$defs/X` ref pointing at components/schemas (renamed as given)."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str) and value.startswith("#/$defs/"):
                out[key] = _renamed(value, renames)
            elif key == "discriminator" and isinstance(value, dict) and "mapping" in value:
                mapping = {k: _renamed(v, renames) for k, v in value["mapping"].items()}
                out[key] = {**value, "mapping": mapping}
            else:
                out[key] = _rewrite(value, renames)
        return out
    if isinstance(node, list):
        return [_rewrite(v, renames) for v in node]
    return node


def _renamed(ref: str, renames: dict[str, str]) -> str:
    if not ref.startswith("#/$defs/"):
        return ref
    name = ref.removeprefix("#/$defs/")
    return SCHEMAS + renames.get(name, name)
