"""Verifier reliability trials on the rollout machinery: every task with a reference
solution is run by the oracle, the no-op agent and the partial agent as one rollout plan,
into one run folder (`agent-env report` and `export` read it), and each task's three
episodes are judged by `tasks.trials.judge`.

A task whose solution has no first half is still run by the partial agent (a plan is every
task by every agent), but that episode does not count: the verdict names two agents.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from agentenv.agents.oracle import half_of
from agentenv.rollout.episode import DEFAULT_CONCURRENCY
from agentenv.rollout.local import LocalRunner
from agentenv.rollout.plan import RolloutPlan
from agentenv.rollout.progress import Progress
from agentenv.rollout.store import RolloutStore
from agentenv.tasks.bundle import Task
from agentenv.tasks.trials import TRIAL_AGENTS, TaskTrials, TrialRun, judge, untried


def halvable(task: Task) -> bool:
    """Whether the task's solution has a first half for the partial agent to play."""
    return any(half_of(turn.calls) for turn in (task.spec.solution or {}).values())


async def run_trials(
    tasks: Sequence[Task],
    folder: str | Path | None = None,
    *,
    seed: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress: Progress | bool | None = None,
) -> list[TaskTrials]:
    """Each task's trials, in the order given. The episodes go into the run folder
    `folder` (a fresh temporary one when None); `seed` fills the tasks' `<key>`
    placeholders; an episode past `timeout` seconds counts as a `timeout`."""
    tried = [task for task in tasks if task.spec.solution]
    runs: dict[str, dict[str, TrialRun]] = {}
    if tried:
        with tempfile.TemporaryDirectory(prefix="agentenv-trials-") as scratch:
            store = RolloutStore(folder if folder is not None else scratch)
            plan = RolloutPlan.build(tried, TRIAL_AGENTS, seeds=[dict(seed or {})])
            runner = LocalRunner(
                plan,
                store,
                concurrency=concurrency,
                timeout=timeout,
                progress=progress,
                handle_signals=False,
            )
            await runner.run()
            for record in store.records():
                runs.setdefault(record.task, {})[record.agent] = TrialRun(
                    agent=record.agent,
                    status=record.status,
                    score=record.score,
                    passed=record.passed and record.status == "passed",
                    error=record.error,
                )
    verdicts = []
    for task in tasks:
        if not task.spec.solution:
            verdicts.append(untried(task.name))
            continue
        found = runs.get(task.name, {})
        if not halvable(task):
            found.pop("partial", None)
        verdicts.append(judge(task.name, found))
    return verdicts
