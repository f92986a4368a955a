"""Token usage a trainer reports for a turn: a dict, an OpenAI `CompletionUsage`, or any
object with `prompt_tokens` / `completion_tokens` / `total_tokens`, made into one shape."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

UsageLike = Mapping[str, Any] | Any
"""What `Turn.end(usage=...)` accepts (see `usage_counters`)."""

_NAMED = ("prompt_tokens", "completion_tokens", "total_tokens")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def usage_counters(usage: UsageLike) -> dict[str, int | float]:
    """The numeric counters of `usage`, by name.

    Accepts a mapping, a pydantic model (an openai `CompletionUsage`: `model_dump()`), a
    dataclass, or any object with the three OpenAI counters as attributes. Counters that
    are None are left out; nested breakdowns (`completion_tokens_details`) are not counters
    and are left out too. `total_tokens` is added as prompt + completion when both are
    given and it is not. A counter that is neither a number nor None is a TypeError naming
    it: a trainer's bookkeeping bug should not become a silent zero.
    """
    if isinstance(usage, Mapping):
        data: Mapping[str, Any] = usage
    elif hasattr(usage, "model_dump"):
        data = usage.model_dump()
    elif dataclasses.is_dataclass(usage) and not isinstance(usage, type):
        data = dataclasses.asdict(usage)
    elif any(hasattr(usage, name) for name in _NAMED):
        data = {name: getattr(usage, name, None) for name in _NAMED}
    else:
        raise TypeError(
            f"usage must be a mapping or have prompt_tokens/completion_tokens, "
            f"got {type(usage).__name__}"
        )
    out: dict[str, int | float] = {}
    for key, value in data.items():
        if value is None or isinstance(value, Mapping) or dataclasses.is_dataclass(value):
            continue
        if hasattr(value, "model_dump"):  # a nested details model
            continue
        if not _number(value):
            raise TypeError(f"usage[{key!r}] must be a number, got {value!r}")
        out[str(key)] = value
    prompt, completion = out.get("prompt_tokens"), out.get("completion_tokens")
    if "total_tokens" not in out and prompt is not None and completion is not None:
        out["total_tokens"] = prompt + completion
    return out
