"""Verifier reliability trials: does a task's verifier tell done from not done?

Each task is run three times: by the oracle (its reference solution), which must pass; by
a no-op agent (no tool call, no answer), which must fail; and by a partial agent (the
oracle's first half), which must fail. A task whose verifier lets either through, or fails
the oracle, is unreliable. A task with no reference solution cannot be tried (it is
reported so); one whose solution has no first half (a single call that cannot be cut) is
tried with the oracle and the no-op agent only.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from agentenv.agents import make_agent
from agentenv.agents.oracle import half_of
from agentenv.tasks.bundle import Task
from agentenv.tasks.run_folder import run_to_folder

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


async def run_trials(
    task: Task,
    folder: Path | None = None,
    *,
    seed: dict[str, Any] | None = None,
    timeout: float | None = None,
) -> TaskTrials:
    """Run a task's trials (run folders under `folder/<agent>/` when given), with `seed`
    for its `<key>` placeholders; a run past `timeout` seconds counts as a `timeout`."""
    if not task.spec.solution:
        return TaskTrials(task=task.name, reliable=False, problems=["no reference solution to try"])
    agents = ["oracle", "noop"]
    if any(half_of(turn.calls) for turn in task.spec.solution.values()):
        agents.append("partial")
    runs: dict[str, TrialRun] = {}
    for name in agents:
        where = folder / name / task.name.replace("/", "__") if folder else None
        try:
            async with asyncio.timeout(timeout or None):
                _, result = await run_to_folder(
                    task, lambda request, n=name: make_agent(n), where, seed=seed
                )
        except TimeoutError:
            took = f"the run took longer than {timeout:g} s"
            runs[name] = TrialRun(
                agent=name, status="timeout", score=None, passed=False, error=took
            )
            continue
        runs[name] = TrialRun(
            agent=name,
            status=result.status,
            score=result.score,
            passed=bool(result.passed) and result.status == "passed",
            error=result.error,
        )
    problems = []
    oracle = runs["oracle"]
    if not oracle.passed:
        problems.append(f"the oracle fails ({oracle.error or f'score {oracle.score}'})")
    if runs["noop"].passed:
        problems.append("a no-op agent passes")
    if "partial" in runs and runs["partial"].passed:
        problems.append("a partial solution (the oracle's first half) passes")
    return TaskTrials(task=task.name, runs=runs, reliable=not problems, problems=problems)
