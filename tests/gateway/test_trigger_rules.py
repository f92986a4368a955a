"""The rules triggers are made of: paths, predicates and an executor's working hours."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from agentenv.gateway.trigger_rules import MISSING, holds, lookup, next_opening
from agentenv.spec import Predicate
from agentenv.spec.triggers import Hours


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def hours(**fields) -> Hours:
    return Hours.model_validate({"start": "09:00", "end": "17:00", **fields})


@pytest.mark.parametrize(
    ("now", "opens"),
    [
        ("2026-03-02T08:59:00+00:00", "2026-03-02T09:00:00+00:00"),  # a Monday, before
        ("2026-03-02T09:00:00+00:00", None),  # open from start
        ("2026-03-02T16:59:00+00:00", None),
        ("2026-03-02T17:00:00+00:00", "2026-03-03T09:00:00+00:00"),  # closed at end
        ("2026-03-06T18:00:00+00:00", "2026-03-09T09:00:00+00:00"),  # Friday night: Monday
    ],
)
def test_working_days_in_utc(now: str, opens: str | None) -> None:
    weekdays = hours(days=["mon", "tue", "wed", "thu", "fri"])
    assert next_opening(at(now), weekdays) == (at(opens) if opens else None)


def test_hours_past_midnight_run_into_the_next_day() -> None:
    night = hours(start="22:00", end="06:00", utc_offset="+01:00")
    assert next_opening(at("2026-03-02T02:00:00+01:00"), night) is None  # Sunday's night
    assert next_opening(at("2026-03-02T12:00:00+01:00"), night) == at("2026-03-02T22:00:00+01:00")


def test_a_time_zone_keeps_local_hours_across_daylight_saving() -> None:
    ny = hours(time_zone="America/New_York")
    # The clocks go forward on 2026-03-08: 09:00 local is 14:00 UTC before, 13:00 after.
    assert next_opening(at("2026-03-06T18:00:00+00:00"), ny) is None  # Friday 13:00 EST
    assert next_opening(at("2026-03-07T22:00:00+00:00"), ny) == at("2026-03-08T13:00:00+00:00")
    assert next_opening(at("2026-03-02T05:00:00+00:00"), ny) == at("2026-03-02T14:00:00+00:00")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"start": "9:00"}, "pattern"),
        ({"end": "24:00"}, "pattern"),
        ({"end": "09:00"}, "'start' equals 'end'"),
        ({"time_zone": "Mars/Olympus"}, "IANA time zone name"),
        ({"time_zone": "UTC", "utc_offset": "+01:00"}, "not both"),
        ({"utc_offset": "+1"}, "pattern"),
        ({"days": []}, "at least 1 item"),
        ({"days": ["monday"]}, "'mon'"),
    ],
)
def test_bad_hours_are_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        hours(**fields)


def test_hours_fill_in_their_defaults() -> None:
    h = hours(days=["fri", "mon"])
    assert (h.utc_offset, h.days) == ("+00:00", ["mon", "fri"])
    assert hours(time_zone="Asia/Tokyo").utc_offset is None


def test_paths_read_dots_and_brackets() -> None:
    scope = {"result": {"items": [{"id": 1}, {"id": 2}]}}
    assert lookup(scope, "result.items.1.id") == lookup(scope, "result.items[1].id") == 2
    assert lookup(scope, "result.items[*]") == [{"id": 1}, {"id": 2}]
    assert lookup(scope, "result.items[5].id") is MISSING


@pytest.mark.parametrize(
    ("value", "expected"), [(MISSING, False), (None, False), ("", False), ([], False), (0, True)]
)
def test_exists_means_present_and_not_empty(value, expected: bool) -> None:
    assert holds(Predicate(exists=True), value) is expected
    assert holds(Predicate(exists=False), value) is not expected
