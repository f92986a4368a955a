"""A record schema compiled once into plain Python checks: the fast path of validation.

`compile_check(schema)` turns a JSON Schema (draft 2020-12) built from the simple keywords
into one function `check(record) -> bool` that says exactly what
`Draft202012Validator(schema).is_valid(record)` would say, for the plain JSON that the
store validates (exact `dict`, `list`, `str`, `int`, `float`, `bool`, `None`: records are
parsed back from their canonical text, or copied from plain JSON, before validation). For
a schema that uses anything else it returns None, and the store validates with jsonschema
alone.

The store uses it as "fast accept, slow reject": a record the check accepts is stored; a
record it refuses goes to jsonschema, whose verdict and message are the ones reported. So
even a wrong "no" here could only cost time; only a wrong "yes" would matter, and the
differential tests (tests/state/test_fastcheck.py) compare the two over many generated
schemas and records, valid and invalid.

What is compiled, each exactly as jsonschema 4 does it (its keyword functions were the
reference): boolean schemas, `type` (one or a list; `integer` accepts a float with an
integral value, as jsonschema does; `bool` is never a number), `enum` and `const` of
scalars (jsonschema's `equal`: `True` is not `1`, `1.0` is `1`), `required`, `properties`,
`additionalProperties` (bool or schema; not beside `patternProperties`), `minProperties`,
`maxProperties`, `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum`,
`minLength`, `maxLength` (code points), `pattern` (`re.search`, like jsonschema),
`items` (not beside `prefixItems`), `minItems`, `maxItems`, `allOf`, `anyOf`, `oneOf`,
`not`, and `$ref` to `#/$defs/<name>` or `#/definitions/<name>` when not recursive.
`format` is an annotation for a validator without a format checker (the store's), so it is
skipped, as jsonschema skips it. Keywords jsonschema does not know are ignored by both.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator

Check = Callable[[Any], bool]

_KNOWN = frozenset(Draft202012Validator.VALIDATORS)
"""Keywords jsonschema applies; any other key of a schema is ignored by it, and by us."""

_SKIPPED = frozenset({"format", "$defs", "definitions"})
"""Keywords that never fail a validator without a format checker (`$defs` is not applied)."""

_REF = re.compile(r"#/(\$defs|definitions)/([A-Za-z0-9_.-]+)")

_NUMBER = (int, float)
_OBJECT_KEYWORDS = frozenset({"type", "required", "properties", "additionalProperties"})
_EXACT_TYPES: dict[str, type] = {
    "string": str,
    "boolean": bool,
    "object": dict,
    "array": list,
    "null": type(None),
}
"""Types whose test is `type(v) is T` on parsed JSON (not integer or number: see _TYPES)."""
_SCALAR_TYPES = (str, int, float, bool, type(None))


class _Unsupported(Exception):
    """Raised while compiling: this schema needs the full validator."""


def compile_check(schema: Mapping[str, Any] | bool) -> Check | None:
    """An exact check for a schema of the simple keywords, or None if it uses others."""
    root = dict(schema) if isinstance(schema, Mapping) else schema
    try:
        return _Compiler(root).compile(root)
    except _Unsupported:
        return None
    except (TypeError, ValueError, re.error, RecursionError):
        return None  # a malformed schema: jsonschema decides what it means


def _always(value: Any) -> bool:
    return True


def _never(value: Any) -> bool:
    return False


def _is_integer(value: Any) -> bool:
    kind = type(value)
    return kind is int or (kind is float and value.is_integer())


def _is_number(value: Any) -> bool:
    kind = type(value)
    return kind is int or kind is float


_TYPES: dict[str, Check] = {
    "object": lambda v: type(v) is dict,
    "array": lambda v: type(v) is list,
    "string": lambda v: type(v) is str,
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda v: type(v) is bool,
    "null": lambda v: v is None,
}


def _bound(value: Any) -> int | float:
    if type(value) not in _NUMBER:
        raise _Unsupported("a non-numeric bound")
    return value


def _count(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise _Unsupported("a non-integer count")
    return value


def _members(values: Any) -> Check:
    """Membership by jsonschema's `equal`, for scalar members only."""
    if not isinstance(values, list) or not all(type(m) in _SCALAR_TYPES for m in values):
        raise _Unsupported("enum or const of containers")
    strings = frozenset(m for m in values if type(m) is str)
    numbers = frozenset(m for m in values if type(m) in _NUMBER)
    bools = frozenset(m for m in values if type(m) is bool)
    none = any(m is None for m in values)

    def check(v: Any) -> bool:
        kind = type(v)
        if kind is str:
            return v in strings
        if kind is bool:
            return v in bools
        if kind is int or kind is float:
            return v in numbers  # 1 == 1.0 and hash alike, as jsonschema's `equal` says
        if v is None:
            return none
        return False  # a container never equals a scalar

    return check


