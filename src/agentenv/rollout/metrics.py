"""Metrics of a run: pass rate, mean score, pass@k and pass^k, per agent and per task.

Definitions (docs/metrics.md says the same, with examples):

- An episode *passes* when its task's verifiers say so (`passed`); errors and timeouts
  do not pass. Its *score* is its final reward: the aggregate verifier score; 1 or 0 by
  `passed` when the task has no verifier; 0 for errors and timeouts.
- *pass rate* is passed / episodes; *mean score* the mean of the scores.
- A *group* is one task, one agent and one seed set: the episodes that are repeats of
  each other. With n episodes in a group, c of them passed:
  - pass@k = 1 - C(n-c, k) / C(n, k): the chance that at least one of k episodes drawn
    without replacement from the n passes (the unbiased estimator of Chen et al., 2021,
    "Evaluating Large Language Models Trained on Code");
  - pass^k = C(c, k) / C(n, k): the chance that all k drawn episodes pass (Yao et al.,
    2024, "tau-bench"), a measure of reliability.
  A slice's pass@k and pass^k are the means over its groups with n >= k; groups with
  fewer episodes are left out, and a slice with no such group shows none.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from math import comb
from typing import Any

from agentenv.rollout.jsonsafe import error_text, safe_text
from agentenv.rollout.store import FINISHED_OK, CorruptRecordWarning, EpisodeRecord


def pass_at_k(n: int, c: int, k: int) -> float:
    """The chance that at least one of k of n episodes (c passed) passes."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: the chance that all k of n episodes (c passed) pass."""
    _check(n, c, k)
    return comb(c, k) / comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n (got n={n}, c={c})")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n (got n={n}, k={k})")


def default_ks(max_n: int) -> list[int]:
    """1, and the largest group's size when it is more than 1."""
    return [1, max_n] if max_n > 1 else [1]


@dataclass
class _Row:
    """The fields of a record that metrics use."""

    task: str
    agent: str
    group: str
    status: str
    passed: bool
    reward: float
    duration_s: float
    calls: int
    usage: dict[str, int | float]


def _row(record: EpisodeRecord | dict[str, Any]) -> _Row:
    if isinstance(record, EpisodeRecord):
        data: dict[str, Any] = {
            "task": record.task,
            "agent": record.agent,
            "seed": record.seed,
            "status": record.status,
            "passed": record.passed,
            "duration_s": record.duration_s,
            "calls": record.calls,
            "usage": record.usage,
        }
        reward = record.reward()
    else:
        data = record
        status, score = data.get("status"), data.get("score")
        if status not in FINISHED_OK:
            reward = 0.0
        elif score is None:
            reward = 1.0 if data.get("passed") else 0.0
        else:
            reward = float(score)
    return _Row(
        task=str(data["task"]),
        agent=str(data["agent"]),
        group=json.dumps(data.get("seed") or {}, sort_keys=True),
        status=str(data["status"]),
        passed=bool(data.get("passed")) and data["status"] in FINISHED_OK,
        reward=reward,
        duration_s=float(data.get("duration_s") or 0.0),
        calls=int(data.get("calls") or 0),
        usage=_numbers(data.get("usage")),
    )


def _numbers(usage: Any) -> dict[str, int | float]:
    """The token counters of a record's usage (what is not a number is not a counter)."""
    if not isinstance(usage, dict):
        return {}
    return {
        str(k): v
        for k, v in usage.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def _rows(records: Iterable[EpisodeRecord | dict[str, Any]]) -> list[_Row]:
    """The rows of the records; a record that cannot be one (a missing task, a score that
    is not a number: data an older version or a hand edit left) is skipped with a warning."""
    rows = []
    for record in records:
        try:
            rows.append(_row(record))
        except (KeyError, TypeError, ValueError, OverflowError, RecursionError) as exc:
            key = (
                record.episode_id if isinstance(record, EpisodeRecord) else record.get("episode_id")
            )
            warnings.warn(
                f"metrics: skipped episode {safe_text(str(key))!r}: its record cannot be "
                f"counted ({error_text(exc)})",
                CorruptRecordWarning,
                stacklevel=3,
            )
    return rows


@dataclass
class SliceMetrics:
    """The metrics of one slice of a run (an agent, or one task for one agent)."""

    episodes: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    timeouts: int = 0
    pass_rate: float = 0.0
    mean_score: float = 0.0
    mean_duration_s: float = 0.0
    mean_calls: float = 0.0
    groups: int = 0
    pass_at_k: dict[int, float | None] = field(default_factory=dict)
    pass_hat_k: dict[int, float | None] = field(default_factory=dict)
    usage: dict[str, int | float] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: Sequence[_Row], ks: Sequence[int]) -> SliceMetrics:
        """The metrics of these episodes."""
        out = cls(episodes=len(rows))
        groups: dict[tuple[str, str, str], list[bool]] = {}
        for row in rows:
            if row.passed:
                out.passed += 1
            elif row.status in FINISHED_OK:
                out.failed += 1
            elif row.status == "timeout":
                out.timeouts += 1
            else:
                out.errors += 1
            for key, value in row.usage.items():
                out.usage[key] = out.usage.get(key, 0) + value
            groups.setdefault((row.task, row.agent, row.group), []).append(row.passed)
        n = len(rows)
        if n:
            out.pass_rate = out.passed / n
            out.mean_score = sum(r.reward for r in rows) / n
            out.mean_duration_s = sum(r.duration_s for r in rows) / n
            out.mean_calls = sum(r.calls for r in rows) / n
        out.groups = len(groups)
        for k in ks:
            at, hat = [], []
            for results in groups.values():
                if len(results) >= k:
                    at.append(pass_at_k(len(results), sum(results), k))
                    hat.append(pass_hat_k(len(results), sum(results), k))
            out.pass_at_k[k] = sum(at) / len(at) if at else None
            out.pass_hat_k[k] = sum(hat) / len(hat) if hat else None
        return out

    def to_json(self) -> dict[str, Any]:
        """The metrics as JSON data (`pass@k` and `pass^k` keyed by k)."""
        return {
            "episodes": self.episodes,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "pass_rate": self.pass_rate,
            "mean_score": self.mean_score,
            "pass@k": {str(k): v for k, v in self.pass_at_k.items()},
            "pass^k": {str(k): v for k, v in self.pass_hat_k.items()},
            "groups": self.groups,
            "mean_duration_s": self.mean_duration_s,
            "mean_calls": self.mean_calls,
            "usage": self.usage,
        }


