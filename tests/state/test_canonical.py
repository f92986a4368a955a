"""The fast canonical JSON, parse and digest against the calls they stand for."""

from __future__ import annotations

import enum
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv.state._canonical import canonical_json, digest, parse_canonical, record_digest

JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(),
        st.floats(allow_nan=False, allow_infinity=False),
        st.text(),  # any code point, lone surrogates and all
    ),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(
            st.one_of(st.text(max_size=4), st.integers(), st.booleans()), children, max_size=4
        ),
    ),
    max_leaves=20,
)


def _dumps(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


@settings(max_examples=500, deadline=None)
@given(JSON)
def test_canonical_json_is_json_dumps_and_parses_back_as_loads(value: Any) -> None:
    try:
        expected: str | Exception = _dumps(value)
    except (TypeError, ValueError) as exc:  # mixed key types cannot be sorted
        expected = exc
    if isinstance(expected, Exception):
        with pytest.raises(type(expected)) as info:
            canonical_json(value)
        assert str(info.value) == str(expected)
        return
    text = canonical_json(value)
    assert text == expected
    assert parse_canonical(text) == json.loads(text)
    assert type(parse_canonical(text)) is type(json.loads(text))


class Colour(enum.IntEnum):
    RED = 1


@pytest.mark.parametrize(
    "value",
    [
        {"x": float("nan")},
        {"x": float("-inf")},
        {"x": {1, 2}},
        {"x": b"bytes"},
        {"x": object()},
        {1: "a", "b": 2},  # keys that do not sort together
        {"e": Colour.RED, Colour.RED: True},
        "top-level text é",
        [1.0, -0.0, 1e16, 2**70],
    ],
)
def test_the_same_output_or_the_same_error(value: Any) -> None:
    try:
        expected = _dumps(value)
    except Exception as exc:
        with pytest.raises(type(exc)) as info:
            canonical_json(value)
        assert str(info.value) == str(exc)
    else:
        assert canonical_json(value) == expected


def test_a_circular_record_is_refused_and_later_records_are_not() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = loop
    for _ in range(3):  # no stale marker from the failed call reaches the next one
        with pytest.raises(ValueError, match="Circular reference detected"):
            canonical_json(loop)
    shared = [1]
    assert canonical_json({"a": shared, "b": shared}) == '{"a":[1],"b":[1]}'


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=6), st.text(max_size=6), st.text(max_size=20))
def test_record_digest_is_digest(collection: str, key: str, text: str) -> None:
    try:
        expected = digest(collection, key, text)
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            record_digest(collection, key, text)
        return
    assert record_digest(collection, key, text) == expected
    assert record_digest(collection, key, text) == expected  # from the cached prefix too
