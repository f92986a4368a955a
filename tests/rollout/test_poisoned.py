"""Rollouts with poisoned episodes: an episode whose record cannot be serialised (a lone
surrogate in the agent's answer, metadata nested hundreds of levels deep, a value that is
not JSON) or cannot even be built is recorded as an error with the reason; every other
episode is recorded exactly once, and resuming runs nothing new."""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from pathlib import Path
from typing import Any

from agentenv.agents import AgentTurn, OracleAgent
from agentenv.rollout import LocalRunner, PlanAgent, RolloutPlan, RolloutStore
from agentenv.rollout.episode import EnvironmentCache, run_episodes
from agentenv.rollout.store import EpisodeRecord


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


class SurrogateAnswer(OracleAgent):
    """Plays the solution, then answers with a lone surrogate."""

    async def run_turn(self, turn: AgentTurn) -> str:
        await super().run_turn(turn)
        return "done \ud800"


class Turn:
    """Per-turn metadata as a token-counting agent keeps it (`turns[-1].to_json()`)."""

    def __init__(self, extra: Any) -> None:
        self.extra = extra

    def to_json(self) -> dict[str, Any]:
        return {"usage": {"prompt_tokens": 5}, "extra": self.extra}


class DeepMetadata(OracleAgent):
    """Keeps per-turn metadata nested 300 levels deep."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    async def run_turn(self, turn: AgentTurn) -> str:
        self.turns.append(Turn(deep(300)))
        return await super().run_turn(turn)


class NotJson:
    pass


class ObjectMetadata(DeepMetadata):
    """Keeps per-turn metadata holding an object that is not JSON."""

    async def run_turn(self, turn: AgentTurn) -> str:
        self.turns.append(Turn(NotJson()))
        return await OracleAgent.run_turn(self, turn)


class NumberAnswer(OracleAgent):
    """Answers with a number, which no prompt record can hold."""

    async def run_turn(self, turn: AgentTurn) -> Any:
        await super().run_turn(turn)
        return 42


POISONED = {
    "surrogate": (SurrogateAnswer, r"record not serialisable: a lone surrogate U\+D800 at \S+"),
    "deep": (
        DeepMetadata,
        r"record not serialisable: JSON nested deeper than 64 levels \(\d+ levels\) at "
        r"usage_by_prompt\.p1\[0\]\.extra\.a\.a",
    ),
    "object": (
        ObjectMetadata,
        r"record not serialisable: a value of type NotJson \(not JSON\) at "
        r"usage_by_prompt\.p1\[0\]\.extra",
    ),
    "number": (NumberAnswer, r"the episode's record cannot be built: PromptEntry: response: "),
}


def poisoned_plan(bundle: Path) -> RolloutPlan:
    agents = ["oracle", *(PlanAgent.of(name, cls) for name, (cls, _) in POISONED.items())]
    task = bundle / "tasks" / "bump.yaml"
    return RolloutPlan.build([task], agents, repeats=3, seeds=[{"counter": "c1"}])


def test_poisoned_episodes_are_errors_and_every_other_episode_is_recorded_once(
    bundle: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "run"
    plan = poisoned_plan(bundle)
    summary = LocalRunner(plan, folder, concurrency=4).run_sync()
    assert (summary.ran, summary.passed, summary.errors) == (15, 3, 12)
    lines = (folder / "episodes.jsonl").read_text(encoding="utf-8").splitlines()
    ids = [json.loads(line)["episode_id"] for line in lines]
    assert sorted(ids) == sorted(e.id for e in plan.episodes())  # each exactly once
    records = list(RolloutStore(folder).records())
    for record in records:
        if record.agent == "oracle":
            assert record.status == "passed" and record.trajectory and record.prompts
            continue
        _, reason = POISONED[record.agent]
        assert record.status == "error" and not record.passed, record.agent
        assert re.search(reason, record.error or ""), record.error
        assert "the episode ended passed" in (record.error or "")
        assert record.task == "counters/bump" and record.seed == {"counter": "c1"}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # resuming reads the store without a complaint
        again = LocalRunner(plan, folder).run_sync()
    assert (again.ran, again.skipped) == (0, 15)
    assert len((folder / "episodes.jsonl").read_text(encoding="utf-8").splitlines()) == 15


def test_retrying_errors_runs_the_poisoned_episodes_again(bundle: Path, tmp_path: Path) -> None:
    folder = tmp_path / "run"
    plan = poisoned_plan(bundle)
    LocalRunner(plan, folder).run_sync()
    retried = LocalRunner(plan, folder, retry_errors=True).run_sync()
    assert (retried.ran, retried.skipped, retried.errors) == (12, 3, 12)
    assert len(RolloutStore(folder)) == 15


def test_a_callback_that_serialises_records_itself_gets_the_stand_in(bundle: Path) -> None:
    """What a Ray worker does: serialise each record in the callback, where it fails."""
    plan = poisoned_plan(bundle)
    lines: list[str] = []
    work = [(plan.tasks[e.task], plan.agents[e.agent], e) for e in plan.episodes()]
    asyncio.run(
        run_episodes(
            work,
            lambda record: lines.append(record.model_dump_json()),
            concurrency=3,
            envs=EnvironmentCache(),
        )
    )
    records = [EpisodeRecord.model_validate_json(line) for line in lines]
    assert sorted(r.episode_id for r in records) == sorted(e.id for e in plan.episodes())
    by_agent: dict[str, set[str]] = {}
    for record in records:
        by_agent.setdefault(record.agent, set()).add(record.status)
    assert by_agent == {"oracle": {"passed"}, **{name: {"error"} for name in POISONED}}
