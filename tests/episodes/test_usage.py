"""Token usage a trainer reports to `turn.end(usage=...)`: dicts, OpenAI objects, mistakes."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from agentenv.episodes import usage_counters


def test_a_dict_keeps_its_numbers_and_gains_a_total() -> None:
    assert usage_counters({"prompt_tokens": 10, "completion_tokens": 3}) == {
        "prompt_tokens": 10,
        "completion_tokens": 3,
        "total_tokens": 13,
    }
    assert usage_counters({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 5}) == {
        "prompt_tokens": 1,
        "completion_tokens": 1,
        "total_tokens": 5,
    }


def test_an_openai_completion_usage_is_read_without_its_nested_details() -> None:
    openai_types = pytest.importorskip("openai.types")
    usage = openai_types.CompletionUsage(
        prompt_tokens=3,
        completion_tokens=4,
        total_tokens=7,
        completion_tokens_details={"reasoning_tokens": 1},
    )
    assert usage_counters(usage) == {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}


def test_objects_with_the_counters_and_dataclasses_are_read() -> None:
    @dataclass
    class Counted:
        prompt_tokens: int = 2
        completion_tokens: int = 5
        cached_tokens: int | None = None

    assert usage_counters(Counted()) == {
        "prompt_tokens": 2,
        "completion_tokens": 5,
        "total_tokens": 7,
    }
    assert usage_counters(SimpleNamespace(prompt_tokens=1, completion_tokens=None)) == {
        "prompt_tokens": 1
    }


def test_a_counter_that_is_not_a_number_is_named() -> None:
    with pytest.raises(TypeError, match="usage\\['prompt_tokens'\\] must be a number"):
        usage_counters({"prompt_tokens": "12"})
    with pytest.raises(TypeError, match="must be a number"):
        usage_counters({"completion_tokens": True})
    with pytest.raises(TypeError, match="got int"):
        usage_counters(12)
