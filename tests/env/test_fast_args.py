"""The fast argument check agrees with pydantic: the same values whenever it answers.

`FastArgs` either gives what `args_model.model_validate` gives (values, their types, copies
of containers, the fields the caller set) or None (pydantic decides, with its messages).
These tests compare the two over thousands of generated models and inputs.
"""

from __future__ import annotations

import enum
import math
import random
from decimal import Decimal
from typing import Any, Literal

import pytest
from pydantic import ConfigDict, Field, ValidationError, create_model, field_validator

from agentenv import Tool, tool
from agentenv.env.crud import build_crud_tool
from agentenv.env.fast_args import FastArgs
from agentenv.spec.environment import CollectionSpec, ToolSpec


class Color(enum.IntEnum):
    RED = 1


class Text(str):
    pass


TYPES: list[Any] = [
    str,
    int,
    float,
    bool,
    Any,
    list,
    dict,
    str | None,
    int | float,
    int | None,
    float | None,
    bool | int,
    list | None,
    dict | None,
    Literal["a", "b"],
    Literal[1, 2],
    Literal["a", 1],
    Literal["a", "b"] | None,
    list[int],  # not simple: pydantic's
    dict[str, int],  # not simple: pydantic's
    str | list,  # a union over containers: pydantic's
]
DEFAULTS: list[Any] = [..., ..., None, "a", 0, 1.5, True, []]  # ... = required
VALUES: list[Any] = [
    "a",
    "b",
    "",
    "é",
    "\ud800",
    Text("a"),
    0,
    1,
    2,
    -7,
    10**30,
    True,
    False,
    Color.RED,
    1.5,
    0.0,
    -0.0,
    float("nan"),
    float("inf"),
    None,
    [],
    [1, "a", [2]],
    {},
    {"k": [1]},
    {1: 2},
    (1, 2),
    b"a",
    Decimal("1"),
    {"a"},
]


