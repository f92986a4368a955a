"""The JSON Schema type of a Python value, as JSON Schema names it (a boolean is not an
integer: `True` is `boolean`). Shared by the gateway's argument checks and synthesis."""

from __future__ import annotations

from typing import Any


def json_type(value: Any) -> str:
    """The JSON type of a value: null, boolean, integer, number, string, array or object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"