class _Compiler:
    """Compiles one root schema; `$ref`s are resolved against that root."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.resolving: set[str] = set()

    def compile(self, schema: Any) -> Check:
        if schema is True:
            return _always
        if schema is False:
            return _never
        if not isinstance(schema, dict):
            raise _Unsupported("a schema that is not an object")
        if "$id" in schema or "$anchor" in schema or "$dynamicAnchor" in schema:
            raise _Unsupported("a schema that changes its base or names an anchor")
        checks: list[Check] = []
        applied = [k for k in schema if k in _KNOWN and k not in _SKIPPED]
        if schema.get("type") == "object" and set(applied) <= _OBJECT_KEYWORDS:
            return self._object(schema)
        for keyword in applied:
            method = getattr(self, "_k_" + keyword.lstrip("$"), None)
            if method is None:
                raise _Unsupported(keyword)
            made = method(schema[keyword], schema)
            if made is not None:
                checks.append(made)
        return _all(checks)

    def _object(self, schema: dict[str, Any]) -> Check:
        """The common record schema, fused into one function: `type: object` with
        `required`, `properties` and `additionalProperties`. The same verdicts as the
        keyword checks one by one (the differential tests run both shapes), in one pass over
        the record's fields, with a plain type test for a property that is only a type."""
        required = schema.get("required", [])
        props = schema.get("properties", {})
        if not isinstance(required, list) or not all(type(n) is str for n in required):
            raise _Unsupported("required that is not a list of names")
        if not isinstance(props, dict):
            raise _Unsupported("properties that is not an object")
        names = tuple(required)
        exact: dict[str, type] = {}
        tests: dict[str, Check] = {}
        for name, sub in props.items():
            only_type = sub.get("type") if isinstance(sub, dict) and len(sub) == 1 else None
            if isinstance(only_type, str) and only_type in _EXACT_TYPES:
                exact[name] = _EXACT_TYPES[only_type]
            else:
                test = self.compile(sub)
                if test is not _always:
                    tests[name] = test
        extra: Check | None = None
        if "additionalProperties" in schema:
            extra = self.compile(schema["additionalProperties"])
            if extra is _always:
                extra = None
        known = frozenset(props)

        def check(v: Any) -> bool:
            if type(v) is not dict:
                return False
            for name in names:
                if name not in v:
                    return False
            for name, item in v.items():
                kind = exact.get(name)
                if kind is not None:
                    if type(item) is not kind:
                        return False
                    continue
                test = tests.get(name)
                if test is not None:
                    if not test(item):
                        return False
                elif extra is not None and name not in known and not extra(item):
                    return False
            return True

        return check

    # -- keywords: each returns a check of the whole instance, or None for "no-op" --------

    def _k_type(self, value: Any, schema: dict[str, Any]) -> Check:
        names = value if isinstance(value, list) else [value]
        if not names or not all(isinstance(n, str) and n in _TYPES for n in names):
            raise _Unsupported("an unknown type")
        if len(names) == 1:
            return _TYPES[names[0]]
        tests = tuple(_TYPES[n] for n in names)
        return lambda v: any(t(v) for t in tests)

    def _k_enum(self, value: Any, schema: dict[str, Any]) -> Check:
        return _members(value)

    def _k_const(self, value: Any, schema: dict[str, Any]) -> Check:
        return _members([value])

    def _k_required(self, value: Any, schema: dict[str, Any]) -> Check:
        if not isinstance(value, list) or not all(type(n) is str for n in value):
            raise _Unsupported("required that is not a list of names")
        names = tuple(value)
        return lambda v: type(v) is not dict or all(n in v for n in names)

    def _k_properties(self, value: Any, schema: dict[str, Any]) -> Check:
        if not isinstance(value, dict):
            raise _Unsupported("properties that is not an object")
        props = tuple((name, self.compile(sub)) for name, sub in value.items())

        def check(v: Any) -> bool:
            if type(v) is not dict:
                return True
            for name, test in props:  # noqa: SIM110 (a loop is faster than all(genexpr))
                if name in v and not test(v[name]):
                    return False
            return True

        return check

    def _k_additionalProperties(self, value: Any, schema: dict[str, Any]) -> Check:
        if "patternProperties" in schema:
            raise _Unsupported("additionalProperties beside patternProperties")
        known = schema.get("properties", {})
        if not isinstance(known, dict):
            raise _Unsupported("properties that is not an object")
        names = frozenset(known)
        if value is False:
            return lambda v: type(v) is not dict or all(k in names for k in v)
        test = self.compile(value)
        if test is _always:
            return _always

        def check(v: Any) -> bool:
            if type(v) is not dict:
                return True
            return all(test(item) for k, item in v.items() if k not in names)

        return check

    def _k_minProperties(self, value: Any, schema: dict[str, Any]) -> Check:
        n = _count(value)
        return lambda v: type(v) is not dict or len(v) >= n

    def _k_maxProperties(self, value: Any, schema: dict[str, Any]) -> Check:
        n = _count(value)
        return lambda v: type(v) is not dict or len(v) <= n

    def _k_minimum(self, value: Any, schema: dict[str, Any]) -> Check:
        b = _bound(value)
        return lambda v: not _is_number(v) or not v < b

    def _k_maximum(self, value: Any, schema: dict[str, Any]) -> Check:
        b = _bound(value)
        return lambda v: not _is_number(v) or not v > b

    def _k_exclusiveMinimum(self, value: Any, schema: dict[str, Any]) -> Check:
        b = _bound(value)
        return lambda v: not _is_number(v) or not v <= b

    def _k_exclusiveMaximum(self, value: Any, schema: dict[str, Any]) -> Check:
        b = _bound(value)
        return lambda v: not _is_number(v) or not v >= b

    def _k_minLength(self, value: Any, schema: dict[str, Any]) -> Check:
        n = _count(value)
        return lambda v: type(v) is not str or len(v) >= n

    def _k_maxLength(self, value: Any, schema: dict[str, Any]) -> Check:
        n = _count(value)
        return lambda v: type(v) is not str or len(v) <= n

    def _k_pattern(self, value: Any, schema: dict[str, Any]) -> Check:
        if type(value) is not str:
            raise _Unsupported("a pattern that is not a string")
        search = re.compile(value).search  # what re.search(value, ...) uses, compiled once
        return lambda v: type(v) is not str or search(v) is not None

    def _k_items(self, value: Any, schema: dict[str, Any]) -> Check:
        if "prefixItems" in schema:
            raise _Unsupported("items beside prefixItems")
        if value is False:
            return lambda v: type(v) is not list or not v
        test = self.compile(value)
        if test is _always:
            return _always
        return lambda v: type(v) is not list or all(test(item) for item in v)

    def _k_minItems(self, value: Any, schema: dict[str, Any]) -> Check:
        n = _count(value)
        return lambda v: type(v) is not list or len(v) >= n

    def _k_maxItems(self, value: Any, schema: dict[str, Any]) -> Check:
        n = _count(value)
        return lambda v: type(v) is not list or len(v) <= n

    def _subschemas(self, value: Any) -> list[Check]:
        if not isinstance(value, list) or not value:
            raise _Unsupported("a combinator that is not a non-empty list")
        return [self.compile(sub) for sub in value]

    def _k_allOf(self, value: Any, schema: dict[str, Any]) -> Check:
        return _all(self._subschemas(value))

    def _k_anyOf(self, value: Any, schema: dict[str, Any]) -> Check:
        tests = tuple(self._subschemas(value))
        return lambda v: any(t(v) for t in tests)

    def _k_oneOf(self, value: Any, schema: dict[str, Any]) -> Check:
        tests = tuple(self._subschemas(value))
        return lambda v: sum(1 for t in tests if t(v)) == 1

    def _k_not(self, value: Any, schema: dict[str, Any]) -> Check:
        test = self.compile(value)
        return lambda v: not test(v)

    def _k_ref(self, value: Any, schema: dict[str, Any]) -> Check:
        match = _REF.fullmatch(value) if isinstance(value, str) else None
        if match is None or not isinstance(self.root, dict):
            raise _Unsupported("a $ref that is not to a local definition")
        if value in self.resolving:
            raise _Unsupported("a recursive $ref")
        defs = self.root.get(match.group(1))
        if not isinstance(defs, dict) or match.group(2) not in defs:
            raise _Unsupported("a $ref to nothing")
        self.resolving.add(value)
        try:
            return self.compile(defs[match.group(2)])
        finally:
            self.resolving.discard(value)


def _all(checks: list[Check]) -> Check:
    checks = [c for c in checks if c is not _always]
    if _never in checks:
        return _never
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    if len(checks) == 2:
        first, second = checks
        return lambda v: first(v) and second(v)
    tests = tuple(checks)

    def check(v: Any) -> bool:
        for test in tests:  # noqa: SIM110 (a loop is faster than all(genexpr))
            if not test(v):
                return False
        return True

    return check
