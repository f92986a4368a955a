"""The episode SDK: turns handed to a trainer, polled, ended, and closed with their step;
what a finished episode gives a trainer (trajectory, chat messages, usage, scores, final
state); episodes sharing one EnvironmentCache, and many at once.

Most tests run a small bundle written to tmp_path: a bank environment and its tasks.
"""

from __future__ import annotations

import asyncio
import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from agentenv import EnvironmentCache, EpisodeSpec, Task
from agentenv.episodes import default_cache
from agentenv.rollout.exporters import get_exporter

BANK_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: bank
roles: [{name: agent}]
state:
  accounts: {}
seed:
  accounts:
    - {id: a1, owner: Ada, balance: 100}
tools:
  - module: bank_tools.py
"""

BANK_TOOLS = '''
from agentenv import ToolContext, tool


@tool(duration=0)
def deposit(ctx: ToolContext, account_id: str, amount: int) -> dict:
    """Add money to an account."""
    account = ctx.state.require("accounts", account_id)
    return ctx.state.update("accounts", account_id, {"balance": account["balance"] + amount})
'''

UNTOUCHED = """
  - id: check
    type: env_outcome_verifier
    env_id: bank
    checks:
      - {name: a1 untouched, collection: accounts, key: a1, field: balance, equals: 100}
"""

# The solver's prompt times out while its driver still holds the turn.
SLOW = (
    """
steps:
  - {id: d, type: deploy_env, env_id: bank, env: bank}
  - {id: a, type: deploy_agent, agent_name: solver, role: agent}
  - {id: p, type: prompt_agent, prompt: go, timeout_seconds: 0.2, fail_task_on_error: false}
"""
    + UNTOUCHED
)

# A helper agent (played by the test) is asked first; the solver's turn comes after it.
GATED = """
steps:
  - {id: d, type: deploy_env, env_id: bank, env: bank}
  - {id: h, type: deploy_agent, agent_name: helper, role: agent}
  - {id: first, type: prompt_agent, agent_name: helper, prompt: wait}
  - {id: a, type: deploy_agent, agent_name: solver, role: agent}
  - {id: main, type: prompt_agent, agent_name: solver, prompt: deposit 5 into a1}
"""

PLAIN = """
steps:
  - {id: d, type: deploy_env, env_id: bank, env: bank}
  - {id: a, type: deploy_agent, agent_name: solver, role: agent}
  - {id: p, type: prompt_agent, prompt: go}
"""

# One prompt with a system prompt; a verifier that wants 5 deposited.
SCORED = """
steps:
  - {id: d, type: deploy_env, env_id: bank, env: bank}
  - {id: a, type: deploy_agent, agent_name: solver, role: agent}
  - {id: p, type: prompt_agent, prompt_id: main, prompt: deposit 5 into a1, system_prompt: You are a teller.}
  - id: check
    type: env_outcome_verifier
    env_id: bank
    checks:
      - {name: a1 got 5, collection: accounts, key: a1, field: balance, equals: 105}
"""

# Two prompts for the same agent: two turns.
TWICE = """
steps:
  - {id: d, type: deploy_env, env_id: bank, env: bank}
  - {id: a, type: deploy_agent, agent_name: solver, role: agent}
  - {id: one, type: prompt_agent, prompt: deposit 1}
  - {id: two, type: prompt_agent, prompt: deposit 2}