@dataclass
class RunMetrics:
    """A run's metrics: per agent (over all its tasks) and per task per agent."""

    ks: list[int]
    agents: dict[str, SliceMetrics]
    tasks: dict[str, dict[str, SliceMetrics]]
    episodes: int

    def to_json(self) -> dict[str, Any]:
        """The metrics as JSON data."""
        return {
            "episodes": self.episodes,
            "k": self.ks,
            "agents": {a: m.to_json() for a, m in self.agents.items()},
            "tasks": {
                t: {a: m.to_json() for a, m in by_agent.items()}
                for t, by_agent in self.tasks.items()
            },
        }

    def tables(self) -> list[Any]:
        """Rich tables: one row per agent, then one row per task and agent."""
        from rich.table import Table
        from rich.text import Text  # names as they are: `[x]` and `:100:` are not markup

        def columns(table: Any, first: list[str]) -> None:
            for name in first:
                table.add_column(name)
            for name in ("n", "pass", "score"):
                table.add_column(name, justify="right")
            for k in self.ks:
                table.add_column(f"pass@{k}", justify="right")
            for k in self.ks:
                table.add_column(f"pass^{k}", justify="right")
            table.add_column("err", justify="right")
            table.add_column("calls", justify="right")
            table.add_column("s/ep", justify="right")

        def cells(m: SliceMetrics) -> list[str]:  # numbers only: no markup in them
            return [
                str(m.episodes),
                f"{m.pass_rate:.0%}",
                f"{m.mean_score:.2f}",
                *[_pct(m.pass_at_k.get(k)) for k in self.ks],
                *[_pct(m.pass_hat_k.get(k)) for k in self.ks],
                str(m.errors + m.timeouts),
                f"{m.mean_calls:.1f}",
                f"{m.mean_duration_s:.2f}",
            ]

        by_agent = Table(title="by agent")
        columns(by_agent, ["agent"])
        for agent, m in self.agents.items():
            by_agent.add_row(Text(agent), *cells(m))
        by_task = Table(title="by task")
        columns(by_task, ["task", "agent"])
        for task, agents in self.tasks.items():
            for agent, m in agents.items():
                by_task.add_row(Text(task), Text(agent), *cells(m))
        return [by_agent, by_task]


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def compute_metrics(
    records: Iterable[EpisodeRecord | dict[str, Any]], ks: Sequence[int] | None = None
) -> RunMetrics:
    """Metrics of records (EpisodeRecords or their JSON data; one per episode).

    `ks` defaults to 1 and the largest group's size (the repeats of a full plan)."""
    rows = _rows(records)
    groups: dict[tuple[str, str, str], int] = {}
    for row in rows:
        key = (row.task, row.agent, row.group)
        groups[key] = groups.get(key, 0) + 1
    if ks is None:
        ks = default_ks(max(groups.values(), default=1))
    ks = sorted(set(ks))
    if any(k < 1 for k in ks):
        raise ValueError("every k must be at least 1")
    by_agent: dict[str, list[_Row]] = {}
    by_task: dict[str, dict[str, list[_Row]]] = {}
    for row in rows:
        by_agent.setdefault(row.agent, []).append(row)
        by_task.setdefault(row.task, {}).setdefault(row.agent, []).append(row)
    return RunMetrics(
        ks=list(ks),
        agents={a: SliceMetrics.of(r, ks) for a, r in sorted(by_agent.items())},
        tasks={
            t: {a: SliceMetrics.of(r, ks) for a, r in sorted(agents.items())}
            for t, agents in sorted(by_task.items())
        },
        episodes=len(rows),
    )
