"""Gold replay: the reference solution replayed on a fork, compared by state hash."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.grading import (
    ReplayEnv,
    VerifierError,
    compare_states,
    gold_replay,
    gold_replay_envs,
    replay,
)
from agentenv.spec.task import SolutionCall

ENV = """
apiVersion: agentenv/v1
kind: Environment
name: bank
roles: [{name: agent}, {name: supervisor}]
default_role: agent
clock: {start: "2026-03-02T09:00:00Z", mode: stepped}
state:
  accounts: {}
  log: {}
seed:
  accounts:
    - {id: a1, balance: 100}
    - {id: a2, balance: 50}
tools:
  - module: tools.py
"""

TOOLS = '''
from agentenv import ToolContext, ToolError, tool


@tool(duration=60)
def transfer(ctx: ToolContext, source: str, target: str, amount: int) -> dict:
    """Move money between accounts."""
    src = ctx.state.require("accounts", source)
    if src["balance"] < amount:
        raise ToolError("insufficient funds")
    dst = ctx.state.require("accounts", target)
    ctx.state.update("accounts", source, {"balance": src["balance"] - amount})
    ctx.state.update("accounts", target, {"balance": dst["balance"] + amount})
    return {"moved": amount}


@tool(duration=60)
def note(ctx: ToolContext, text: str) -> dict:
    """Write a log line stamped with the virtual time."""
    return ctx.state.put("log", {"id": text, "at": ctx.now.isoformat()})


@tool(roles=["supervisor"])
def freeze(ctx: ToolContext, account_id: str) -> dict:
    """Freeze an account (supervisors only)."""
    return ctx.state.update("accounts", account_id, {"frozen": True})
'''

AGENT = Principal("agent", name="ada")
GOLD = [
    {"tool": "transfer", "args": {"source": "a1", "target": "a2", "amount": 30}},
    {"tool": "note", "args": {"text": "moved"}},
]


@pytest.fixture
def env(tmp_path: Path) -> Environment:
    folder = tmp_path / "bank"
    folder.mkdir()
    (folder / "env.yaml").write_text(textwrap.dedent(ENV))
    (folder / "tools.py").write_text(textwrap.dedent(TOOLS))
    return Environment.load(folder)


@pytest.fixture
def gateway(env: Environment) -> Gateway:
    return Gateway(env)


async def _act(gateway: Gateway, calls: list[dict]) -> None:
    for call in calls:
        result = await gateway.call(AGENT, call["tool"], call["args"])
        assert result.ok, result.text


async def test_the_same_actions_score_one(gateway: Gateway) -> None:
    initial = gateway.instance().state.snapshot()
    await _act(gateway, GOLD)
    score = await gold_replay(gateway, initial, GOLD, gateway.instance().state, principal=AGENT)
    assert score.score == 1.0 and score.passed
    assert score.details["match"] and "diff" not in score.details
    assert score.details["calls"] == 2
    assert gateway.instances == ["default"]  # the fork is gone


async def test_different_actions_score_zero_with_a_readable_diff(gateway: Gateway) -> None:
    initial = gateway.instance().state.snapshot()
    await _act(
        gateway, [{"tool": "transfer", "args": {"source": "a1", "target": "a2", "amount": 20}}]
    )
    score = await gold_replay(gateway, initial, GOLD, gateway.instance().state, principal="agent")
    assert score.score == 0.0 and not score.passed
    diff = score.details["diff"]
    assert diff.splitlines()[0] == "expected -> actual (- missing, + unexpected, ~ changed):"
    assert "~ accounts[a1].balance: 70 -> 80" in diff
    assert "~ accounts[a2].balance: 80 -> 70" in diff
    assert "- log[moved]" in diff
    env = score.details["envs"]["env"]
    assert env["expected_hash"] != env["actual_hash"]
    assert gateway.instances == ["default"]


async def test_reference_calls_run_as_the_agent_role(gateway: Gateway) -> None:
    initial = gateway.instance().state.snapshot()
    gold = [{"tool": "freeze", "args": {"account_id": "a1"}}]
    as_agent = await gold_replay(gateway, initial, gold, initial, principal="agent")
    assert as_agent.passed  # denied on replay too, so nothing changed on either side
    assert as_agent.details["failed_reference_calls"] == [
        {"index": 0, "tool": "freeze", "ok": False, "error": "role 'agent' may not call 'freeze'"}
    ]
    as_supervisor = await gold_replay(gateway, initial, gold, initial, principal="supervisor")
    assert not as_supervisor.passed
    assert "~ accounts[a1].frozen: True -> '<absent>'" in as_supervisor.details["diff"]


async def test_the_clock_is_set_where_the_agent_started(gateway: Gateway) -> None:
    await gateway.advance_clock(SYSTEM, timedelta(hours=2))
    started = gateway.clock_time()
    initial = gateway.instance().state.snapshot()
    await _act(gateway, GOLD)
    actual = gateway.instance().state
    stale = await gold_replay(gateway, initial, GOLD, actual, principal=AGENT)
    assert not stale.passed  # the fork's clock starts at the document's start
    assert (
        "log[moved].at: '2026-03-02T09:01:00+00:00' -> '2026-03-02T11:01:00+00:00'"
        in (stale.details["diff"])
    )
    timed = await gold_replay(gateway, initial, GOLD, actual, principal=AGENT, clock_at=started)
    assert timed.passed, timed.details


async def test_several_environments_route_like_the_agent(env: Environment) -> None:
    left, right = Gateway(env), Gateway(env)
    gold = [
        SolutionCall(
            tool="transfer", args={"source": "a1", "target": "a2", "amount": 5}, env_id="left"
        ),
        {"tool": "right__transfer", "args": {"source": "a2", "target": "a1", "amount": 7}},
    ]
    envs = {
        "left": ReplayEnv(left, left.instance().state.snapshot()),
        "right": ReplayEnv(right, right.instance().state.snapshot()),
    }
    outcome = await replay(envs, gold, principal=AGENT)
    assert outcome.failed_calls == []
    assert outcome.finals["left"].to_dict()["accounts"][0]["balance"] == 95
    assert outcome.finals["right"].to_dict()["accounts"][0]["balance"] == 107

    await left.call(AGENT, "transfer", {"source": "a1", "target": "a2", "amount": 5})
    envs["left"].actual = left.instance().state
    envs["right"].actual = right.instance().state  # the agent never touched it
    both = await gold_replay_envs(envs, gold, principal=AGENT)
    assert not both.passed
    assert both.details["envs"]["left"]["match"] and not both.details["envs"]["right"]["match"]
    assert both.details["diff"].startswith("[right] expected -> actual (")
    only_left = await gold_replay_envs(envs, gold, principal=AGENT, compare=["left"])
    assert only_left.passed
    assert left.instances == ["default"] and right.instances == ["default"]


async def test_errors(gateway: Gateway) -> None:
    initial = gateway.instance().state.snapshot()
    with pytest.raises(VerifierError, match="nothing to compare"):
        await gold_replay_envs({"e": ReplayEnv(gateway, initial)}, GOLD, principal=AGENT)
    with pytest.raises(VerifierError, match="no environment 'x'"):
        await gold_replay_envs(
            {"e": ReplayEnv(gateway, initial, initial)}, GOLD, principal=AGENT, compare=["x"]
        )
    with pytest.raises(VerifierError, match="reference call 0"):
        await gold_replay(gateway, initial, [{"args": {}}], initial)


def test_compare_states_caps_the_diff(env: Environment) -> None:
    a = env.new_state()
    b = a.fork()
    for i in range(30):
        b.put("log", {"id": f"l{i}"})
    out = compare_states(a, b, max_lines=10)
    lines = out["diff"].splitlines()
    assert len(lines) == 11 and lines[-1] == "... and 20 more"
    assert compare_states(a, a.fork()) == {
        "match": True,
        "expected_hash": a.hash(),
        "actual_hash": a.hash(),
    }
