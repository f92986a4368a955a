"""Values made up for arguments nothing else can fill: from a parameter's schema (an
enum value, a number in range, a short text that is easy to check for), and fresh keys
shaped like a collection's existing ones."""

from __future__ import annotations

import random
import re
from typing import Any

from agentenv.state import State
from agentenv.synth.schema import Param

_WORDS = [
    "amber",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "garnet",
    "harbor",
    "iris",
    "juniper",
    "kestrel",
    "lagoon",
    "maple",
    "nectar",
    "onyx",
    "prairie",
    "quartz",
    "raven",
    "sierra",
    "tundra",
    "willow",
    "yarrow",
    "zephyr",
    "cobalt",
]


def schema_value(p: Param, rng: random.Random, state: State | None = None) -> Any:
    """A value that fits a parameter's schema, or None when none can be made."""
    enum = p.enum
    if enum:
        return rng.choice(enum)
    types = p.types or frozenset({"string"})
    schema = p.schema
    if "string" in types:
        pattern = p.pattern
        if pattern is not None:
            return _matching_value(pattern, state, rng)
        fmt = schema.get("format")
        if fmt == "email":
            return f"{rng.choice(_WORDS)}.{rng.randint(10, 99)}@example.com"
        if fmt == "date":
            return f"2026-0{rng.randint(1, 9)}-{rng.randint(10, 28)}"
        if fmt == "date-time":
            return f"2026-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T{rng.randint(10, 17)}:00:00Z"
        label = p.name.replace("_", " ").strip().capitalize() or "Text"
        return f"{label} {rng.choice(_WORDS)}-{rng.randint(100, 999)}"
    if "integer" in types or "number" in types:
        low = schema.get("minimum")
        if low is None and schema.get("exclusiveMinimum") is not None:
            low = schema["exclusiveMinimum"] + 1
        low = 1 if low is None else int(low)
        high = schema.get("maximum")
        high = low + 9 if high is None else min(int(high), low + 9)
        return rng.randint(low, max(low, high))
    if "boolean" in types:
        return rng.choice([True, False])
    return None


def _matching_value(pattern: str, state: State | None, rng: random.Random) -> str | None:
    if state is None:
        return None
    try:
        compiled = re.compile(pattern)
    except re.error:
        return None
    found = sorted(
        {
            v
            for coll in state.collections
            for k in state.keys(coll)[:500]
            for v in (state.get(coll, k) or {}).values()
            if isinstance(v, str) and compiled.search(v)
        }
    )
    return rng.choice(found) if found else None


def fresh_key(state: State, collection: str, rng: random.Random) -> Any:
    """A key not taken in a collection, shaped like the ones there (`T-1032` beside
    `T-1031`, `T-1033`): a free number between the smallest and the largest taken (so
    tools that number new records "largest + 1" number them as before), else above."""
    keys = state.keys(collection)
    if not keys:
        return None
    sample = sorted(keys)[0]
    match = re.search(r"(\d+)(?!.*\d)", sample)
    if match is None:
        return f"{sample}-{rng.randint(100, 999)}"
    prefix, width = sample[: match.start()], len(match.group(1))
    suffix = sample[match.end() :]
    numbers = set()
    for k in keys:
        middle = k[len(prefix) : len(k) - len(suffix)]
        if k.startswith(prefix) and k.endswith(suffix) and middle.isdigit():
            numbers.add(int(middle))
    low, high = min(numbers), max(numbers)
    free = [n for n in range(low, high) if n not in numbers]
    number = rng.choice(free) if free else high + 1
    text = f"{prefix}{number:0{width}d}{suffix}"
    record = state.get(collection, keys[0]) or {}
    if isinstance(record.get(state.info(collection).key), int) and text.isdigit():
        return int(text)
    return text
