"""Numbers in wire bodies are numbers (issue 11, defect 11): `false` is not a clock rate of
0, `true` is not one second, "60" is not 60, and NaN or infinity is no timeout."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agentenv.spec import AdvanceClockBody, SetTimeBody

T0 = "2026-03-02T09:00:00Z"


def _refused_at(model: type[BaseModel], data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    (error,) = info.value.errors(include_url=False)
    return ".".join(str(p) for p in error["loc"])


@pytest.mark.parametrize("rate", [False, True, "60", float("nan"), float("inf"), -1, 86401])
def test_a_clock_rate_must_be_a_number_in_range(rate: Any) -> None:
    data = {"virtual_time": T0, "virtual_seconds_per_real_second": rate}
    assert _refused_at(SetTimeBody, data) == "virtual_seconds_per_real_second"


@pytest.mark.parametrize("rate", [0, 0.5, 60, 86400])
def test_a_clock_rate_in_range_is_taken(rate: float) -> None:
    body = SetTimeBody.model_validate({"virtual_time": T0, "virtual_seconds_per_real_second": rate})
    assert body.virtual_seconds_per_real_second == rate


@pytest.mark.parametrize("seconds", [True, False, "5", float("nan"), float("inf"), 0, -5])
def test_an_advance_must_be_a_positive_number_of_seconds(seconds: Any) -> None:
    assert _refused_at(AdvanceClockBody, {"seconds": seconds}) == "seconds"


def test_an_advance_may_be_an_integer_or_a_float() -> None:
    assert AdvanceClockBody.model_validate({"seconds": 5}).seconds == 5
    assert AdvanceClockBody.model_validate({"seconds": 0.25}).seconds == 0.25
