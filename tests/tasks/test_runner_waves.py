"""The task runner's waves (computed up front) are the generations stdlib graphlib's
TopologicalSorter gives wave by wave, each in task order, over many random DAGs; a cycle
raises graphlib's CycleError."""

from __future__ import annotations

import random
from graphlib import CycleError, TopologicalSorter

import pytest

from agentenv.tasks.runner import TaskRunner


def graphlib_waves(order: list[str], deps: dict[str, list[str]], pending: list[str]) -> list:
    graph = {sid: [d for d in deps[sid] if d in pending] for sid in pending}
    sorter = TopologicalSorter(graph)
    sorter.prepare()
    index = {sid: i for i, sid in enumerate(order)}
    waves = []
    while sorter.is_active():
        wave = sorted(sorter.get_ready(), key=index.__getitem__)
        sorter.done(*wave)
        waves.append(wave)
    return waves


def runner_with(order: list[str], deps: dict[str, list[str]]) -> TaskRunner:
    runner = TaskRunner.__new__(TaskRunner)  # only what _waves reads
    runner.deps = deps
    return runner


def test_waves_are_graphlibs_generations_over_random_dags() -> None:
    rng = random.Random(12)
    for _ in range(500):
        n = rng.randint(1, 14)
        order = [f"s{i}" for i in range(n)]
        shuffled = order[:]
        rng.shuffle(shuffled)  # dependencies need not follow the task order
        deps = {
            sid: [d for d in shuffled[:k] if rng.random() < 0.3] for k, sid in enumerate(shuffled)
        }
        pending = [sid for sid in order if rng.random() < 0.8]
        runner = runner_with(order, deps)
        assert runner._waves(pending) == graphlib_waves(order, deps, pending)


def test_a_cycle_raises_graphlibs_error() -> None:
    runner = runner_with(["a", "b", "c"], {"a": ["c"], "b": ["a"], "c": ["b"]})
    with pytest.raises(CycleError):
        runner._waves(["a", "b", "c"])
