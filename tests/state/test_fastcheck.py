"""The compiled record check against jsonschema: the same verdict on every record, and the
store's errors word for word what jsonschema alone gives (a differential test)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from agentenv.state import CollectionInfo, RecordInvalid, State, canonical_json
from agentenv.state._fastcheck import compile_check

NAMES = ["id", "a", "b", "név", "x1"]
PATTERNS = ["@", "^[a-z]+$", "\\d", "^é", "[A-Z]{2,}"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.sampled_from([0, 1, -1, 2, 1.0, 0.0, -0.0, 1.5, 2**63, 10**20, 1e300, "", "a", "é", "1"]),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False, width=32),
    st.text(max_size=4),
)


TYPES = st.sampled_from(["object", "array", "string", "integer", "number", "boolean", "null"])
BOUND = st.sampled_from([0, 1, -1, 2, 1.5, 0.5, 10**20])
LEAF_KEYWORDS: dict[str, st.SearchStrategy[Any]] = {
    "type": st.one_of(TYPES, st.lists(TYPES, min_size=1, max_size=3, unique=True)),
    "enum": st.lists(SCALARS, min_size=0, max_size=4),
    "const": SCALARS,
    "minimum": BOUND,
    "maximum": BOUND,
    "exclusiveMinimum": BOUND,
    "exclusiveMaximum": BOUND,
    "minLength": st.integers(0, 3),
    "maxLength": st.integers(0, 3),
    "pattern": st.sampled_from(PATTERNS),
    "format": st.sampled_from(["email", "date-time"]),  # an annotation only
    "description": st.text(max_size=3),  # not a keyword: ignored by both
}


@st.composite
def _leaf_schema(draw: st.DrawFn) -> dict[str, Any]:
    """One to three keywords: few enough that a value can pass or fail on each one."""
    names = draw(st.lists(st.sampled_from(sorted(LEAF_KEYWORDS)), max_size=2, unique=True))
    if draw(st.booleans()):  # the type keyword half the time: its rules are the subtle ones
        names = ["type", *names]
    return {name: draw(LEAF_KEYWORDS[name]) for name in names}


def _schemas() -> st.SearchStrategy[Any]:
    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        obj = st.fixed_dictionaries(
            {"type": st.just("object")},
            optional={
                "properties": st.dictionaries(st.sampled_from(NAMES), children, max_size=4),
                "required": st.lists(st.sampled_from(NAMES), max_size=3, unique=True),
                "additionalProperties": st.one_of(st.booleans(), children),
                "minProperties": st.integers(0, 3),
                "maxProperties": st.integers(0, 3),
            },
        )
        arr = st.fixed_dictionaries(
            {"type": st.just("array")},
            optional={
                "items": st.one_of(st.booleans(), children),
                "minItems": st.integers(0, 3),
                "maxItems": st.integers(0, 3),
            },
        )
        combos = st.one_of(
            st.builds(lambda xs: {"allOf": xs}, st.lists(children, min_size=1, max_size=3)),
            st.builds(lambda xs: {"anyOf": xs}, st.lists(children, min_size=1, max_size=3)),
            st.builds(lambda xs: {"oneOf": xs}, st.lists(children, min_size=1, max_size=3)),
            st.builds(lambda x: {"not": x}, children),
        )
        return st.one_of(obj, arr, combos)

    return st.recursive(st.one_of(_leaf_schema(), st.booleans()), extend, max_leaves=8)


VALUES: st.SearchStrategy[Any] = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(
            st.one_of(st.sampled_from(NAMES), st.text(max_size=3)), children, max_size=5
        ),
    ),
    max_leaves=12,
)


def _near(schema: Any) -> st.SearchStrategy[Any]:
    """Values built from the schema's own parts, so many are valid and many just miss."""
    if not isinstance(schema, dict):
        return VALUES
    parts: list[st.SearchStrategy[Any]] = [VALUES]
    for key in ("enum",):
        if schema.get(key):
            parts.append(st.sampled_from(schema[key]))
    if "const" in schema:
        parts.append(st.just(schema["const"]))
    for key in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        if key in schema:
            b = schema[key]
            parts.append(st.sampled_from([b, b - 1, b + 1, float(b), b + 0.5, True]))
    if "properties" in schema or schema.get("type") == "object":
        props = schema.get("properties", {})
        fields = {name: _near(sub) for name, sub in props.items()}
        parts.append(
            st.fixed_dictionaries(
                {n: f for n, f in fields.items() if n in schema.get("required", [])},
                optional={
                    **{n: f for n, f in fields.items() if n not in schema.get("required", [])},
                    "extra": VALUES,
                },
            )
        )
    if "items" in schema or schema.get("type") == "array":
        parts.append(st.lists(_near(schema.get("items", True)), max_size=4))
    for combo in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(combo, []):
            parts.append(_near(sub))
    if "not" in schema:
        parts.append(_near(schema["not"]))
    return st.one_of(*parts)


