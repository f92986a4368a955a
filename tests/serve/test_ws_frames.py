"""The WebSocket frames' fast paths agree with the slow ones they skip.

`read_frame` parses a text frame as it is when its brackets cannot nest past the limit;
the bytes path (`_http.parse_json`, REST's parser) is the reference. `step_body` takes
OpenEnv's three-key call_tool as it is; `StepRequest` is the reference. Both are checked
over many inputs: every verdict, value and message must be the same.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv.serve._ws_frames import FrameError, read_frame, step_body, step_request
from agentenv.spec.limits import BODY_DEPTH


def outcome(fn: Any, *args: Any) -> Any:
    """What a call gives: ("ok", value) or ("error", code, kind, message, hint, frame_id)."""
    try:
        return ("ok", fn(*args))
    except FrameError as exc:
        return ("error", exc.code, exc.kind, exc.message, exc.hint, exc.frame_id)


def nested(levels: int, leaf: str = '"x"') -> str:
    return "[" * levels + leaf + "]" * levels


TEXTS = [
    "",
    " ",
    "{",
    "{}",
    "[]",
    "null",
    "1e999",
    "NaN",
    '"step"',
    '{"type": "state"}',
    '{"type": "state", "id": 1}',
    '{"type": "state", "id": "a", "data": null}',
    '{"type": "state", "id": true}',
    '{"type": "state", "id": 2.5}',
    '{"type": "state", "x": 1}',
    '{"type": "nope"}',
    '{"type": "mcp"}',
    '{"type": ["step"]}',
    '{"type": "step", "data": {"type": "call_tool", "tool_name": "t", "arguments": {}}}',
    '{"type": "step", "data": {"type": "call_tool", "tool_name": "t", "arguments": {"a": "\\u00e9\\ud83d\\ude00"}}}',
    '{"type": "step", "data": "\\ud800"}',  # an escaped lone surrogate: valid JSON text
    '{"type": "step", "data": 1' + "0" * 5000 + "}",  # past Python's int digit limit
    '{"type": "step", "id": 1, "data": ' + nested(BODY_DEPTH - 1) + "}",
    '{"type": "step", "id": 1, "data": ' + nested(BODY_DEPTH) + "}",
    '{"type": "step", "id": 1, "data": ' + nested(BODY_DEPTH + 1) + "}",
    '{"type": "step", "data": "' + "[" * (BODY_DEPTH + 5) + '"}',  # brackets in a string
    "[" * (BODY_DEPTH + 1),
    "]" * (BODY_DEPTH + 1),
    '{"a": "unterminated',
    '{"type": "state"} trailing',
    "\u00e9",
    '{"type": "state", "id": "\u00e9\u00e9\u00e9"}',
]


@pytest.mark.parametrize("text", TEXTS)
@pytest.mark.parametrize("limit", [1 << 20, 40, len('{"type": "state", "id": "')])
def test_a_text_frame_gets_the_verdict_of_the_bytes_path(text: str, limit: int) -> None:
    assert outcome(read_frame, text, limit) == outcome(read_frame, text.encode(), limit)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["type", "data", "id", "x", "tool_name"]), children, max_size=4
        )
    ),
    max_leaves=20,
)


@settings(max_examples=500, deadline=None)
@given(value=json_values, cut=st.integers(min_value=0, max_value=200), limit=st.integers(10, 300))
def test_any_text_gets_the_verdict_of_the_bytes_path(value: Any, cut: int, limit: int) -> None:
    text = json.dumps(value, ensure_ascii=False)
    for candidate in (text, text[:cut], text + "]" * (cut % 3), "{" * (cut % 4) + text):
        assert outcome(read_frame, candidate, limit) == outcome(
            read_frame, candidate.encode("utf-8", "surrogatepass"), limit
        )


POOL: list[Any] = ["call_tool", "list_tools", "t", "", 1, None, True, [], {}, {"a": 1}, {"": [1]}]
KEYS = ["type", "tool_name", "arguments", "action", "metadata"]


def step_cases() -> list[dict[str, Any]]:
    cases = []
    for size in range(4):
        for keys in itertools.combinations(KEYS, size):
            for values in itertools.product(POOL, repeat=size):
                cases.append(dict(zip(keys, values, strict=True)))
    cases += [{"type": "call_tool", "tool_name": "t", "arguments": {}, "extra": 1}]
    return cases


def test_the_call_tool_fast_path_agrees_with_step_request() -> None:
    """Over every small combination of keys and values: where the fast path takes a body,
    `StepRequest` takes it too, with the same action, tool and arguments; and `step_body`
    as a whole gives what the model gives."""
    fast_taken = 0
    for data in [*step_cases(), "not an object", None, [1]]:
        reference = outcome(step_request, data, 5)
        if reference[0] == "ok":
            model = reference[1]
            reference = ("ok", (model.action, model.tool_name, model.arguments))
        got = outcome(step_body, data, 5)
        assert got == reference, data
        is_fast = (
            isinstance(data, dict)
            and len(data) == 3
            and data.get("type") == "call_tool"
            and isinstance(data.get("tool_name"), str)
            and bool(data.get("tool_name"))
            and type(data.get("arguments")) is dict
        )
        fast_taken += is_fast
    assert fast_taken > 0  # the fast path was exercised, not only the model
