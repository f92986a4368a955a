"""Response checklists: contains, not_contains, regex, JSON fields."""

from __future__ import annotations

import pytest

from agentenv.grading import VerifierError, check_response, extract_json

ANSWER = "Done! Moved $30 from A1 to A2. New balance: 70.\n"


def _passed(score) -> list[bool]:
    return [c["passed"] for c in score.details["checks"]]


def test_contains_and_not_contains() -> None:
    score = check_response(
        ANSWER,
        [
            {"contains": "new balance"},
            {"contains": "new balance", "ignore_case": True},
            {"not_contains": "error"},
            {"not_contains": "DONE", "ignore_case": True},
        ],
    )
    assert _passed(score) == [False, True, True, False]
    assert score.score == 0.5 and not score.passed
    assert score.details["checks"][0]["name"] == "contains 'new balance'"
    assert score.details["checks"][3]["detail"] == "found in the response"


def test_regex() -> None:
    score = check_response(
        ANSWER,
        [
            {"regex": r"balance: \d+"},
            {"regex": r"^done", "ignore_case": True},
            {"name": "cents", "regex": r"\$\d+\.\d\d"},
        ],
    )
    assert _passed(score) == [True, True, False]
    assert score.details["failed"] == ["cents"]


def test_a_bad_regex_is_an_error() -> None:
    with pytest.raises(VerifierError, match=r"response check 0 \(regex\).*bad regular expression"):
        check_response(ANSWER, [{"regex": "(unclosed"}])


@pytest.mark.parametrize(
    "text",
    [
        '{"order": {"id": "O-1", "items": [{"sku": "k1"}]}, "ok": true}',
        'Here it is:\n```json\n{"order": {"id": "O-1", "items": [{"sku": "k1"}]}, "ok": true}\n```',
        'Sure {not json} then {"order": {"id": "O-1", "items": [{"sku": "k1"}]}, "ok": true} bye',
    ],
)
def test_json_fields_wherever_the_json_is(text: str) -> None:
    score = check_response(
        text,
        [
            {"json_field": "order.id", "equals": "O-1"},
            {"json_field": "order.items.0.sku", "equals": "k1"},
            {"json_field": "ok", "equals": True},
            {"json_field": "order"},
            {"json_field": "refund", "exists": False},
        ],
    )
    assert score.passed, score.details


def test_json_field_failures_say_why() -> None:
    score = check_response(
        '{"total": 70}',
        [
            {"json_field": "total", "equals": 80},
            {"json_field": "missing"},
            {"json_field": "total", "exists": False},
        ],
    )
    assert [c["detail"] for c in score.details["checks"]] == [
        "is 70",
        "'missing' is absent",
        "'total' exists",
    ]
    no_json = check_response("plain words", [{"json_field": "a"}])
    assert no_json.details["checks"][0]["detail"] == "no JSON found in the response"


def test_extract_json() -> None:
    assert extract_json(" [1, 2] ") == [1, 2]
    assert extract_json('x {"a": {"b": 1}} y {"c": 2}') == {"a": {"b": 1}}
    with pytest.raises(ValueError):
        extract_json("nothing here {")


def test_python_checks_and_no_response() -> None:
    score = check_response(ANSWER, [("short", lambda t: len(t) < 100), str.isupper])
    assert _passed(score) == [True, False]
    assert score.details["checks"][1]["name"] == "isupper"
    none = check_response(None, [{"not_contains": "x"}, {"contains": "x"}])
    assert _passed(none) == [True, False]
    assert none.details["note"] == "the agent gave no response"


def test_unknown_shapes_are_errors() -> None:
    with pytest.raises(VerifierError, match="has one of 'contains', 'not_contains'"):
        check_response(ANSWER, [{"startswith": "Done"}])