@st.composite
def schema_and_values(draw: st.DrawFn) -> tuple[Any, list[Any]]:
    schema = draw(_schemas())
    values = draw(st.lists(_near(schema), min_size=1, max_size=8))
    return schema, values


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_and_values())
def test_the_compiled_check_agrees_with_jsonschema(case: tuple[Any, list[Any]]) -> None:
    schema, values = case
    check = compile_check(schema)
    assert check is not None, schema  # every generated schema uses only compiled keywords
    validator = Draft202012Validator(schema)
    for value in values:
        plain = json.loads(json.dumps(value))  # what the store validates: parsed JSON
        assert check(plain) is validator.is_valid(plain), (schema, plain)


RECORD_SCHEMAS = [
    {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "n": {"type": "integer", "minimum": 0},
            "status": {"enum": ["open", "closed"]},
        },
        "required": ["id", "status"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "id": {"type": ["string", "integer"]},
            "score": {"type": "number", "exclusiveMaximum": 1},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 1}, "maxItems": 2},
            "owner": {"$ref": "#/$defs/owner"},
            "flag": {"const": True},
        },
        "$defs": {
            "owner": {
                "type": "object",
                "properties": {"email": {"type": "string", "pattern": "@"}},
                "required": ["email"],
            }
        },
    },
    # Keywords the fast path does not compile: jsonschema alone decides.
    {"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}},
    {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
    {"type": "object", "properties": {"n": {"multipleOf": 0.1}}},
    {
        "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
        "$ref": "#/$defs/node",
    },
]


def test_which_schemas_compile() -> None:
    compiled = [compile_check(s) is not None for s in RECORD_SCHEMAS]
    assert compiled == [True, True, False, False, False, False]


def _jsonschema_only(schema: dict[str, Any], record: dict[str, Any]) -> str | None:
    """The store's message before the fast path: jsonschema on the parsed record."""
    stored = json.loads(canonical_json(record))
    error = next(iter(Draft202012Validator(schema).iter_errors(stored)), None)
    if error is None:
        return None
    where = "".join(f"[{p!r}]" if isinstance(p, int) else f".{p}" for p in error.path)
    return f"{where.lstrip('.') or 'record'}: {error.message}"


RECORD_FIELDS = {
    "id": st.one_of(st.text(min_size=1, max_size=3), st.integers(0, 9)),
    "n": st.one_of(st.integers(-2, 2), st.sampled_from([1.0, 0.0, -1.0, 2.5, True, False, "1"])),
    "status": st.sampled_from(["open", "closed", "Open", "", None, 1]),
    "score": st.sampled_from([0, 1, 0.999, 1.0, True, "0.5", None]),
    "tags": st.lists(st.sampled_from(["", "a", "é", 1, None]), max_size=3),
    "owner": st.one_of(
        st.fixed_dictionaries({}, optional={"email": st.sampled_from(["a@b", "nobody", 3])}),
        st.just("ada@example.com"),
    ),
    "flag": st.sampled_from([True, False, 1, 1.0]),
    "x1": st.sampled_from([1, 1.0, "1"]),
    "next": st.one_of(st.none(), st.fixed_dictionaries({"next": st.just({})})),
    "extra": st.text(max_size=3),
}


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(RECORD_SCHEMAS),
    st.fixed_dictionaries(
        {"id": RECORD_FIELDS["id"]}, optional={k: v for k, v in RECORD_FIELDS.items() if k != "id"}
    ),
)
def test_the_store_accepts_and_refuses_as_jsonschema_does_with_its_message(
    schema: dict[str, Any], record: dict[str, Any]
) -> None:
    state = State({"items": CollectionInfo.create("id", schema)})
    expected = _jsonschema_only(schema, record)
    if expected is None:
        state.put("items", record)
        assert state.get("items", record["id"]) == json.loads(canonical_json(record))
    else:
        with pytest.raises(RecordInvalid) as info:
            state.put("items", record)
        assert info.value.problem == expected
        assert state.count("items") == 0


