"""Arguments for procedural tool checks, drawn from a tool's JSON schema and the seeded state.

`ArgumentGenerator.cases(tool, count, rng)` gives a deterministic list of `Case`s for one
tool: calls valid per its input schema (a parameter that names a record, such as
`ticket_id`, mostly draws an existing key from the seed), boundary values that are still
valid (0, -1, empty and very long strings, the declared minimum and maximum, huge
numbers, empty lists), and invalid calls the gateway must refuse as `invalid_arguments`
(a wrong type, a missing required argument, an unknown argument, a value outside the
declared minimum, maximum or enum). Every valid and boundary case is checked against the
schema with jsonschema before it is kept, and every invalid one is checked to break it.
"""

from __future__ import annotations

import json
import math
import random
import re
import string
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from ipaddress import IPv4Address, IPv6Address
from typing import Any
from uuid import UUID

from jsonschema import Draft202012Validator, FormatChecker
from pydantic import TypeAdapter, ValidationError

from agentenv.env import Environment, Tool
from agentenv.state import SEPARATOR

VALID = "valid"
BOUNDARY = "boundary"
WRONG_TYPE = "wrong_type"
MISSING_REQUIRED = "missing_required"
EXTRA_ARGUMENT = "extra_argument"
OUT_OF_RANGE = "out_of_range"
INVALID_CASES = (WRONG_TYPE, MISSING_REQUIRED, EXTRA_ARGUMENT, OUT_OF_RANGE)
EXTRA_NAME = "unexpected_argument"

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
# Values of the wrong JSON type, tried in order: an object is refused by almost every
# parameter type (strings, numbers, booleans, lists, enums, dates), so it comes first.
_WRONG_VALUES: list[Any] = [{"unexpected": True}, "not-a-number", 12345, [1, 2]]
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


@dataclass(frozen=True)
class Case:
    """One generated call: which family it belongs to and its arguments."""

    case: str
    args: dict[str, Any]

    @property
    def invalid(self) -> bool:
        """Whether the schema forbids these arguments (the gateway must refuse them)."""
        return self.case in INVALID_CASES


@dataclass
class _Source:
    """Where a parameter may draw values from, besides its schema."""

    keys: list[Any] = field(default_factory=list)  # existing record keys
    fresh: str | None = None  # a collection a new key may be invented for (CRUD create)
    values: list[Any] = field(default_factory=list)  # values a field takes in the seed


def crud_target(tool: Tool) -> tuple[str, str] | None:
    """The (collection, op) of a CRUD tool, namespaced as the state stores it, else None."""
    at = tool.source.find("crud:")
    if at < 0:
        return None
    aliases = [a for a in tool.source[:at].split(":") if a]
    collection, _, op = tool.source[at + len("crud:") :].rpartition(".")
    return SEPARATOR.join([*aliases, collection]), op


def _singular_matches(stem: str, collection: str) -> bool:
    c = collection.lower()
    return (
        stem in (c, c[:-1] if c.endswith("s") else c)
        or (c.endswith("ies") and stem == c[:-3] + "y")
        or (c.endswith("es") and stem == c[:-2])
    )


