"""The nesting limit every transport holds JSON to."""

from __future__ import annotations

import json

import pytest

from agentenv.spec.limits import MAX_JSON_DEPTH, raw_too_deep, value_depth_path, value_too_deep


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [1, 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH])
def test_values_up_to_the_limit_pass(depth: int) -> None:
    value = _nested(depth)
    assert not raw_too_deep(json.dumps(value))
    assert not value_too_deep(value)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 500])
def test_values_past_the_limit_are_found_raw_and_parsed(depth: int) -> None:
    value = _nested(depth)
    assert raw_too_deep(json.dumps(value).encode())
    assert value_too_deep(value)


def test_raw_check_needs_no_parser_for_hostile_depths() -> None:
    # 100,000 levels: json.loads itself would raise RecursionError.
    assert raw_too_deep(b"[" * 100_000 + b"]" * 100_000)
    assert raw_too_deep("{" + '"a":{' * 100_000)


def test_brackets_inside_strings_are_not_structure() -> None:
    text = json.dumps({"a": "[" * 500, "b": 'x\\"' + "{" * 500})
    assert not raw_too_deep(text)


def test_wide_documents_are_not_deep() -> None:
    wide = json.dumps([{"id": i, "tags": [str(i)]} for i in range(10_000)])
    assert not raw_too_deep(wide)


def test_the_path_names_where_it_got_too_deep() -> None:
    value = {"outer": [_nested(MAX_JSON_DEPTH)]}
    path = value_depth_path(value)
    assert path is not None and path[:2] == ["outer", 0]
    assert value_depth_path({"outer": [1, 2]}) is None