@pytest.mark.parametrize(
    ("schema", "value", "valid"),
    [
        ({"type": "integer"}, 1.0, True),  # jsonschema: an integral float is an integer
        ({"type": "integer"}, 1.5, False),
        ({"type": "integer"}, True, False),  # a bool is not a number
        ({"type": "number"}, False, False),
        ({"enum": [1]}, True, False),  # True is not 1 for enum
        ({"enum": [1]}, 1.0, True),  # but 1.0 is
        ({"enum": [True]}, 1, False),
        ({"const": 0}, False, False),
        ({"const": "é"}, "é", True),
        ({"maxLength": 1}, "é", True),  # code points, not bytes
        ({"minimum": 0}, True, True),  # a bound only judges numbers
        ({"enum": []}, None, False),
        ({"items": False}, [], True),
        ({"items": False}, [1], False),
        ({"additionalProperties": False, "properties": {"a": {}}}, {"a": 1, "b": 2}, False),
        (False, {}, False),
        (True, {}, True),
    ],
)
def test_corner_cases_agree(schema: Any, value: Any, valid: bool) -> None:
    check = compile_check(schema)
    assert check is not None
    assert Draft202012Validator(schema).is_valid(value) is valid
    assert check(value) is valid


@pytest.mark.parametrize(
    "schema",
    [
        {"minimum": "1"},  # malformed bounds: jsonschema decides what they mean
        {"type": "decimal"},
        {"pattern": "("},
        {"$ref": "https://example.com/schema"},
        {"$id": "https://example.com/s", "type": "object"},
        {"dependentRequired": {"a": ["b"]}},
        {"properties": {"a": {"unevaluatedProperties": False}}},
        {"enum": [[1], {"a": 1}]},
    ],
)
def test_what_does_not_compile_falls_back(schema: Any) -> None:
    assert compile_check(schema) is None


TRICKY = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.0,
    0.0,
    -0.0,
    1.5,
    2**64,
    1e300,
    "",
    "1",
    "é",
    [],
    [1],
    {},
    {"a": 1},
]


@pytest.mark.parametrize(
    "schema",
    [{"type": t} for t in ("object", "array", "string", "integer", "number", "boolean", "null")]
    + [{"type": ["integer", "null"]}, {"type": ["number", "string"]}]
    + [{"enum": [v]} for v in TRICKY if not isinstance(v, (list, dict))]
    + [{"const": v} for v in TRICKY if not isinstance(v, (list, dict))]
    + [{"minimum": 1}, {"maximum": 0}, {"exclusiveMinimum": 0}, {"exclusiveMaximum": 1.0}]
    + [{"minLength": 1}, {"maxLength": 0}, {"minItems": 1}, {"maxItems": 0}]
    + [{"minProperties": 1}, {"maxProperties": 0}, {"required": ["a"]}, {"pattern": "^$"}],
)
def test_every_simple_keyword_on_every_tricky_value(schema: dict[str, Any]) -> None:
    check = compile_check(schema)
    assert check is not None
    validator = Draft202012Validator(schema)
    for value in TRICKY:
        assert check(value) is validator.is_valid(value), (schema, value)
