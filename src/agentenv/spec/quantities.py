"""Durations in documents and wire bodies, held to what they mean.

pydantic's lax mode takes `true` for one second, and a `timedelta` may be negative or a
ten-thousandth of a second: each of these once got through as a tool's duration, a delay
or a trigger's `every`. These types refuse them where they are parsed, so the error names
the field (`triggers.triggers[0].when.every`):

- no duration is a boolean;
- a `Duration` is never negative, a `PositiveDuration` is more than zero, and an
  `Interval` (how often something repeats) is at least `MIN_INTERVAL`, one millisecond:
  finer than that, a repeating trigger would fire millions of times per virtual hour.

Numbers need no type of their own: their fields say `strict=True` (no boolean, no numeric
string) and, where JSON could not carry the value, `allow_inf_nan=False`.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

MIN_INTERVAL = timedelta(milliseconds=1)
"""The shortest `every` (and mean of a random `every`) a time trigger may have."""


def _duration_not_bool(value: Any) -> Any:
    if isinstance(value, bool):
        raise ValueError(
            f"expected a duration (seconds, or ISO 8601 such as PT5M), not {str(value).lower()}"
        )
    return value


def no_boolean_durations(value: Any) -> Any:
    """A before-validator for a field whose type is a union holding durations (`every`,
    `until`, `delay`): refuse a boolean there or in a list there."""
    items = value if isinstance(value, list | tuple) else (value,)
    for item in items:
        _duration_not_bool(item)
    return value


def _seconds(value: timedelta) -> str:
    return f"{value.total_seconds():g} s"


def non_negative(value: timedelta) -> timedelta:
    """`value`, if it is not negative."""
    if value < timedelta(0):
        raise ValueError(f"must not be negative (got {_seconds(value)})")
    return value


def positive(value: timedelta) -> timedelta:
    """`value`, if it is above zero."""
    if value <= timedelta(0):
        raise ValueError(f"must be a positive duration (got {_seconds(value)})")
    return value


def interval(value: timedelta) -> timedelta:
    """`value`, if it is at least MIN_INTERVAL."""
    positive(value)
    if value < MIN_INTERVAL:
        raise ValueError(f"must be at least 1 ms (got {_seconds(value)})")
    return value


Duration = Annotated[timedelta, BeforeValidator(_duration_not_bool), AfterValidator(non_negative)]
"""A duration of zero or more; not a boolean."""

PositiveDuration = Annotated[
    timedelta, BeforeValidator(_duration_not_bool), AfterValidator(positive)
]
"""A duration above zero; not a boolean."""

Interval = Annotated[timedelta, BeforeValidator(_duration_not_bool), AfterValidator(interval)]
"""How often something repeats: at least MIN_INTERVAL; not a boolean."""


__all__ = [
    "MIN_INTERVAL",
    "Duration",
    "Interval",
    "PositiveDuration",
    "interval",
    "no_boolean_durations",
    "non_negative",
    "positive",
]
