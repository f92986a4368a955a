"""Combining verifier scores: all-pass (the default), mean, weighted, min."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from agentenv.grading.score import Score
from agentenv.spec.task import TaskSpec

Aggregator = Literal["all_pass", "mean", "weighted", "min"]
AGGREGATE_STEP = "aggregate_verifiers"


def aggregate(
    scores: Mapping[str, Score],
    how: Aggregator = "all_pass",
    *,
    weights: Mapping[str, float] | None = None,
    threshold: float = 1.0,
) -> Score:
    """One Score from many.

    * `all_pass`: 1.0 when every verifier passed, else 0.0;
    * `mean`, `min`: of the scores; `weighted`: weighted mean (missing weights count 1);
    * `passed` is `score >= threshold` (all_pass: every verifier passed).
    """
    if not scores:
        return Score(score=0.0, passed=False, details={"error": "no verifier scores"})
    values = {k: s.score for k, s in scores.items()}
    if how == "all_pass":
        ok = all(s.passed for s in scores.values())
        value = 1.0 if ok else 0.0
    elif how == "mean":
        value = sum(values.values()) / len(values)
    elif how == "min":
        value = min(values.values())
    else:
        w = {k: (weights or {}).get(k, 1.0) for k in values}
        total = sum(w.values())
        if total <= 0:
            return Score(score=0.0, passed=False, details={"error": "weights sum to zero"})
        value = sum(values[k] * w[k] for k in values) / total
    passed = value >= threshold if how != "all_pass" else value == 1.0
    return Score(
        score=value,
        passed=passed,
        details={"aggregator": how, "threshold": threshold, "scores": values},
    )


def aggregate_task(task: TaskSpec, scores: Mapping[str, Score]) -> tuple[float | None, bool]:
    """A task's score: its last `aggregate_verifiers` step's, else all-pass over its
    verifiers; None when no verifier ran."""
    aggregators = [s.id for s in task.steps if s.type == AGGREGATE_STEP and s.id in scores]
    if aggregators:
        final = scores[aggregators[-1]]
        return final.score, final.passed
    if not scores:
        return None, True
    final = aggregate(scores, "all_pass")
    return final.score, final.passed
