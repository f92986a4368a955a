"""Verifier reliability trials (`rollout.trials.run_trials`, one rollout plan): the oracle must pass, a no-op agent and a
partial agent (the oracle's first half) must fail; tasks in bundles written to tmp_path,
and the Harbor example."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.tasks.sandbox_bundles import (
    NO_BWRAP,
    TWO_FILES,
    workspace_task,
    write_workspace_task,
)

from agentenv.rollout.store import RolloutStore
from agentenv.rollout.trials import run_trials
from agentenv.tasks.bundle import Task

pytestmark = pytest.mark.skipif(
    NO_BWRAP is not None, reason=f"bwrap is not available here: {NO_BWRAP}"
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "harbor" / "word-stats"


SEED_ONLY = [{"type": "probe_file_contains", "paths": ["README.md"], "expected": "seed"}]
BOTH_FILES = [{"type": "probe_file_exists", "paths": ["done.txt", "second.txt"]}]


async def test_a_verifier_the_seed_already_satisfies_is_unreliable(tmp_path: Path) -> None:
    task = Task.load(
        write_workspace_task(tmp_path / "b", "always", workspace_task(SEED_ONLY, TWO_FILES))
    )
    (trials,) = await run_trials([task])
    assert trials.task == "b/always"
    assert trials.reliable is False
    assert "a no-op agent passes" in trials.problems
    assert "a partial solution (the oracle's first half) passes" in trials.problems
    assert set(trials.runs) == {"oracle", "noop", "partial"}
    assert all(run.passed for run in trials.runs.values())


async def test_a_verifier_that_needs_the_whole_solution_is_reliable(tmp_path: Path) -> None:
    task = Task.load(
        write_workspace_task(tmp_path / "b", "proper", workspace_task(BOTH_FILES, TWO_FILES))
    )
    (trials,) = await run_trials([task], tmp_path / "out")
    assert trials.problems == []
    assert trials.reliable is True
    runs = trials.runs
    assert (runs["oracle"].passed, runs["oracle"].score) == (True, 1.0)
    assert (runs["noop"].passed, runs["noop"].score) == (False, 0.0)
    assert (runs["partial"].passed, runs["partial"].score) == (False, 0.0)
    # the episodes are one run folder, as `agent-env report` and `export` read it
    records = {r.agent: r for r in RolloutStore(tmp_path / "out").records()}
    assert {a: (r.task, r.passed) for a, r in records.items()} == {
        a: ("b/proper", runs[a].passed) for a in ("oracle", "noop", "partial")
    }


async def test_an_oracle_that_fails_makes_the_task_unreliable(tmp_path: Path) -> None:
    criteria = [{"type": "probe_file_exists", "paths": ["never-written.txt"]}]
    task = Task.load(
        write_workspace_task(tmp_path / "b", "broken", workspace_task(criteria, TWO_FILES))
    )
    (trials,) = await run_trials([task])
    assert trials.reliable is False
    assert [p for p in trials.problems if p.startswith("the oracle fails")]
    assert trials.runs["oracle"].passed is False


async def test_a_task_without_a_solution_cannot_be_tried(tmp_path: Path) -> None:
    task = Task.load(
        write_workspace_task(tmp_path / "b", "unsolved", workspace_task(BOTH_FILES, None))
    )
    (trials,) = await run_trials([task])
    assert trials.reliable is False
    assert trials.problems == ["no reference solution to try"]
    assert trials.runs == {}


async def test_a_solution_that_cannot_be_halved_is_tried_without_the_partial_agent(
    tmp_path: Path,
) -> None:
    one_call = {"calls": TWO_FILES["calls"][:1], "response": "Wrote it."}
    criteria = [{"type": "probe_file_exists", "paths": ["done.txt"]}]
    task = Task.load(
        write_workspace_task(tmp_path / "b", "single", workspace_task(criteria, one_call))
    )
    (trials,) = await run_trials([task])
    assert set(trials.runs) == {"oracle", "noop"}
    assert trials.reliable is True, trials.problems


def test_the_harbor_example_is_reliable() -> None:
    from agentenv.cli.run_command import tasks_of

    (task,) = tasks_of(str(EXAMPLE))
    (trials,) = asyncio.run(run_trials([task]))
    assert trials.problems == []
    assert trials.reliable is True
    assert trials.runs["oracle"].score == 1.0
    assert trials.runs["noop"].passed is False
    assert trials.runs["partial"].passed is False  # half of solve.sh writes no summary


async def test_many_tasks_are_judged_in_the_order_given_from_one_plan(tmp_path: Path) -> None:
    tight = [{"type": "probe_file_exists", "paths": ["done.txt", "second.txt"]}]
    tasks = [
        Task.load(write_workspace_task(tmp_path / "b", "unsolved", workspace_task(tight, None))),
        Task.load(
            write_workspace_task(tmp_path / "b", "loose", workspace_task(SEED_ONLY, TWO_FILES))
        ),
        Task.load(write_workspace_task(tmp_path / "b", "tight", workspace_task(tight, TWO_FILES))),
    ]
    found = await run_trials(tasks, tmp_path / "out", concurrency=4)
    assert [(t.task, t.reliable) for t in found] == [
        ("b/unsolved", False),
        ("b/loose", False),
        ("b/tight", True),
    ]
    plan = RolloutStore(tmp_path / "out").read_plan()
    assert plan is not None and sorted(plan["agents"]) == ["noop", "oracle", "partial"]
    assert len(RolloutStore(tmp_path / "out")) == 6  # the task with no solution is not run