"""


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bund"
    env = root / "envs" / "bank"
    env.mkdir(parents=True)
    (env / "env.yaml").write_text(textwrap.dedent(BANK_ENV))
    (env / "bank_tools.py").write_text(textwrap.dedent(BANK_TOOLS))
    tasks = root / "tasks"
    tasks.mkdir()
    for name, text in (
        ("slow", SLOW),
        ("gated", GATED),
        ("plain", PLAIN),
        ("scored", SCORED),
        ("twice", TWICE),
    ):
        (tasks / f"{name}.yaml").write_text(text)
    return root


class Helper:
    """An agent that answers once the test opens its gate."""

    name = "helper"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.gate = asyncio.Event()

    async def run_turn(self, turn) -> str:
        self.started.set()
        await self.gate.wait()
        return "done"


def balance(episode) -> int:
    return episode.context.envs["bank"].state.get("accounts", "a1")["balance"]


async def test_a_poll_that_times_out_before_the_first_turn_loses_no_turn(bundle: Path) -> None:
    helper = Helper()
    spec = EpisodeSpec.from_task(
        Task.load(bundle / "tasks" / "gated.yaml"),
        agent_name="solver",
        agents={"helper": helper},
        turn_timeout=60,
    )
    episode = await spec.start()
    await asyncio.wait_for(helper.started.wait(), 30)  # no turn for the solver yet
    with pytest.raises(TimeoutError):  # a trainer polling with a short timeout
        await asyncio.wait_for(episode.next_turn(), 0.001)
    helper.gate.set()

    turn = await asyncio.wait_for(episode.next_turn(), 30)
    assert turn is not None
    assert (turn.prompt_id, turn.prompt) == ("main", "deposit 5 into a1")
    async with turn.tools() as tools:
        assert (await tools.call("deposit", {"account_id": "a1", "amount": 5})).ok
    await turn.end("Deposited.")
    assert await asyncio.wait_for(episode.next_turn(), 30) is None
    result = await asyncio.wait_for(episode.result(), 30)
    assert result.status == "passed", result.error
    assert balance(episode) == 105


async def test_a_turn_whose_step_timed_out_is_ended_and_its_tools_refuse(bundle: Path) -> None:
    episode = await EpisodeSpec.from_task(Task.load(bundle / "tasks" / "slow.yaml")).start()
    turn = await asyncio.wait_for(episode.next_turn(), 30)
    assert turn is not None and not turn.ended
    async with turn.tools() as tools:
        # The driver is still busy when the step gives up on it; the task goes on.
        result = await asyncio.wait_for(episode.result(), 30)
        assert [(s.id, s.status) for s in result.steps][-2:] == [
            ("p", "timeout"),
            ("check", "succeeded"),
        ]
        assert turn.ended
        state = episode.context.envs["bank"].state
        before = (state.hash(), state.changes)
        late = await tools.call("deposit", {"account_id": "a1", "amount": 7})
    assert not late.ok
    assert late.error is not None and "turn has ended" in late.error.message
    assert "turn has ended" in late.text
    assert (state.hash(), state.changes) == before
    assert balance(episode) == 100
    assert episode.context.envs["bank"].gateway.instance().trajectory.calls() == []
    with pytest.raises(RuntimeError, match="this turn has ended"):
        async with turn.tools():
            pass
    await turn.end("too late", usage={"prompt_tokens": 7, "completion_tokens": 1})  # harmless
    assert episode.usage == {"prompt_tokens": 7, "completion_tokens": 1, "total_tokens": 8}


async def test_a_turn_that_was_ended_takes_no_more_calls(bundle: Path) -> None:
    episode = await EpisodeSpec.from_task(Task.load(bundle / "tasks" / "plain.yaml")).start()
    turn = await asyncio.wait_for(episode.next_turn(), 30)
    assert turn is not None
    async with turn.tools() as tools:
        assert [t.name for t in tools.list_tools()] == ["deposit"]
        assert (await tools.call("deposit", {"account_id": "a1", "amount": 1})).ok
        await turn.end("Done.")
        assert turn.ended
        late = await tools.call("deposit", {"account_id": "a1", "amount": 1})
    assert not late.ok and "turn has ended" in late.error.message
    result = await asyncio.wait_for(episode.result(), 30)
    assert result.status == "passed", result.error
    assert balance(episode) == 101


async def deposit_turns(episode, amounts: list[list[int]], usages: list) -> None:
    """Play each turn: deposit its amounts into a1, answer, report its usage."""
    for amounts_now, usage in zip(amounts, usages, strict=True):
        turn = await asyncio.wait_for(episode.next_turn(), 30)
        assert turn is not None
        async with turn.tools() as tools:
            for amount in amounts_now:
                assert (await tools.call("deposit", {"account_id": "a1", "amount": amount})).ok
        await turn.end(f"Deposited {sum(amounts_now)}.", usage=usage)
    assert await asyncio.wait_for(episode.next_turn(), 30) is None
    await asyncio.wait_for(episode.result(), 30)


async def test_a_driven_episode_gives_its_trajectory_and_the_chat_an_llm_saw(bundle: Path) -> None:
    episode = await EpisodeSpec.from_task(Task.load(bundle / "tasks" / "scored.yaml")).start()
    await deposit_turns(episode, [[2, 3]], [{"prompt_tokens": 40, "completion_tokens": 9}])

    calls = [r for r in episode.trajectory() if r["kind"] == "call"]
    assert [(r["env_id"], r["tool"], r["args"]) for r in calls] == [
        ("bank", "deposit", {"account_id": "a1", "amount": 2}),
        ("bank", "deposit", {"account_id": "a1", "amount": 3}),
    ]
    assert all(r["session"] == "main" and r["principal"] == "solver" for r in calls)

    messages = episode.messages()
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert messages[0]["content"] == "You are a teller."
    assert messages[1]["content"] == "deposit 5 into a1"
    first = messages[2]["tool_calls"][0]
    assert first["type"] == "function" and first["function"]["name"] == "deposit"
    assert json.loads(first["function"]["arguments"]) == {"account_id": "a1", "amount": 2}
    assert messages[3]["tool_call_id"] == first["id"]
    assert json.loads(messages[5]["content"])["balance"] == 105  # what the agent read
    assert messages[-1] == {"role": "assistant", "content": "Deposited 5."}
    assert messages == episode.messages("solver")
    assert [t["function"]["name"] for t in episode.openai_tools()] == ["deposit"]

    record = episode.record(agent="my-model")
    assert (record.status, record.agent, record.calls) == ("passed", "my-model", 2)
    assert record.trajectory == episode.trajectory()
    (line,) = get_exporter("sft-chat").documents(record)  # what the exported line would hold
    assert (line["messages"], line["tools"]) == (messages, episode.openai_tools())


async def test_usage_is_recorded_per_turn_and_summed(bundle: Path) -> None:
    episode = await EpisodeSpec.from_task(Task.load(bundle / "tasks" / "twice.yaml")).start()
    openai_like = SimpleNamespace(prompt_tokens=30, completion_tokens=4, total_tokens=34)
    await deposit_turns(
        episode, [[1], [2]], [{"prompt_tokens": 10, "completion_tokens": 2}, openai_like]
    )
    by_prompt = episode.usage_by_prompt
    assert by_prompt == {
        "one": [
            {
                "agent": "solver",
                "turn": 0,
                "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
            }
        ],
        "two": [
            {
                "agent": "solver",
                "turn": 0,
                "usage": {"prompt_tokens": 30, "completion_tokens": 4, "total_tokens": 34},
            }
        ],
    }
    assert episode.usage == {"prompt_tokens": 40, "completion_tokens": 6, "total_tokens": 46}
    record = episode.record()
    assert record.usage == episode.usage and record.usage_by_prompt == by_prompt
    assert len(episode.messages()) == 8  # two turns: user, call, result, answer each


async def test_scores_by_verifier_and_the_final_state_reflect_the_calls(bundle: Path) -> None:
    episode = await EpisodeSpec.from_task(Task.load(bundle / "tasks" / "scored.yaml")).start()
    await deposit_turns(episode, [[5]], [None])
    result = await episode.result()
    assert (result.status, result.score) == ("passed", 1.0)
    check = result.scores["check"]
    assert (check.score, check.passed) == (1.0, True)
    checks = check.details["parts"]["state"]["details"]["checks"]
    assert checks == [{"name": "a1 got 5", "passed": True}]
    assert episode.final_state() == {
        "bank": {"accounts": [{"id": "a1", "owner": "Ada", "balance": 105}]}
    }
    assert episode.usage == {} and episode.usage_by_prompt == {}


async def test_episodes_sharing_a_cache_load_the_environment_once(bundle: Path) -> None:
    cache = EnvironmentCache()
    task = Task.load(bundle / "tasks" / "scored.yaml")
    for _ in range(20):
        episode = await EpisodeSpec.from_task(task, cache=cache).start()
        await deposit_turns(episode, [[5]], [None])
        assert (await episode.result()).passed
        assert balance(episode) == 105  # each episode its own instance of the loaded env
    assert len(cache) == 1
    assert EpisodeSpec.from_task(task).environment_cache() is default_cache()
    assert EpisodeSpec.from_task(task, cache=False).environment_cache() is None
    fresh = await EpisodeSpec.from_task(task, cache=False).start()
    await deposit_turns(fresh, [[5]], [None])
    assert (await fresh.result()).passed and len(cache) == 1


async def test_twenty_concurrent_episodes_of_the_flagship_task_all_pass() -> None:
    task = Task.get("support-desk/resolve-billing")
    solution = task.spec.solution["main"]

    async def one():
        episode = await EpisodeSpec.from_task(task, turn_timeout=60).start()
        while (turn := await episode.next_turn()) is not None:
            async with turn.tools() as tools:
                for call in solution.calls:
                    result = await tools.call(call.tool, call.args)
                    assert result.ok, result.text
            await turn.end(solution.response, usage={"prompt_tokens": 1, "completion_tokens": 1})
        return episode, await episode.result()

    done = await asyncio.wait_for(asyncio.gather(*(one() for _ in range(20))), 120)
    assert [r.status for _, r in done] == ["passed"] * 20
    for episode, _ in done:
        tickets = {t["id"]: t for t in episode.final_state()["desk"]["tickets"]}
        assert tickets["T-1042"]["status"] == "closed"
        refunds = episode.final_state()["desk"]["refunds"]
        assert [r["amount"] for r in refunds if r["ticket_id"] == "T-1042"] == [98.0]
        assert episode.usage["total_tokens"] == 2


async def test_a_task_loaded_anew_per_episode_does_not_grow_the_cache(bundle: Path) -> None:
    import gc
    import weakref

    cache = EnvironmentCache(max_tasks=2)
    kept = []
    for _ in range(5):
        task = Task.load(bundle / "tasks" / "scored.yaml")  # a new Task object each time
        kept.append(weakref.ref(task))
        episode = await EpisodeSpec.from_task(task, cache=cache).start()
        await deposit_turns(episode, [[5]], [None])
        assert (await episode.result()).passed
        del task, episode
    gc.collect()
    assert [ref() is None for ref in kept] == [True, True, True, False, False]
    assert len(cache) == 1
