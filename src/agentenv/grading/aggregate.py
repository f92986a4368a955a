"""Combining verifier scores: all-pass (the default), any-pass, mean, weighted, min, and
the protocol's weighted average (negative weights are penalties)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from agentenv.grading.score import Score
from agentenv.spec.task import TaskSpec

Aggregator = Literal["all_pass", "any_pass", "weighted_average", "mean", "weighted", "min"]
"""`all_pass`, `any_pass` and `weighted_average` are the protocol's `score_aggregator`
values; `mean`, `weighted` and `min` are ours."""
AGGREGATE_STEP = "aggregate_verifiers"


def aggregator_name(value: Any) -> Any:
    """An aggregator as written (`Weighted-Average`) in its canonical spelling."""
    if isinstance(value, str):
        return value.strip().lower().replace("-", "_")
    return value


def weighted_average(pairs: list[tuple[float, float]]) -> float:
    """The protocol's weighted average of (score, weight) pairs: positive weights average
    the scores; a negative weight takes `(1 - score) * |weight|` off; kept in [0, 1]."""
    num = den = penalty = 0.0
    for value, weight in pairs:
        if weight > 0:
            num += value * weight
            den += weight
        elif weight < 0:
            penalty += (1.0 - value) * -weight
    if den == 0:
        return 0.0
    return max(0.0, min(1.0, (num - penalty) / den))


def row_score(row: Mapping[str, Any]) -> float:
    """One result row's score: its `score`, else 1.0 when `result` is true."""
    value = row.get("score")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return 1.0 if row.get("result") is True else 0.0


def aggregate_rows(rows: list[Mapping[str, Any]], how: Aggregator) -> float:
    """A score from per-criterion result rows (`{id, result, score?, weight?}`, the
    protocol's shape); skipped rows do not count; no rows score 0."""
    rows = [r for r in rows if not r.get("skipped")]
    if not rows:
        return 0.0
    if how == "all_pass":
        return 1.0 if all(r.get("result") is True for r in rows) else 0.0
    if how == "any_pass":
        return 1.0 if any(r.get("result") is True for r in rows) else 0.0
    values = [row_score(r) for r in rows]
    if how == "mean":
        return sum(values) / len(values)
    if how == "min":
        return min(values)
    weights = [float(r.get("weight", 1.0)) for r in rows]
    if how == "weighted":
        total = sum(weights)
        return sum(v * w for v, w in zip(values, weights, strict=True)) / total if total else 0.0
    return weighted_average(list(zip(values, weights, strict=True)))


def result_rows(score: Score, verifier_id: str) -> list[dict[str, Any]]:
    """A verifier's per-criterion rows in the protocol's shape, from its Score's details:
    the rows it already has (`results`), its checklist's checks, its rubric's criteria,
    or else one row for the whole verifier."""
    details = score.details
    rows = details.get("results")
    if isinstance(rows, list) and all(isinstance(r, dict) for r in rows):
        return [dict(r) for r in rows]
    checks = details.get("checks")
    if isinstance(checks, list) and all(isinstance(c, dict) and "passed" in c for c in checks):
        return [
            {
                "id": c.get("name", f"check {i}"),
                "result": bool(c["passed"]),
                "score": 1.0 if c["passed"] else 0.0,
                "description": c.get("detail", ""),
            }
            for i, c in enumerate(checks)
        ]
    criteria = details.get("criteria")
    if isinstance(criteria, list) and all(isinstance(c, dict) for c in criteria):
        out = []
        for i, c in enumerate(criteria):
            row = {"id": c.get("id", f"criterion {i}"), "result": bool(c.get("passed"))}
            row["score"] = float(c.get("score", 1.0 if row["result"] else 0.0))
            if "weight" in c:
                row["weight"] = c["weight"]
            out.append(row)
        return out
    return [{"id": verifier_id, "result": score.passed, "score": score.score}]


def finish_verifier(
    score: Score, verifier_id: str, how: Aggregator | None, threshold: float = 1.0
) -> Score:
    """A verifier's Score as the task records it: with its `verifier_id` and result rows,
    and, when a `score_aggregator` is given, the score taken from the rows that way
    (passed: at least `threshold`)."""
    rows = result_rows(score, verifier_id)
    details = {**score.details, "verifier_id": verifier_id, "results": rows}
    if how is None:
        return Score(score=score.score, passed=score.passed, details=details)
    value = aggregate_rows(rows, how)
    details["score_aggregator"] = how
    return Score(score=value, passed=value >= threshold, details=details)


def aggregate(
    scores: Mapping[str, Score],
    how: Aggregator = "all_pass",
    *,
    weights: Mapping[str, float] | None = None,
    threshold: float = 1.0,
) -> Score:
    """One Score from many.

    * `all_pass`: 1.0 when every verifier passed, else 0.0; `any_pass`: when one did;
    * `weighted_average`: the protocol's (see `weighted_average`);
    * `mean`, `min`: of the scores; `weighted`: weighted mean (missing weights count 1);
    * `passed` is `score >= threshold` (all_pass: every verifier passed).
    """
    if not scores:
        return Score(score=0.0, passed=False, details={"error": "no verifier scores"})
    values = {k: s.score for k, s in scores.items()}
    if how == "all_pass":
        ok = all(s.passed for s in scores.values())
        value = 1.0 if ok else 0.0
    elif how == "any_pass":
        value = 1.0 if any(s.passed for s in scores.values()) else 0.0
    elif how == "weighted_average":
        w = weights or {}
        value = weighted_average([(v, w.get(k, 1.0)) for k, v in values.items()])
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
    passed = value >= threshold if how not in ("all_pass", "any_pass") else value == 1.0
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
