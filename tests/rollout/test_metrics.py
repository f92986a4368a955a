"""Metrics: pass@k and pass^k against their definitions (counted by brute force), pass
rate and mean score per agent and per task, errors counted as failures, tables and JSON."""

from __future__ import annotations

import io
from itertools import combinations
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentenv.rollout import RolloutStore, compute_metrics, pass_at_k, pass_hat_k
from agentenv.rollout.metrics import default_ks


def brute(results: list[bool], k: int, every: bool) -> float:
    """The share of k-subsets in which any (or every) episode passed."""
    subsets = list(combinations(results, k))
    hits = sum(1 for s in subsets if (all(s) if every else any(s)))
    return hits / len(subsets)


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_pass_at_k_and_pass_hat_k_match_their_definitions(n: int) -> None:
    for c in range(n + 1):
        results = [True] * c + [False] * (n - c)
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(brute(results, k, every=False))
            assert pass_hat_k(n, c, k) == pytest.approx(brute(results, k, every=True))


def test_known_values_and_bad_arguments() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_hat_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(4, 2, 2) == pytest.approx(5 / 6)
    assert pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    assert pass_at_k(5, 0, 3) == 0.0 and pass_hat_k(5, 5, 5) == 1.0
    for n, c, k in [(3, 4, 1), (3, 1, 0), (3, 1, 4), (3, -1, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)
    assert default_ks(1) == [1] and default_ks(8) == [1, 8]


def rec(task: str, agent: str, status: str, score: float | None = None, **more: Any) -> dict:
    passed = status == "passed"
    if score is None and status in ("passed", "failed"):
        score = 1.0 if passed else 0.0
    return {
        "episode_id": f"{task}-{agent}-{more.pop('i', 0)}",
        "task": task,
        "agent": agent,
        "status": status,
        "passed": passed,
        "score": score,
        "seed": more.pop("seed", {}),
        "duration_s": 1.0,
        "calls": 4,
        "usage": more.pop("usage", {}),
    }


def test_slices_per_agent_and_per_task() -> None:
    records = [
        # agent a: task t1 passes 3 of 4; task t2 passes 1 of 4 (one timeout, one error)
        *[rec("t1", "a", s, i=i) for i, s in enumerate(["passed", "passed", "passed", "failed"])],
        *[rec("t2", "a", s, i=i) for i, s in enumerate(["passed", "failed", "timeout", "error"])],
        # agent b: t1 only, half credit twice
        rec("t1", "b", "failed", 0.5, i=0, usage={"prompt_tokens": 10}),
        rec("t1", "b", "failed", 0.5, i=1, usage={"prompt_tokens": 5}),
    ]
    m = compute_metrics(records, ks=[1, 2, 4])
    a = m.agents["a"]
    assert (a.episodes, a.passed, a.failed, a.errors, a.timeouts) == (8, 4, 2, 1, 1)
    assert a.pass_rate == 0.5 and a.mean_score == 0.5 and a.groups == 2
    assert a.pass_at_k[1] == pytest.approx((3 / 4 + 1 / 4) / 2)
    assert a.pass_at_k[2] == pytest.approx((pass_at_k(4, 3, 2) + pass_at_k(4, 1, 2)) / 2)
    assert a.pass_hat_k[2] == pytest.approx((pass_hat_k(4, 3, 2) + 0.0) / 2)
    assert a.pass_at_k[4] == 1.0 and a.pass_hat_k[4] == 0.0
    b = m.agents["b"]
    assert b.mean_score == 0.5 and b.pass_rate == 0.0 and b.usage == {"prompt_tokens": 15}
    assert b.pass_at_k[4] is None and b.pass_hat_k[4] is None  # groups of 2 < k
    assert m.tasks["t2"]["a"].pass_at_k[1] == 0.25 and m.tasks["t2"]["a"].errors == 1
    assert set(m.tasks["t1"]) == {"a", "b"}
    data = m.to_json()
    assert data["k"] == [1, 2, 4] and data["episodes"] == 10
    assert data["agents"]["a"]["pass@k"]["2"] == pytest.approx(a.pass_at_k[2])
    assert data["tasks"]["t1"]["b"]["pass^k"]["4"] is None


def test_seeds_make_separate_groups() -> None:
    records = [
        rec("t", "a", "passed", seed={"x": 1}, i=0),
        rec("t", "a", "passed", seed={"x": 1}, i=1),
        rec("t", "a", "failed", seed={"x": 2}, i=2),
        rec("t", "a", "failed", seed={"x": 2}, i=3),
    ]
    m = compute_metrics(records)
    assert m.ks == [1, 2] and m.agents["a"].groups == 2
    assert m.agents["a"].pass_at_k[2] == 0.5 and m.agents["a"].pass_hat_k[2] == 0.5


def test_a_run_folder_and_its_tables(oracle_run: Path) -> None:
    m = compute_metrics(RolloutStore(oracle_run).records())
    assert m.episodes == 6 and m.ks == [1, 2]
    oracle = m.agents["oracle"]
    assert oracle.pass_rate == pytest.approx(4 / 6) and oracle.pass_at_k[2] == pytest.approx(2 / 3)
    assert m.tasks["counters/wrong"]["oracle"].pass_at_k[2] == 0.0
    same = compute_metrics(RolloutStore(oracle_run).raw_records())  # raw JSON data works too
    assert same.to_json() == m.to_json()
    out = io.StringIO()
    console = Console(file=out, width=200)
    for table in m.tables():
        console.print(table)
    text = out.getvalue()
    assert "by agent" in text and "by task" in text and "pass@2" in text and "pass^2" in text
    assert "counters/wrong" in text and "67%" in text


def test_no_records_no_metrics() -> None:
    m = compute_metrics([])
    assert m.episodes == 0 and m.agents == {} and m.ks == [1]
    with pytest.raises(ValueError, match="at least 1"):
        compute_metrics([], ks=[0])


def test_records_that_cannot_be_counted_are_skipped_with_a_warning() -> None:
    from agentenv.rollout import CorruptRecordWarning

    good = rec("t", "a", "passed", 1.0)
    bad_score = {**rec("t", "a", "passed"), "episode_id": "s", "score": "high"}
    no_task = {k: v for k, v in rec("t", "a", "failed").items() if k != "task"}
    odd_usage = {**rec("t", "a", "failed"), "usage": {"prompt_tokens": "many", "cost": 1.5}}
    with pytest.warns(CorruptRecordWarning) as caught:
        metrics = compute_metrics([good, bad_score, no_task, odd_usage])
    assert metrics.episodes == 2 and metrics.agents["a"].usage == {"cost": 1.5}
    messages = [str(w.message) for w in caught]
    assert any("skipped episode 's'" in m and "could not convert" in m for m in messages)
    assert any("KeyError: 'task'" in m for m in messages)


def test_table_cells_show_names_as_they_are() -> None:
    metrics = compute_metrics([rec("b/[bold]t:100:", "[red]agent", "passed", 1.0)])
    out = io.StringIO()
    console = Console(file=out, width=300, force_terminal=False)
    for table in metrics.tables():
        console.print(table)
    assert "b/[bold]t:100:" in out.getvalue() and "[red]agent" in out.getvalue()
