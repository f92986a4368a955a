"""The runners' fast paths agree with the slow ones they replace: an episode's record line
made without the intermediate record (`records.record_line`) parses to exactly what the
record serialised by the store gives, over every kind of episode (passed, failed, errors,
timeouts, two environments, a conversation, tool access changed mid-task, records that
cannot be serialised or built); tool lists from the per-tool cache equal the ToolClient's;
steps checked once per task and seed are fresh objects equal to freshly built ones; and the
GC settings of a run are undone after it."""

from __future__ import annotations

import asyncio
import gc
import json
from pathlib import Path
from typing import Any

import pytest
from tests.rollout.conftest import TASKS, write_bundle
from tests.rollout.test_poisoned import POISONED

from agentenv.rollout import PlanAgent, RolloutPlan
from agentenv.rollout.episode import EnvironmentCache, _run, run_episode, run_episode_line
from agentenv.rollout.gctune import THRESHOLD, tuned_gc
from agentenv.rollout.records import (
    Finished,
    build_record,
    record_line,
    tools_slow,
    trajectory_json,
    trajectory_rows,
)
from agentenv.rollout.store import record_json
from agentenv.tasks.runner import TaskError, build_steps

ACCESS_TASK = """
name: access
description: The agent's role loses the bump tool half way; the record lists what is left.
steps:
  - {id: env, type: deploy_env, env_id: main, env: counter}
  - {id: agent, type: deploy_agent, agent_name: worker}
  - {id: p1, type: prompt_agent, prompt: "Bump the counter by 3."}
  - {id: revoke, type: modify_env_tool_access, action: disable, role: agent, tools: [bump]}
  - id: check
    type: env_outcome_verifier
    checks:
      - {collection: counters, key: c1, field: value, equals: 3}
solution:
  p1:
    calls:
      - {tool: bump, args: {amount: 3}}
    response: "Bumped."
"""


def finished_episodes(root: Path) -> list[tuple[Finished, EnvironmentCache]]:
    """Every kind of finished episode, each with the cache it ran with."""
    tasks = {**TASKS, "access": ACCESS_TASK}
    bundle = write_bundle(root, tasks=tasks)
    agents = ["oracle", *(PlanAgent.of(name, cls) for name, (cls, _) in POISONED.items())]
    seeds = [{"counter": "c1"}, {"counter": "c2"}]
    plan = RolloutPlan.build([bundle], agents, repeats=2, seeds=seeds)
    cache = EnvironmentCache()

    async def run_all() -> list[Finished]:
        return [
            await _run(plan.tasks[e.task], plan.agents[e.agent], e, cache, 1.0)
            for e in plan.episodes()
        ]

    return [(done, cache) for done in asyncio.run(run_all())]


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[Finished, EnvironmentCache]]:
    return finished_episodes(tmp_path_factory.mktemp("records"))


def without_end(line: str) -> dict[str, Any]:
    data = json.loads(line)
    data.pop("ended_at")
    return data


def test_the_fast_line_is_the_slow_records_line(
    finished: list[tuple[Finished, EnvironmentCache]],
) -> None:
    statuses = set()
    for done, cache in finished:
        try:
            slow_line, written = record_json(build_record(done))
        except Exception as exc:  # an unbuildable record: the caller writes its error
            with pytest.raises(type(exc)):
                record_line(done, tools=cache.tools)
            statuses.add("unbuildable")
            continue
        status, fast = record_line(done, tools=cache.tools)
        assert status == written.status
        assert without_end(fast) == without_end(slow_line), done.episode
        assert fast.startswith('{"episode_id":')
        statuses.add(status)
        rows, calls = trajectory_json(done.ctx)  # the fast path's own pieces, not its fallback
        assert json.loads(rows) == trajectory_rows(done.ctx)
        assert calls == sum(1 for r in trajectory_rows(done.ctx) if r["kind"] == "call")
    assert statuses == {"passed", "failed", "error", "timeout", "unbuildable"}


