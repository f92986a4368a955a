"""The protocol's response criteria: response_contains and response_regex_present."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agentenv.grading.response_criteria import RESPONSE_CRITERIA, criteria_rows


def rows(response: str | None, *criteria: dict[str, object]) -> list[dict[str, object]]:
    return criteria_rows(response, RESPONSE_CRITERIA.validate_python(list(criteria)))


def test_response_contains_needs_every_needle() -> None:
    [ok] = rows(
        "order ORD-2, 35.50 left", {"type": "response_contains", "needles": ["ORD-2", "35"]}
    )
    assert ok["result"] is True and ok["score"] == 1.0 and ok["criterion_index"] == 0
    [missing] = rows("order ORD-2", {"type": "response_contains", "needles": ["ORD-2", "35"]})
    assert missing["result"] is False and missing["justification"] == "missing: ['35']"


def test_a_criterion_keeps_its_own_keys_in_its_row() -> None:
    [row] = rows(
        "x", {"type": "response_contains", "needles": ["x"], "criterion": "says x", "weight": 2}
    )
    assert (
        row["criterion"] == "says x" and row["weight"] == 2 and row["type"] == "response_contains"
    )


def test_response_regex_present_defaults_to_dotall_and_takes_flag_names() -> None:
    text = "first line\nSECOND"
    assert rows(text, {"type": "response_regex_present", "pattern": "line.SECOND"})[0]["result"]
    found = rows(
        text, {"type": "response_regex_present", "pattern": "second", "flags": ["IGNORECASE"]}
    )
    assert found[0]["result"] is True
    strict = rows(text, {"type": "response_regex_present", "pattern": "line.SECOND", "flags": []})
    assert strict[0]["result"] is False


def test_no_response_counts_as_empty_text() -> None:
    assert rows(None, {"type": "response_contains", "needles": ["a"]})[0]["result"] is False


@pytest.mark.parametrize(
    ("criterion", "message"),
    [
        ({"type": "response_contains", "needles": []}, "at least 1 item"),
        ({"type": "response_contains"}, "Field required"),
        ({"type": "response_regex_present", "pattern": "("}, "bad regular expression"),
        ({"type": "response_regex_present", "pattern": "a", "flags": ["LOUD"]}, "not a flag"),
        ({"type": "llm_judges_it"}, "does not match any of the expected tags"),
    ],
)
def test_bad_criteria_are_refused(criterion: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        RESPONSE_CRITERIA.validate_python([criterion])