class ArgumentGenerator:
    """Builds the cases of each tool of one environment (see the module docstring)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.infos = env.seed.infos()
        data = env.seed.to_dict()
        self.keys: dict[str, list[Any]] = {}
        self.fields: dict[str, dict[str, list[Any]]] = {}
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        for name, rows in data.items():
            key = self.infos[name].key
            self.records[name] = {str(r[key]): r for r in rows if r.get(key) is not None}
            self.keys[name] = [r[key] for r in rows if r.get(key) is not None]
            pools: dict[str, dict[str, Any]] = {}
            for row in rows:
                for f, v in row.items():
                    if isinstance(v, str | int | float | bool) and len(pools.get(f, ())) < 50:
                        pools.setdefault(f, {})[json.dumps(v, sort_keys=True)] = v
            self.fields[name] = {f: list(vs.values()) for f, vs in pools.items()}
        start = env.clock.start or datetime(2026, 3, 2, 9, tzinfo=UTC)
        self.base_time = start.astimezone(UTC)
        self._validators: dict[int, tuple[Any, Draft202012Validator]] = {}

    # -- schemas -------------------------------------------------------------------------

    def _validator(self, schema: dict[str, Any], root: dict[str, Any]) -> Draft202012Validator:
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

    def _fits(self, value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
        return self._validator(schema, root).is_valid(value)

    @staticmethod
    def _resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
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

    def _branches(self, schema: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
        """The non-null alternatives of a schema (itself if it has none)."""
        schema = self._resolve(schema, root)
        options = schema.get("anyOf") or schema.get("oneOf")
        if not options:
            return [schema]
        out = [self._resolve(o, root) for o in options]
        return [o for o in out if o.get("type") != "null"] or out

    # -- sources ---------------------------------------------------------------------------

    def _scope(self, tool: Tool) -> dict[str, str]:
        """The collections a tool's names refer to: bare name -> stored name."""
        prefix = tool.name.rpartition(SEPARATOR)[0] if SEPARATOR in tool.name else ""
        scope = {}
        for name in self.infos:
            owner, _, bare = name.rpartition(SEPARATOR)
            if owner == prefix and not bare.startswith("_"):
                scope[bare] = name
        if not scope:
            scope = {n: n for n in self.infos if not n.startswith("_")}
        return scope

    def _collection_named(self, tool: Tool, name: str) -> str | None:
        n = name.lower()
        m = re.fullmatch(r"(.+)_(?:id|ids|key|keys)", n)
        base = m.group(1) if m else n
        stems = [base, base.rsplit("_", 1)[-1]]
        scope = self._scope(tool)
        for stem in stems:
            for bare, full in scope.items():
                if _singular_matches(stem, bare):
                    return full
        for stem in (n, n.rsplit("_", 1)[-1]):
            for full in scope.values():
                key = self.infos[full].key
                if key not in ("id", "_key") and stem == key.lower():
                    return full
        return None

    def source(self, tool: Tool, name: str) -> _Source:
        """What a parameter may draw from the seeded state."""
        crud = crud_target(tool)
        found = self._collection_named(tool, name)
        named = self.keys.get(found, []) if found is not None else []
        if crud is not None and crud[0] in self.infos:
            collection, op = crud
            if name == self.infos[collection].key:
                fresh = collection if op == "create" else None
                return _Source(keys=self.keys[collection], fresh=fresh)
            if name in self.fields.get(collection, {}):
                return _Source(keys=named, values=self.fields[collection][name])
        if found is not None:
            if name.lower().startswith("new_"):  # new_path: a key that is not taken yet
                return _Source(fresh=found)
            return _Source(keys=named)
        values: list[Any] = []
        for part in name.split("_or_"):  # name_or_email: either field's values
            for full in self._scope(tool).values():
                values += self.fields.get(full, {}).get(part, [])
        return _Source(values=values[:50])

    def link(
        self, tool: Tool, args: dict[str, Any], root: dict[str, Any], rng: random.Random
    ) -> dict[str, Any]:
        """Make arguments agree with one record: when `ticket_id` names an existing ticket,
        take `customer_id` (and any other argument the ticket has a field for) from it, so
        that calls get past "not this customer's ticket" checks."""
        props = root.get("properties", {})
        best: dict[str, Any] = {}
        for anchor in args:
            collection = self._collection_named(tool, anchor)
            if collection is None:
                continue
            record = self.records.get(collection, {}).get(str(args[anchor]))
            if record is None:
                continue
            agreeing = {
                p: record[p]
                for p, schema in props.items()
                if p != anchor and p in record and self._fits(record[p], schema, root)
            }
            if len(agreeing) > len(best) or (len(agreeing) == len(best) and rng.random() < 0.5):
                best = agreeing
        return {**args, **best}

    # -- values ------------------------------------------------------------------------------

    def value(
        self,
        schema: dict[str, Any],
        root: dict[str, Any],
        name: str,
        src: _Source,
        rng: random.Random,
    ) -> Any:
        """A value for one parameter: from the seed where it names a record, else the schema."""
        resolved = self._resolve(schema, root)
        if src.keys and rng.random() < 0.8:
            if any(b.get("type") == "array" for b in self._branches(resolved, root)):
                picked = [rng.choice(src.keys) for _ in range(rng.randint(1, 2))]
                if self._fits(picked, schema, root):
                    return picked
            for candidate in _spellings(rng.choice(src.keys)):
                if self._fits(candidate, schema, root):
                    return candidate
        if src.fresh and rng.random() < 0.7:
            fresh = self._fresh_key(src.fresh, rng)
            for candidate in _spellings(fresh):
                if self._fits(candidate, schema, root):
                    return candidate
        if src.values and rng.random() < 0.5:
            candidate = rng.choice(src.values)
            if self._fits(candidate, schema, root):
                return candidate
        return self.generate(schema, root, rng, name)

    def _fresh_key(self, collection: str, rng: random.Random) -> Any:
        """A key not in the collection, shaped like its keys (digits re-drawn)."""
        taken = {str(k) for k in self.keys.get(collection, [])}
        model = str(rng.choice(self.keys[collection])) if self.keys.get(collection) else "new"
        for _ in range(20):
            candidate = re.sub(r"\d", lambda _: str(rng.randint(0, 9)), model)
            if candidate == model or not any(c.isdigit() for c in model):
                candidate = f"{model}-{rng.randint(100, 999)}"
            if candidate not in taken:
                return candidate
        return f"{model}-new"

    def generate(
        self, schema: Any, root: dict[str, Any], rng: random.Random, name: str = "", depth: int = 0
    ) -> Any:
        """A value valid per `schema` (as far as its keywords go), drawn with `rng`."""
        schema = self._resolve(schema, root)
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return rng.choice(schema["enum"])
        for key in ("anyOf", "oneOf"):
            if schema.get(key):
                options = [self._resolve(o, root) for o in schema[key]]
                real = [o for o in options if o.get("type") != "null"]
                pool = (
                    real if real and (rng.random() < 0.85 or len(real) == len(options)) else options
                )
                rest = {k: v for k, v in schema.items() if k != key}
                return self.generate({**rest, **rng.choice(pool)}, root, rng, name, depth)
        if schema.get("allOf"):
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for part in schema["allOf"]:
                merged.update(self._resolve(part, root))
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

    # -- cases -------------------------------------------------------------------------------

    def cases(self, tool: Tool, count: int, rng: random.Random) -> list[Case]:
        """`count` distinct cases for one tool (fewer if it has fewer distinct inputs)."""
        root = tool.input_schema
        props: dict[str, Any] = root.get("properties", {}) or {}
        required = [p for p in root.get("required", []) if p in props]
        sources = {p: self.source(tool, p) for p in props}
        whole = self._validator(root, root)
        seen: set[str] = set()

        def keep(case: Case, out: list[Case]) -> None:
            text = json.dumps(case.args, sort_keys=True, default=str)
            if text in seen or whole.is_valid(case.args) == case.invalid:
                return
            seen.add(text)
            out.append(case)

        def draw(all_optional: bool | None = None) -> dict[str, Any]:
            args = {}
            for p, s in props.items():
                wanted = p in required or (
                    all_optional if all_optional is not None else rng.random() < 0.5
                )
                if wanted:
                    args[p] = self.value(s, root, p, sources[p], rng)
            return self.link(tool, args, root, rng) if rng.random() < 0.5 else args

        valid: list[Case] = []
        keep(Case(VALID, draw(all_optional=False)), valid)
        for _ in range(count * 6):
            if len(valid) >= count:
                break
            keep(Case(VALID, draw()), valid)
        base = valid[0].args if valid else {}

        boundary: list[Case] = []
        for p, s in props.items():
            for v in self._boundary_values(s, root):
                keep(Case(BOUNDARY, {**base, p: v}), boundary)
        rng.shuffle(boundary)

        families: list[list[Case]] = [[], [], [], []]
        for p, s in props.items():
            for v in _WRONG_VALUES:
                if not self._fits(v, s, root):
                    keep(Case(WRONG_TYPE, {**base, p: v}), families[0])
                    break
            for v in self._out_of_range(s, root):
                keep(Case(OUT_OF_RANGE, {**base, p: v}), families[3])
        for p in required:
            keep(Case(MISSING_REQUIRED, {k: v for k, v in base.items() if k != p}), families[1])
        if root.get("additionalProperties") is False and EXTRA_NAME not in props:
            keep(Case(EXTRA_ARGUMENT, {**base, EXTRA_NAME: "x"}), families[2])
        invalid = _interleave(families)

        families_present = sum(1 for f in families if f)
        n_invalid = min(
            len(invalid),
            max(round(count * 0.2), min(families_present, count // 2), 1 if count >= 3 else 0),
        )
        n_boundary = min(len(boundary), round(count * 0.2))
        n_valid = min(len(valid), max(1, count - n_invalid - n_boundary))
        spare = count - n_valid - n_invalid - n_boundary
        if spare > 0:  # few distinct valid inputs: spend the rest on the other families
            extra_b = min(spare, len(boundary) - n_boundary)
            n_boundary += extra_b
            n_invalid = min(len(invalid), n_invalid + spare - extra_b)
        return valid[:n_valid] + boundary[:n_boundary] + invalid[:n_invalid]

    def _boundary_values(self, schema: dict[str, Any], root: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        resolved = self._resolve(schema, root)
        options = [self._resolve(o, root) for o in resolved.get("anyOf", resolved.get("oneOf", []))]
        if any(o.get("type") == "null" for o in options) or (
            isinstance(resolved.get("type"), list) and "null" in resolved["type"]
        ):
            out.append(None)
        for branch in self._branches(resolved, root):
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

    def _out_of_range(self, schema: dict[str, Any], root: dict[str, Any]) -> list[Any]:
        out: list[Any] = []
        for branch in self._branches(schema, root):
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


def _spellings(key: Any) -> list[Any]:
    """A record key as the parameter might type it: as stored, as text, as a number."""
    out = [key]
    if not isinstance(key, str):
        out.append(str(key))
    elif key.lstrip("-").isdigit():
        out.append(int(key))
    return out


def _examples(description: str) -> list[str]:
    """The `e.g. X` examples of a parameter's description."""
    found = re.findall(r"e\.g\.,?\s+[\"'`]?([^\s\"'`,;()]+)", description or "")
    return [f.rstrip(".") or f for f in found]


def _interleave(groups: list[list[Case]]) -> list[Case]:
    out: list[Case] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out


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
