"""The local runner: bounded concurrency, fresh environments per episode, per-episode
timeouts, errors recorded and the run going on, blocking tools off the event loop, resume,
a clean stop, progress and token usage."""

from __future__ import annotations

import asyncio
import io
import json
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentenv.agents import AgentTurn, OracleAgent
from agentenv.env.environment import Environment
from agentenv.rollout import (
    LocalRunner,
    PlanAgent,
    RichProgress,
    RolloutPlan,
    RolloutStore,
)


class HangingAgent:
    name = "hang"

    async def run_turn(self, turn: AgentTurn) -> str:
        await asyncio.sleep(3600)
        return "never"


class RaisingAgent:
    name = "boom"

    async def run_turn(self, turn: AgentTurn) -> str:
        raise RuntimeError("agent exploded")


class CountingAgent(OracleAgent):
    """The oracle, counting how many episodes are inside a turn at once."""

    active = 0
    most = 0

    async def run_turn(self, turn: AgentTurn) -> str:
        type(self).active += 1
        type(self).most = max(type(self).most, type(self).active)
        try:
            await asyncio.sleep(0.01)
            return await super().run_turn(turn)
        finally:
            type(self).active -= 1


class NappingAgent(OracleAgent):
    """Calls the blocking `nap` tool first (time.sleep inside), then the solution."""

    async def run_turn(self, turn: AgentTurn) -> str:
        result = await turn.tools.call("nap", {"seconds": 0.3})
        assert result.ok, result.text
        return await super().run_turn(turn)


class SlowAgent(OracleAgent):
    async def run_turn(self, turn: AgentTurn) -> str:
        await asyncio.sleep(0.02)
        return await super().run_turn(turn)


class UsageAgent(OracleAgent):
    def __init__(self) -> None:
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0, "note": "ignored"}

    async def run_turn(self, turn: AgentTurn) -> str:
        self.usage["prompt_tokens"] += 100
        self.usage["completion_tokens"] += 7
        return await super().run_turn(turn)


class TurnUsage:
    """What token-counting agents (the openai agent) keep per prompt, in `turns`."""

    def __init__(self, prompt_id: str) -> None:
        self.prompt_id = prompt_id

    def to_json(self) -> dict[str, Any]:
        usage = {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
        return {"prompt_id": self.prompt_id, "model": "m", "usage": usage}


class TurnsAgent(OracleAgent):
    def __init__(self) -> None:
        self.turns: list[TurnUsage] = []

    async def run_turn(self, turn: AgentTurn) -> str:
        self.turns.append(TurnUsage(turn.prompt_id))
        return await super().run_turn(turn)


def run(plan: RolloutPlan, folder: Path, **options: Any) -> Any:
    return LocalRunner(plan, folder, **options).run_sync()


def test_every_episode_runs_once_in_a_fresh_environment(bundle: Path, tmp_path: Path) -> None:
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=4)
    summary = run(plan, tmp_path / "run", concurrency=8)
    assert (summary.ran, summary.passed, summary.failed, summary.errors) == (8, 4, 4, 0)
    records = list(RolloutStore(tmp_path / "run").records())
    assert sorted(r.episode_id for r in records) == sorted(e.id for e in plan.episodes())
    bump = [r for r in records if r.task == "counters/bump"]
    # each starts from the seed (counter at 0), so each ends at exactly 3 and passes
    assert all(r.status == "passed" and r.score == 1.0 for r in bump)
    assert all(r.status == "failed" and not r.passed for r in records if r.task.endswith("wrong"))
    one = bump[0]
    assert one.calls == 4 and one.agent == "oracle" and one.seed == {}
    assert [row["tool"] for row in one.trajectory] == ["bump", "bump", "bump", "get_counter"]
    assert one.trajectory[1]["error"]["kind"] == "tool_error"  # amount -5 was refused
    assert {row["env_id"] for row in one.trajectory} == {"main"}
    assert one.prompts[0].prompt == "Bump counter c1 by 3."  # seed placeholder filled
    assert one.prompts[0].system_prompt == "You are careful."
    assert one.prompts[0].response == "Done: the counter is 3."
    assert one.prompts[0].start_seq == {"main": 0} and one.prompts[0].end_seq == {"main": 4}
    assert {t["name"] for t in one.tools["worker"]} == {"bump", "nap", "get_counter"}
    assert [s["id"] for s in one.steps] == ["env", "agent", "p1", "check"]
    assert one.scores["check"].passed and one.duration_s > 0 and one.worker
    assert (tmp_path / "run" / "plan.json").is_file()


