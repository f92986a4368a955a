"""Combining scores and result rows: ours and the protocol's aggregators."""

from __future__ import annotations

import pytest

from agentenv.grading.aggregate import (
    aggregate,
    aggregate_rows,
    aggregator_name,
    finish_verifier,
    result_rows,
    weighted_average,
)
from agentenv.grading.score import Score

ROWS = [
    {"id": "a", "result": True},
    {"id": "b", "result": False, "weight": 3},
    {"id": "c", "result": True, "score": 0.5},
]


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("all_pass", 0.0),
        ("any_pass", 1.0),
        ("weighted_average", 1.5 / 5),
        ("mean", 1.5 / 3),
        ("min", 0.0),
        ("weighted", 1.5 / 5),
    ],
)
def test_rows_aggregate_every_way(how: str, expected: float) -> None:
    assert aggregate_rows(ROWS, how) == pytest.approx(expected)  # type: ignore[arg-type]


def test_the_protocols_weighted_average_takes_negative_weights_as_penalties() -> None:
    assert weighted_average([(1.0, 1.0), (0.0, -0.5)]) == pytest.approx(0.5)
    assert weighted_average([(1.0, 1.0), (0.0, -5)]) == 0.0  # never below 0
    assert weighted_average([(0.0, -1.0)]) == 0.0  # no positive weight at all


def test_skipped_rows_do_not_count_and_no_rows_score_zero() -> None:
    assert aggregate_rows([{"id": "x", "result": False, "skipped": True}, ROWS[0]], "all_pass") == 1
    assert aggregate_rows([], "any_pass") == 0.0


def test_aggregator_names_are_normalised() -> None:
    assert aggregator_name(" Weighted-Average ") == "weighted_average"


def test_scores_aggregate_with_the_protocols_names_too() -> None:
    scores = {"x": Score(score=1.0, passed=True), "y": Score(score=0.0, passed=False)}
    assert aggregate(scores, "any_pass").score == 1.0
    assert aggregate(scores, "weighted_average", weights={"y": 3}).score == 0.25


def test_result_rows_come_from_a_checklist_a_rubric_or_the_whole_score() -> None:
    checklist = Score(
        score=0.5,
        passed=False,
        details={"checks": [{"name": "one", "passed": True}, {"name": "two", "passed": False}]},
    )
    assert [(r["id"], r["result"]) for r in result_rows(checklist, "v")] == [
        ("one", True),
        ("two", False),
    ]
    rubric = Score(
        score=1.0,
        passed=True,
        details={"criteria": [{"id": "c1", "passed": True, "score": 1.0, "weight": 2}]},
    )
    assert result_rows(rubric, "v") == [{"id": "c1", "result": True, "score": 1.0, "weight": 2}]
    assert result_rows(Score(score=0.3, passed=False), "v") == [
        {"id": "v", "result": False, "score": 0.3}
    ]


def test_finish_verifier_names_it_and_applies_a_given_aggregator() -> None:
    score = Score(score=0.5, passed=False, details={"results": ROWS})
    kept = finish_verifier(score, "mine", None)
    assert (kept.score, kept.details["verifier_id"]) == (0.5, "mine")
    any_pass = finish_verifier(score, "mine", "any_pass")
    assert (
        any_pass.score == 1.0
        and any_pass.passed
        and any_pass.details["score_aggregator"] == ("any_pass")
    )
