"""The episode SDK: turns handed to a trainer, polled, ended, and closed with their step.

Each test runs a small bundle written to tmp_path: a bank environment and its tasks.
"""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from agentenv import EpisodeSpec, Task

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


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bund"
    env = root / "envs" / "bank"
    env.mkdir(parents=True)
    (env / "env.yaml").write_text(textwrap.dedent(BANK_ENV))
    (env / "bank_tools.py").write_text(textwrap.dedent(BANK_TOOLS))
    tasks = root / "tasks"
    tasks.mkdir()
    for name, text in (("slow", SLOW), ("gated", GATED), ("plain", PLAIN)):
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
    await turn.end("too late")  # harmless


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
