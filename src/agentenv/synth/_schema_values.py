"""Values drawn from a JSON schema: valid ones, boundary ones, and ones out of range.

`SchemaValues` is the schema-driven half of argument generation (the other half,
`_record_keys`, draws from the seeded state). `generate` gives a value valid per a
schema's keywords (`$ref`, `anyOf`/`oneOf`/`allOf`, types, enums, bounds, lengths,
patterns, formats, items, properties); `boundary_values` gives values that are still
valid but at the edges (0, -1, empty and very long strings, the declared minimum and
maximum, empty lists); `out_of_range` gives values just outside the declared minimum,
maximum or enum. `fits` checks a value with jsonschema, with the string formats checked
the way the gateway's pydantic validation checks them (`FORMATS`), and `regex_sample`
makes a string for a simple `pattern`.
"""

from __future__ import annotations

import json
import math
import random
import re
import string
from datetime import date, datetime, time, timedelta
from ipaddress import IPv4Address, IPv6Address
from typing import Any
from uuid import UUID

from jsonschema import Draft202012Validator, FormatChecker
from pydantic import TypeAdapter, ValidationError

_WORDS = [
    "hello",
    "Refund request",
    "Please check this",
    "general",
    "Alex",
    "ok",
    "Lorem ipsum dolor sit amet",
    "notes",
    "urgent",
    "héllo wörld ✓",
]
_EMAILS = ["someone@example.com", "nobody@example.org", "not-an-address"]
_BOUNDARY_NUMBERS: list[Any] = [0, -1, 1, 10**12, -(10**12), 2**53]
_BOUNDARY_STRINGS = ["", "   ", "x" * 1000, "héllo ✓ 😀", "'; DROP TABLE records; --"]
_PRINTABLE = string.ascii_letters + string.digits + "-_.@/: "
_MAX_DEPTH = 4


def _format_checker() -> FormatChecker:
    """String formats checked the way the gateway's pydantic validation checks them, so
    that a value jsonschema accepts is one the gateway accepts (jsonschema alone does not
    check `date-time` without extra packages, and its checks differ in the details)."""
    from pydantic import AnyUrl

    types: dict[str, Any] = {
        "date-time": datetime,
        "date": date,
        "time": time,
        "duration": timedelta,
        "uuid": UUID,
        "uri": AnyUrl,
        "ipv4": IPv4Address,
        "ipv6": IPv6Address,
    }
    try:
        from pydantic import EmailStr

        TypeAdapter(EmailStr)
        types["email"] = EmailStr
    except ImportError:  # pydantic's email type needs the email-validator package
        pass
    checker = FormatChecker(formats=())
    for name, py_type in types.items():
        adapter: TypeAdapter[Any] = TypeAdapter(py_type)

        def check(value: Any, adapter: TypeAdapter[Any] = adapter) -> bool:
            if isinstance(value, str):
                adapter.validate_python(value)
            return True

        checker.checks(name, raises=ValidationError)(check)
    return checker


FORMATS = _format_checker()