def test_cached_tool_lists_are_the_tool_clients(
    finished: list[tuple[Finished, EnvironmentCache]],
) -> None:
    seen = set()
    for done, cache in finished:
        assert cache.tools.tools_of(done.ctx) == tools_slow(done.ctx)
        assert json.loads(cache.tools.tools_json(done.ctx)) == tools_slow(done.ctx)
        names = {t["name"] for tools in tools_slow(done.ctx).values() for t in tools}
        if done.episode.task == "counters/access":
            assert "bump" not in names and "get_counter" in names  # access changed mid-task
            seen.add("access")
        if done.episode.task == "counters/two":
            assert "left__bump" in names and "right__get_counter" in names
            seen.add("two")
    assert seen == {"access", "two"}


def test_run_episode_line_writes_what_run_episode_returns(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path, tasks={"bump": TASKS["bump"], "chat": TASKS["chat"]})
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=2)
    for episode in plan.episodes():
        task, agent = plan.tasks[episode.task], plan.agents[episode.agent]
        record = asyncio.run(run_episode(task, agent, episode))
        status, line = asyncio.run(run_episode_line(task, agent, episode))
        assert status == record.status == "passed"

        def timeless(data: Any) -> Any:
            if isinstance(data, dict):
                return {
                    k: timeless(v)
                    for k, v in data.items()
                    if k not in ("started_at", "ended_at", "duration_s", "wall_time", "duration_ms")
                }
            if isinstance(data, list):
                return [timeless(v) for v in data]
            return data

        assert timeless(json.loads(line)) == timeless(json.loads(record_json(record)[0]))


def test_steps_are_checked_once_and_fresh_for_each_episode(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path)
    plan = RolloutPlan.build([bundle], ["oracle"], seeds=[{"counter": "c1"}, {"counter": "c2"}])
    cache = EnvironmentCache()
    task = next(iter(plan.tasks.values()))
    for seed in plan.seeds:
        first, second = cache.steps_for(task, seed), cache.steps_for(task, seed)
        built = build_steps(task.spec, seed)
        assert [type(s) for s in first] == [type(s) for s in built] == [type(s) for s in second]
        assert [s.params for s in first] == [s.params for s in built]
        assert all(a is not b for a, b in zip(first, second, strict=True))
    unknown = task.spec.steps[0].model_copy(update={"type": "no_such_step"})
    broken = task.spec.model_copy(update={"steps": [unknown, *task.spec.steps[1:]]})
    bad = type(task)(spec=broken, name="x", file=task.file)
    with pytest.raises(TaskError) as direct:
        build_steps(bad.spec, {})
    for _ in range(2):
        with pytest.raises(TaskError) as cached:
            cache.steps_for(bad, {})
        assert str(cached.value) == str(direct.value)


def test_the_gc_settings_of_a_run_are_undone_after_it() -> None:
    before = gc.get_threshold()
    gc.unfreeze()  # an earlier test's make_server may have frozen this process's heap
    with tuned_gc():
        assert gc.get_threshold() == THRESHOLD and gc.get_freeze_count() > 0
        with tuned_gc():  # a runner inside a runner shares the setting
            assert gc.get_threshold() == THRESHOLD
        assert gc.get_threshold() == THRESHOLD
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    with tuned_gc(enabled=False):
        assert gc.get_threshold() == before
    gc.freeze()  # frozen by someone else first: theirs stays frozen, and no more is
    kept = [[] for _ in range(1000)]  # tracked objects made since: a run must not freeze them
    frozen = gc.get_freeze_count()
    # Other threads of the process (the children's loop, a server a test left stopping) may
    # free frozen objects meanwhile, so the count can only be bounded: a second freeze would
    # have taken the 1000 lists made since, and more.
    try:
        with tuned_gc():
            assert gc.get_freeze_count() < frozen + len(kept)
            assert gc.get_threshold() == THRESHOLD
        assert gc.get_freeze_count() < frozen + len(kept) and gc.get_threshold() == before
        del kept
    finally:
        gc.unfreeze()