def _same(a: Any, b: Any) -> bool:
    """Equal values of the same types all the way down (NaN equals NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


BOUNDS: list[dict[str, Any]] = [{}, {}, {}, {"ge": 1}, {"le": 2.5}, {"gt": 0, "lt": 10}]


def _model(rng: random.Random, index: int) -> type | None:
    fields = {}
    for i in range(rng.randint(0, 3)):
        default = rng.choice(DEFAULTS)
        fields[f"f{i}"] = (rng.choice(TYPES), Field(default, **rng.choice(BOUNDS)))
    try:
        return create_model(f"m{index}", __config__=ConfigDict(extra="forbid"), **fields)
    except Exception:  # a bound on a type it cannot apply to: pydantic refuses the model
        return None


def _args(rng: random.Random, names: list[str]) -> dict[Any, Any]:
    args: dict[Any, Any] = {n: rng.choice(VALUES) for n in names if rng.random() < 0.8}
    if rng.random() < 0.1:
        args["extra"] = 1
    if rng.random() < 0.03:
        args[3] = "a key that is not a name"
    return args


def _compare(model: type, fast: FastArgs, args: dict[Any, Any]) -> bool:
    """Check one input; whether the fast path answered it."""
    got = fast(args)
    if got is None:
        return False
    try:
        validated = model.model_validate(args)  # type: ignore[attr-defined]
    except ValidationError as exc:  # pragma: no cover - the failure the test exists for
        raise AssertionError(f"fast path accepted {args!r}, pydantic refused: {exc}") from None
    expected = dict(validated.__dict__)
    assert list(got) == list(expected), args
    for name, value in expected.items():
        assert _same(got[name], value), (args, name, got[name], value)
        if type(value) in (list, dict) and name in args:
            # pydantic copies a bare list/dict one level; so must we (or not, alike).
            assert (got[name] is args[name]) == (value is args[name]), (args, name)
    assert set(args) == validated.model_fields_set
    return True


def test_the_fast_path_gives_what_pydantic_gives_over_many_models_and_inputs() -> None:
    rng = random.Random(12)
    answered = declined = models = 0
    for index in range(600):
        model = _model(rng, index)
        fast = FastArgs.of(model) if model is not None else None
        if fast is None:
            continue
        models += 1
        names = list(model.model_fields)
        for _ in range(40):
            if _compare(model, fast, _args(rng, names)):
                answered += 1
            else:
                declined += 1
    # Not vacuous: most generated models are simple, and many inputs are answered fast.
    assert models > 200 and answered > 2000 and declined > 2000


def test_every_plain_value_of_a_simple_type_is_answered_fast() -> None:
    for kind, value in [
        (str, "x"),
        (int, 5),
        (float, 2.5),
        (bool, False),
        (Any, {"a": [1]}),
        (list, [1]),
        (dict, {"a": 1}),
    ]:
        model = create_model("m", __config__=ConfigDict(extra="forbid"), x=(kind, ...))
        fast = FastArgs.of(model)
        assert fast is not None, kind
        assert _compare(model, fast, {"x": value}), kind


def test_models_that_are_not_simple_have_no_fast_path() -> None:
    forbid = ConfigDict(extra="forbid")
    assert FastArgs.of(create_model("a", x=(str, ...))) is None  # extra keys allowed
    assert FastArgs.of(create_model("b", __config__=forbid, x=(list[int], ...))) is None
    assert FastArgs.of(create_model("c", __config__=forbid, x=(str, Field(min_length=2)))) is None
    assert FastArgs.of(create_model("d", __config__=forbid, x=(str, Field(alias="y")))) is None
    assert FastArgs.of(create_model("e", __config__=forbid, x=(list, Field([])))) is None
    strict = ConfigDict(extra="forbid", strict=True)
    assert FastArgs.of(create_model("f", __config__=strict, x=(int, ...))) is None

    class Checked(create_model("g", __config__=forbid, x=(str, ...))):  # type: ignore[misc]
        @field_validator("x")
        @classmethod
        def upper(cls, v: str) -> str:
            return v.upper()

    assert FastArgs.of(Checked) is None


def test_tools_from_functions_and_crud_documents_take_the_fast_path() -> None:
    @tool
    def send(to: str, count: int = 1, urgent: bool = False, note: str | None = None) -> str:
        """Send."""
        return to

    made = Tool.from_function(send)
    fast = made.fast_args()
    assert fast is not None and fast.flat
    assert fast({"to": "a"}) == {"to": "a", "count": 1, "urgent": False, "note": None}
    assert fast({"to": "a", "count": "2"}) is None  # a coercion: pydantic's to make
    assert made.fast_args() is fast  # made once

    collection = CollectionSpec.model_validate(
        {
            "key": "id",
            "schema": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "status": {"type": "string", "enum": ["open", "closed"]},
                    "score": {"type": "number", "minimum": 0},
                    "tags": {"type": "array"},
                },
                "required": ["id"],
            },
        }
    )
    rng = random.Random(3)
    answered = fast_tools = 0
    for op in ("get", "list", "search", "create", "update", "delete"):
        spec = ToolSpec.model_validate({"name": f"{op}_t", "crud": {"collection": "t", "op": op}})
        made = build_crud_tool(spec, collection)
        fast = made.fast_args()
        if fast is None:
            continue
        fast_tools += 1
        names = list(made.args_model.model_fields)
        for _ in range(300):
            answered += _compare(made.args_model, fast, _args(rng, names))
    assert fast_tools == 6 and answered > 50


@pytest.mark.parametrize("args", [{"x": "1"}, {"x": 1.0}, {"x": True}, {}, {"x": 1, "y": 2}])
def test_what_the_fast_path_declines_gets_pydantics_verdict(args: dict[str, Any]) -> None:
    model = create_model("m", __config__=ConfigDict(extra="forbid"), x=(int, ...))
    fast = FastArgs.of(model)
    assert fast is not None and fast(args) is None


def test_a_pickled_tool_and_its_fast_check_still_tell_required_from_given() -> None:
    import pickle

    @tool
    def send(to: str, count: int = 1) -> str:
        """Send."""
        return to

    made = Tool.from_function(send)
    fast = made.fast_args()
    assert fast is not None
    back = pickle.loads(pickle.dumps(fast))
    assert back({"to": "a"}) == {"to": "a", "count": 1} and back({}) is None
    assert made.__getstate__()["_fast"] is None  # a pickled tool remakes its caches
