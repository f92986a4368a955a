"""Verifier reliability trials: does a task's verifier tell done from not done?

Each task is run three times: by the oracle (its reference solution), which must pass; by
a no-op agent (no tool call, no answer), which must fail; and by a partial agent (the
oracle's first half), which must fail. A task whose verifier lets either through, or fails
the oracle, is unreliable. A task with no reference solution cannot be tried (it is
reported so); one whose solution has no first half (a single call that cannot be cut) is
tried with the oracle and the no-op agent only.

This module holds the verdict (`judge`) and its models; `rollout.trials.run_trials` runs
the trials as one rollout plan.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

TRIAL_AGENTS = ("oracle", "noop", "partial")


class TrialRun(BaseModel):
    """One agent's run of a task."""

    agent: str
    status: str
    score: float | None
    passed: bool
    error: str | None = None


class TaskTrials(BaseModel):
    """A task's trials and the verdict on its verifier."""

    task: str
    runs: dict[str, TrialRun] = Field(default_factory=dict)
    reliable: bool
    problems: list[str] = Field(default_factory=list)


def untried(task: str) -> TaskTrials:
    """The verdict on a task with no reference solution: it cannot be tried."""
    return TaskTrials(task=task, reliable=False, problems=["no reference solution to try"])


def judge(task: str, runs: dict[str, TrialRun]) -> TaskTrials:
    """The verdict on a task from its trial runs by agent (`oracle` and `noop`, and
    `partial` when its solution has a first half; `rollout.trials` runs them)."""
    problems = []
    oracle = runs.get("oracle")
    if oracle is None:
        problems.append("the oracle did not run")
    elif not oracle.passed:
        problems.append(f"the oracle fails ({oracle.error or f'score {oracle.score}'})")
    if "noop" in runs and runs["noop"].passed:
        problems.append("a no-op agent passes")
    if "partial" in runs and runs["partial"].passed:
        problems.append("a partial solution (the oracle's first half) passes")
    return TaskTrials(task=task, runs=runs, reliable=not problems, problems=problems)