class SchemaValues:
    """Draws values from JSON schemas; `base_time` anchors generated dates and times."""

    def __init__(self, base_time: datetime) -> None:
        self.base_time = base_time
        self._validators: dict[int, tuple[Any, Draft202012Validator]] = {}

    def validator(self, schema: dict[str, Any], root: dict[str, Any]) -> Draft202012Validator:
        cached = self._validators.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        doc = dict(schema)
        for defs in ("$defs", "definitions"):
            if defs in root and defs not in doc:
                doc[defs] = root[defs]
        validator = Draft202012Validator(doc, format_checker=FORMATS)
        self._validators[id(schema)] = (schema, validator)  # the schema, so its id stays its own
        return validator

    def fits(self, value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
        return self.validator(schema, root).is_valid(value)

    @staticmethod
    def resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
        for _ in range(10):
            if not isinstance(schema, dict):
                return {}
            ref = schema.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#/"):
                return schema
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            schema = {**{k: v for k, v in schema.items() if k != "$ref"}, **target}
        return schema if isinstance(schema, dict) else {}

    def branches(self, schema: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
        """The non-null alternatives of a schema (itself if it has none)."""
        schema = self.resolve(schema, root)
        options = schema.get("anyOf") or schema.get("oneOf")
        if not options:
            return [schema]
        out = [self.resolve(o, root) for o in options]
        return [o for o in out if o.get("type") != "null"] or out

    def generate(
        self, schema: Any, root: dict[str, Any], rng: random.Random, name: str = "", depth: int = 0
    ) -> Any:
        """A value valid per `schema` (as far as its keywords go), drawn with `rng`."""
        schema = self.resolve(schema, root)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                options = [self.resolve(o, root) for o in schema[key]]
                real = [o for o in options if o.get("type") != "null"]
                pool = (
                    real if real and (rng.random() < 0.85 or len(real) == len(options)) else options
                )
                rest = {k: v for k, v in schema.items() if k != key}
                return self.generate({**rest, **rng.choice(pool)}, root, rng, name, depth)
        if schema.get("allOf"):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged.update(self.resolve(part, root))
            return self.generate(merged, root, rng, name, depth)
        kind = schema.get("type")
        if isinstance(kind, list):
            real = [k for k in kind if k != "null"]
            kind = (
                rng.choice(real) if real and (rng.random() < 0.85 or "null" not in kind) else "null"
            )
        if kind is None:
            kind = (
                "object" if "properties" in schema else "array" if "items" in schema else "string"
            )
        if kind == "null":
            return None
        if kind == "boolean":
            return rng.random() < 0.5
        if kind in ("integer", "number"):
            return self._number(schema, kind, rng)
        if kind == "string":
            return self._string(schema, name, rng)
        if kind == "array":
            if depth >= _MAX_DEPTH:
                return []
            lo = int(schema.get("minItems", 0))
            hi = int(schema.get("maxItems", lo + 3))
            items = schema.get("items", {})
            out = [
                self.generate(items, root, rng, name, depth + 1)
                for _ in range(rng.randint(lo, max(lo, min(hi, lo + 3))))
            ]
            if schema.get("uniqueItems"):
                seen: dict[str, Any] = {}
                for item in out:
                    seen.setdefault(json.dumps(item, sort_keys=True), item)
                out = list(seen.values())
            return out
        if kind == "object":
            if depth >= _MAX_DEPTH:
                return {}
            props = schema.get("properties", {})
            required = set(schema.get("required", []))
            return {
                p: self.generate(s, root, rng, p, depth + 1)
                for p, s in props.items()
                if p in required or rng.random() < 0.5
            }
        return None

    def _number(self, schema: dict[str, Any], kind: str, rng: random.Random) -> Any:
        lo, hi = _bounds(schema, kind)
        a = lo if lo is not None else (0 if hi is None or hi >= 0 else hi - 20)
        b = hi if hi is not None else a + 20
        a = min(a, b)
        if kind == "integer":
            return rng.randint(math.ceil(a), math.floor(b)) if math.ceil(a) <= math.floor(b) else a
        return round(rng.uniform(a, b), 2)

    def _string(self, schema: dict[str, Any], name: str, rng: random.Random) -> str:
        pattern, fmt = schema.get("pattern"), schema.get("format")
        text: str | None = None
        if isinstance(pattern, str):
            text = regex_sample(pattern, rng)
        if text is None and isinstance(fmt, str):
            text = self._formatted(fmt, rng)
        if text is None:
            examples = _examples(schema.get("description", ""))
            text = rng.choice(examples) if examples and rng.random() < 0.4 else None
        if text is None:
            text = self._by_name(name, rng)
        lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
        if len(text) < lo:
            text += "x" * (lo - len(text))
        if isinstance(hi, int) and len(text) > hi:
            text = text[:hi]
        return text

    def _formatted(self, fmt: str, rng: random.Random) -> str | None:
        moment = self.base_time + timedelta(hours=rng.randint(-48, 96))
        return {
            "date-time": moment.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "date": moment.strftime("%Y-%m-%d"),
            "time": moment.strftime("%H:%M:%S"),
            "duration": f"PT{rng.randint(1, 120)}M",
            "ipv4": f"192.0.2.{rng.randint(1, 254)}",
            "email": rng.choice(_EMAILS[:2]),
            "uri": "https://example.com/item",
            "uuid": f"{rng.getrandbits(32):08x}-0000-4000-8000-{rng.getrandbits(48):012x}",
        }.get(fmt)

    def _by_name(self, name: str, rng: random.Random) -> str:
        n = name.lower()
        moment = self.base_time + timedelta(hours=rng.randint(-48, 96))
        if "email" in n or n.endswith("addr") or n in ("to", "cc", "bcc", "sender", "recipient"):
            return rng.choice(_EMAILS)
        if n in ("day", "date", "due", "since", "until", "birthday", "check_in", "check_out") or (
            n.endswith(("_date", "_day"))
        ):
            return moment.strftime("%Y-%m-%d")
        if n in ("start", "end", "when", "time") or n.endswith(("_at", "_time")):
            return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        if "path" in n or n in ("folder", "dir", "directory"):
            return rng.choice(["/", "/notes", "/work/report.md", "/tmp/new-file.txt"])
        return rng.choice(_WORDS)

    def boundary_values(self, schema: dict[str, Any], root: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        resolved = self.resolve(schema, root)
        options = [self.resolve(o, root) for o in resolved.get("anyOf", resolved.get("oneOf", []))]
        if any(o.get("type") == "null" for o in options) or (
            isinstance(resolved.get("type"), list) and "null" in resolved["type"]
        ):
            out.append(None)
        for branch in self.branches(resolved, root):
            kinds = branch.get("type")
            kinds = kinds if isinstance(kinds, list) else [kinds]
            if "integer" in kinds or "number" in kinds:
                lo, hi = _bounds(branch, "number")
                out += [v for v in (lo, hi) if v is not None] + _BOUNDARY_NUMBERS
            if "string" in kinds:
                out += _BOUNDARY_STRINGS
            if "array" in kinds:
                out += [[], [self.generate(branch.get("items", {}), root, random.Random(0))] * 10]
            if "object" in kinds:
                out.append({})
        return out

    def out_of_range(self, schema: dict[str, Any], root: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        for branch in self.branches(schema, root):
            if isinstance(branch.get("minimum"), int | float):
                out.append(branch["minimum"] - 1)
            if isinstance(branch.get("maximum"), int | float):
                out.append(branch["maximum"] + 1)
            enum = branch.get("enum")
            if enum and all(isinstance(e, str) for e in enum):
                out.append("not-one-of-the-choices")
        return out


def _bounds(schema: dict[str, Any], kind: str) -> tuple[float | None, float | None]:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    step = 1 if kind == "integer" else 0.01
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if isinstance(xlo, int | float):
        lo = max(lo, xlo + step) if isinstance(lo, int | float) else xlo + step
    if isinstance(xhi, int | float):
        hi = min(hi, xhi - step) if isinstance(hi, int | float) else xhi - step
    lo = lo if isinstance(lo, int | float) else None
    hi = hi if isinstance(hi, int | float) else None
    return lo, hi


def _examples(description: str) -> list[str]:
    """The `e.g. X` examples of a parameter's description."""
    found = re.findall(r"e\.g\.,?\s+[\"'`]?([^\s\"'`,;()]+)", description or "")
    return [f.rstrip(".") or f for f in found]


def regex_sample(pattern: str, rng: random.Random) -> str | None:
    """A string matching a (simple) regular expression, or None if it cannot make one."""
    try:
        from re import _parser as parser  # type: ignore[attr-defined]

        parsed = parser.parse(pattern)
    except Exception:
        return None
    out: list[str] = []

    def in_class(ch: str, items: list[Any]) -> bool:
        negate = False
        hit = False
        for op, av in items:
            name = str(op)
            if name == "NEGATE":
                negate = True
            elif name == "LITERAL":
                hit |= ord(ch) == av
            elif name == "RANGE":
                hit |= av[0] <= ord(ch) <= av[1]
            elif name == "CATEGORY":
                hit |= _category(ch, str(av))
        return hit != negate

    def emit(items: Any) -> None:
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                out.append(chr(av))
            elif name == "NOT_LITERAL":
                out.append("x" if av != ord("x") else "y")
            elif name == "ANY":
                out.append(rng.choice(string.ascii_lowercase))
            elif name == "IN":
                allowed = [c for c in _PRINTABLE if in_class(c, av)]
                if not allowed:
                    raise ValueError("empty class")
                out.append(rng.choice(allowed))
            elif name == "CATEGORY":
                allowed = [c for c in _PRINTABLE if _category(c, str(av))]
                out.append(rng.choice(allowed))
            elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
                lo, hi, sub = av
                for _ in range(rng.randint(lo, max(lo, min(hi, lo + 3)))):
                    emit(sub)
            elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
                emit(av[-1] if name == "SUBPATTERN" else av)
            elif name == "BRANCH":
                emit(rng.choice(av[1]))
            elif name == "AT":
                continue
            else:
                raise ValueError(f"unsupported regex element {name}")

    try:
        emit(parsed)
    except (ValueError, TypeError, IndexError):
        return None
    text = "".join(out)
    return text if re.search(pattern, text) else None


def _category(ch: str, category: str) -> bool:
    checks = {
        "CATEGORY_DIGIT": ch.isdigit(),
        "CATEGORY_NOT_DIGIT": not ch.isdigit(),
        "CATEGORY_WORD": ch.isalnum() or ch == "_",
        "CATEGORY_NOT_WORD": not (ch.isalnum() or ch == "_"),
        "CATEGORY_SPACE": ch.isspace(),
        "CATEGORY_NOT_SPACE": not ch.isspace(),
    }
    return checks.get(category, False)
