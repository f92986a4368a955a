"""The small rules triggers are made of: reading a path, testing a predicate, filling a
template, drawing an interval, and finding when an executor's working hours next open.

Pure functions of their arguments, so the engine and the firer share them and tests can
call them directly.
"""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo

from agentenv.spec.triggers import (
    DAYS,
    ExpInterval,
    ExtractMatch,
    Hours,
    Predicate,
    TimeWhen,
    WherePredicate,
)

MISSING = object()
_SEGMENT = re.compile(r"([^\[\]]*)((?:\[(?:-?\d+|\*)\])*)")
_INDEX = re.compile(r"\[(-?\d+|\*)\]")


def lookup(scope: Any, path: str) -> Any:
    """The value at a dotted path (`result.items.0.id`, or `result.items[0].id`), or MISSING.

    `[*]` means the list itself."""
    node = scope
    for part in path.split("."):
        m = _SEGMENT.fullmatch(part)
        key, indices = (m.group(1), _INDEX.findall(m.group(2))) if m else (part, [])
        if key:
            node = _step(node, key)
            if node is MISSING:
                return MISSING
        for index in indices:
            if index == "*":
                if not isinstance(node, list):
                    return MISSING
                continue
            node = _step(node, index)
            if node is MISSING:
                return MISSING
    return node


def _step(node: Any, part: str) -> Any:
    if isinstance(node, dict):
        return node.get(part, MISSING)
    if (
        isinstance(node, list)
        and part.lstrip("-").isdigit()
        and -len(node) <= int(part) < len(node)
    ):
        return node[int(part)]
    return MISSING


def holds(predicate: Predicate | WherePredicate, value: Any) -> bool:
    """Whether a value passes a predicate, as the protocol tests them: `exists` means present
    and not empty; `regex` searches a string, or any other value's JSON text."""
    if predicate.exists is not None:
        present = value is not MISSING and value not in (None, "", [])
        return present == predicate.exists
    if value is MISSING:
        return False
    if predicate.regex is not None:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return re.search(predicate.regex, text) is not None
    return bool(value == predicate.equals)


def matches(where: list[WherePredicate], scope: dict[str, Any]) -> bool:
    """Whether every `where` predicate holds on a call's `{args, result}`."""
    return all(holds(p, lookup(scope, p.path)) for p in where)


def extract(value: Any, how: str | ExtractMatch | None) -> Any:
    """A check step's `extract` applied to a tool result (MISSING when nothing is there)."""
    if how is None:
        return value
    if isinstance(how, str):
        return lookup(value, how.removeprefix("result."))
    items = lookup(value, how.path.removeprefix("result."))
    if not isinstance(items, list):
        return MISSING
    for item in items:
        if isinstance(item, dict) and all(
            holds(p, item.get(k, MISSING)) for k, p in how.match.items()
        ):
            return item.get(how.take, MISSING) if how.take else item
    return MISSING


def check_value(predicate: Predicate, value: Any, how: str | ExtractMatch | None) -> bool:
    """Apply a check step's `extract` and predicate to a tool result."""
    return holds(predicate, extract(value, how))


_TEMPLATE = re.compile(r"\$\{((?:args|result)(?:\.[^}.]+)*)\}")
_BOUND = re.compile(r"\$\{(\w+)\}")


class TemplateError(ValueError):
    """A `${...}` placeholder with no value in the provoking call."""


def render(value: Any, scope: dict[str, Any], bound: dict[str, Any] | None = None) -> Any:
    """Fill `${args.x}` / `${result.x}` placeholders, and `${name}` from a check's earlier
    `bind` steps; a lone placeholder keeps its type. A `${name}` nothing bound stays as it is."""
    if isinstance(value, str):
        whole = _TEMPLATE.fullmatch(value)
        if whole:
            return _resolve(whole.group(1), scope)
        if bound and (named := _BOUND.fullmatch(value)) and named.group(1) in bound:
            return bound[named.group(1)]
        value = _TEMPLATE.sub(lambda m: str(_resolve(m.group(1), scope)), value)
        if bound:
            value = _BOUND.sub(lambda m: _text(bound.get(m.group(1), m.group(0))), value)
        return value
    if isinstance(value, dict):
        return {k: render(v, scope, bound) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, scope, bound) for v in value]
    return value


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _resolve(path: str, scope: dict[str, Any]) -> Any:
    found = lookup(scope, path)
    if found is MISSING:
        raise TemplateError(f"${{{path}}} has no value in the provoking call")
    return found


# -- time -------------------------------------------------------------------------------------


def add(moment: datetime, delta: timedelta) -> datetime | None:
    """`moment + delta`, or None (never) past the last representable instant."""
    try:
        return moment + delta
    except OverflowError:
        return None


def interval(when: TimeWhen, rng: random.Random) -> timedelta | None:
    """The gap to a recurring time trigger's next occurrence (None for a one-shot)."""
    every = when.every
    if every is None:
        return None
    if isinstance(every, tuple):
        low, high = (x.total_seconds() for x in every)
        return timedelta(seconds=rng.uniform(low, high))
    if isinstance(every, ExpInterval):
        return timedelta(seconds=rng.expovariate(1.0 / every.mean.total_seconds()))
    return every


def _zone(hours: Hours) -> tzinfo:
    if hours.time_zone is not None:
        return ZoneInfo(hours.time_zone)
    offset = hours.utc_offset or "+00:00"
    sign = -1 if offset[0] == "-" else 1
    hh, mm = int(offset[1:3]), int(offset[4:6])
    return timezone(sign * timedelta(hours=hh, minutes=mm))


def next_opening(now: datetime, hours: Hours) -> datetime | None:
    """None while `now` is within the working hours, else the instant they next open.

    A window opens at `start` local time on each listed day and lasts until `end` (the next
    day when `end` is earlier). Local times are turned into instants with the zone's rules
    of that day, so the hours stay at the same local time across a daylight-saving change.
    """
    zone = _zone(hours)
    start, end = _hhmm(hours.start), _hhmm(hours.end)
    today = now.astimezone(zone).date()
    for ahead in range(-1, 9):
        day = today + timedelta(days=ahead)
        if DAYS[day.weekday()] not in hours.days:
            continue
        opens = _instant(day, start, zone)
        closes = _instant(day + timedelta(days=1 if end <= start else 0), end, zone)
        if opens <= now < closes:
            return None
        if opens > now:
            return opens
    return None  # unreachable with a non-empty `days`: some window opens within a week


def _hhmm(text: str) -> time:
    return time(int(text[:2]), int(text[3:5]))


def _instant(day: date, at: time, zone: tzinfo) -> datetime:
    return datetime.combine(day, at, zone).astimezone(UTC)