def test_resume_runs_only_what_is_missing(bundle: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    assert run(RolloutPlan.build([bundle], ["oracle"], repeats=2), folder).ran == 4
    again = run(RolloutPlan.build([bundle], ["oracle"], repeats=2), folder)
    assert (again.ran, again.skipped) == (0, 4)
    more = run(RolloutPlan.build([bundle], ["oracle"], repeats=3), folder)
    assert (more.ran, more.skipped, more.planned) == (2, 4, 6)
    lines = (folder / "episodes.jsonl").read_text().splitlines()
    ids = [json.loads(line)["episode_id"] for line in lines]
    assert len(ids) == len(set(ids)) == 6


def test_concurrency_is_bounded(bundle: Path, tmp_path: Path) -> None:
    CountingAgent.active = CountingAgent.most = 0
    plan = RolloutPlan.build([bundle], [PlanAgent.of("counting", CountingAgent)], repeats=6)
    summary = run(plan, tmp_path / "run", concurrency=3)
    assert summary.ran == 12
    assert CountingAgent.most == 3


def test_hangs_and_exceptions_are_recorded_and_the_run_goes_on(
    bundle: Path, tmp_path: Path
) -> None:
    agents = [PlanAgent.of("hang", HangingAgent), PlanAgent.of("boom", RaisingAgent), "oracle"]
    plan = RolloutPlan.build([bundle / "tasks" / "bump.yaml"], agents, repeats=2)
    started = time.perf_counter()
    summary = run(plan, tmp_path / "run", concurrency=6, timeout=0.5)
    assert time.perf_counter() - started < 5
    assert (summary.timeouts, summary.errors, summary.passed) == (2, 2, 2)
    records = {r.agent: r for r in RolloutStore(tmp_path / "run").records()}
    hung = records["hang"]
    assert hung.status == "timeout" and not hung.passed and hung.score is None
    assert hung.error == "the episode took longer than 0.5 s (still running: p1)"
    assert [s["status"] for s in hung.steps] == ["succeeded", "succeeded", "running", "pending"]
    assert hung.prompts[0].error == "CancelledError"
    boom = records["boom"]
    assert boom.status == "error" and "RuntimeError: agent exploded" in (boom.error or "")
    assert boom.reward() == 0.0
    assert records["oracle"].status == "passed"


def test_an_episode_whose_environment_is_missing_is_an_error(bundle: Path, tmp_path: Path) -> None:
    (bundle / "tasks" / "lost.yaml").write_text(
        "steps:\n  - {id: env, type: deploy_env, env_id: main, env: nowhere}\n"
    )
    plan = RolloutPlan.build([bundle / "tasks" / "lost.yaml"], ["oracle"])
    assert run(plan, tmp_path / "run").errors == 1
    (only,) = RolloutStore(tmp_path / "run").records()
    assert only.status == "error" and "no environment 'nowhere'" in (only.error or "")


def test_blocking_tools_run_off_the_event_loop(bundle: Path, tmp_path: Path) -> None:
    plan = RolloutPlan.build(
        [bundle / "tasks" / "bump.yaml"], [PlanAgent.of("nap", NappingAgent)], repeats=6
    )
    started = time.perf_counter()
    summary = run(plan, tmp_path / "run", concurrency=6)
    elapsed = time.perf_counter() - started
    assert summary.passed == 6
    assert elapsed < 6 * 0.3 * 0.6, f"naps ran one after another ({elapsed:.2f} s)"


def test_environments_load_once_per_plan(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loads: list[Path] = []
    real = Environment.load.__func__  # type: ignore[attr-defined]

    def counting(cls: type[Environment], path: Any) -> Environment:
        loads.append(Path(path))
        return real(cls, path)

    monkeypatch.setattr(Environment, "load", classmethod(counting))
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=5)
    runner = LocalRunner(plan, tmp_path / "run", concurrency=4)
    assert runner.run_sync().ran == 10
    assert len(loads) == 1 and len(runner.envs) == 1


class StopAfter:
    """A Progress that stops the runner after n episodes."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.runner: LocalRunner | None = None
        self.started: tuple[int, int] | None = None
        self.statuses: list[str] = []
        self.stopped = False

    def start(self, total: int, done: int) -> None:
        self.started = (total, done)

    def advance(self, status: str) -> None:
        self.statuses.append(status)
        if len(self.statuses) == self.n and self.runner is not None:
            self.runner.stop()

    def stop(self) -> None:
        self.stopped = True


def test_stop_keeps_what_finished_and_resume_finishes(bundle: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    plan = RolloutPlan.build([bundle], [PlanAgent.of("slow", SlowAgent)], repeats=20)
    progress = StopAfter(5)
    runner = LocalRunner(plan, folder, concurrency=2, progress=progress)
    progress.runner = runner
    summary = runner.run_sync()
    assert summary.interrupted and progress.stopped
    assert progress.started == (40, 0)
    assert 5 <= summary.ran < 40 and summary.remaining == 40 - summary.ran
    assert len(RolloutStore(folder)) == summary.ran == len(progress.statuses)
    after = StopAfter(10_000)
    rest = LocalRunner(plan, folder, concurrency=8, progress=after).run_sync()
    assert after.started == (40, summary.ran)
    assert not rest.interrupted and rest.ran == 40 - summary.ran
    ids = [
        json.loads(x)["episode_id"] for x in (folder / "episodes.jsonl").read_text().splitlines()
    ]
    assert sorted(ids) == sorted(e.id for e in plan.episodes())


def test_errors_can_be_retried_and_the_new_record_wins(bundle: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    task = bundle / "tasks" / "bump.yaml"
    flaky = RolloutPlan.build([task], [PlanAgent.of("agent", RaisingAgent)], repeats=2)
    assert run(flaky, folder).errors == 2
    fixed = RolloutPlan.build([task], [PlanAgent.of("agent", OracleAgent)], repeats=2)
    assert run(fixed, folder).ran == 0  # errors are done unless retried
    assert run(fixed, folder, retry_errors=True).passed == 2
    store = RolloutStore(folder)
    assert [r.status for r in store.records()] == ["passed", "passed"]
    assert len(list(store.records(latest=False))) == 4


def test_token_usage_is_summed_per_episode(bundle: Path, tmp_path: Path) -> None:
    (bundle / "tasks" / "wrong.yaml").unlink()
    plan = RolloutPlan.build([bundle], [PlanAgent.of("counted", UsageAgent)], repeats=2)
    run(plan, tmp_path / "run")
    usages = [r.usage for r in RolloutStore(tmp_path / "run").records()]
    assert usages == [{"prompt_tokens": 100, "completion_tokens": 7}] * 2


def test_token_usage_recorded_per_turn_is_summed(bundle: Path, tmp_path: Path) -> None:
    plan = RolloutPlan.build([bundle / "tasks" / "bump.yaml"], [PlanAgent.of("t", TurnsAgent)])
    run(plan, tmp_path / "run")
    (record,) = RolloutStore(tmp_path / "run").records()
    assert record.usage == {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    assert record.usage_by_prompt["p1"][0]["agent"] == "worker"
    assert record.usage_by_prompt["p1"][0]["usage"]["prompt_tokens"] == 11


def test_the_rich_progress_bar_shows_counts_and_rate(bundle: Path, tmp_path: Path) -> None:
    out = io.StringIO()
    bar = RichProgress(Console(file=out, width=200, force_terminal=False), description="go")
    run(RolloutPlan.build([bundle], ["oracle"], repeats=2), tmp_path / "run", progress=bar)
    text = out.getvalue()
    assert "go" in text and "4/4" in text and "2 passed" in text and "2 failed" in text
    assert "ep/s" in text and "ETA" in text


def test_bad_runner_numbers(bundle: Path, tmp_path: Path) -> None:
    plan = RolloutPlan.build([bundle], ["oracle"])
    with pytest.raises(ValueError, match="concurrency"):
        LocalRunner(plan, tmp_path, concurrency=0)
