"""Trajectory checklists over the records a real Gateway wrote."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.gateway import TrajectoryRecord
from agentenv.grading import VerifierError, calls_of, check_trajectory, records_between

ENV = """
apiVersion: agentenv/v1
kind: Environment
name: bank
roles: [{name: agent}, {name: supervisor}]
default_role: agent
state:
  accounts: {}
seed:
  accounts:
    - {id: a1, balance: 100}
    - {id: a2, balance: 50}
tools:
  - module: tools.py
  - name: get_account
    crud: {collection: accounts, op: get}
"""

TOOLS = '''
from agentenv import ToolContext, ToolError, tool


@tool
def transfer(ctx: ToolContext, source: str, target: str, amount: int) -> dict:
    """Move money between accounts."""
    src = ctx.state.require("accounts", source)
    if src["balance"] < amount:
        raise ToolError("insufficient funds")
    dst = ctx.state.require("accounts", target)
    ctx.state.update("accounts", source, {"balance": src["balance"] - amount})
    ctx.state.update("accounts", target, {"balance": dst["balance"] + amount})
    return {"moved": amount}


@tool(roles=["supervisor"])
def freeze(ctx: ToolContext, account_id: str) -> dict:
    """Freeze an account (supervisors only)."""
    return ctx.state.update("accounts", account_id, {"frozen": True})
'''

AGENT = Principal("agent", name="ada")


@pytest.fixture
def gateway(tmp_path: Path) -> Gateway:
    (tmp_path / "env.yaml").write_text(textwrap.dedent(ENV))
    (tmp_path / "tools.py").write_text(textwrap.dedent(TOOLS))
    return Gateway(Environment.load(tmp_path))


@pytest.fixture
async def records(gateway: Gateway) -> list[TrajectoryRecord]:
    await gateway.call(AGENT, "get_account", {"id": "a1"}, session="p1")
    await gateway.call(
        AGENT, "transfer", {"source": "a1", "target": "a2", "amount": 30}, session="p1"
    )
    await gateway.call(
        AGENT, "transfer", {"source": "a2", "target": "a1", "amount": 999}, session="p1"
    )
    await gateway.call(AGENT, "freeze", {"account_id": "a1"}, session="p1")
    return list(gateway.instance().trajectory)


def _results(score) -> dict[str, bool]:
    return {c["name"]: c["passed"] for c in score.details["checks"]}


async def test_called_and_not_called(records: list[TrajectoryRecord]) -> None:
    score = check_trajectory(
        records,
        [
            {"called": "get_account"},
            {"called": "transfer", "args": {"source": "a1", "amount": 30}},
            {"called": "transfer", "min_times": 2},
            {"called": "transfer", "max_times": 1},
            {"called": "transfer", "only_ok": True, "max_times": 1},
            {"not_called": "delete_account"},
            {"not_called": "transfer", "args": {"amount": 5}},
            {"not_called": "freeze"},
        ],
    )
    assert _results(score) == {
        "called get_account": True,
        "called transfer(source='a1', amount=30)": True,
        "called transfer": True,
        "called transfer#2": False,
        "called transfer#3": True,
        "never called delete_account": True,
        "never called transfer(amount=5)": True,
        "never called freeze": False,
    }
    assert score.score == pytest.approx(6 / 8)
    assert score.details["calls"] == 4
    assert score.details["checks"][3]["detail"] == "called 2 time(s)"


async def test_a_missing_call_shows_what_was_called_instead(
    records: list[TrajectoryRecord],
) -> None:
    score = check_trajectory(records, [{"called": "transfer", "args": {"target": "a9"}}])
    detail = score.details["checks"][0]["detail"]
    assert detail.startswith("called 0 time(s); calls of 'transfer' had args {")
    assert "'source': 'a1'" in detail


async def test_order_is_a_subsequence(records: list[TrajectoryRecord]) -> None:
    score = check_trajectory(
        records,
        [
            {"order": ["get_account", "transfer"]},
            {"order": ["get_account", {"tool": "transfer", "args": {"amount": 999}}]},
            {"order": ["transfer", "get_account"]},
            {"name": "ok only", "order": ["transfer", "transfer"], "only_ok": True},
        ],
    )
    assert [c["passed"] for c in score.details["checks"]] == [True, True, False, False]
    assert score.details["checks"][2]["detail"] == (
        "matched 1 of 2; get_account not found "
        "(calls: get_account -> transfer -> transfer -> freeze)"
    )


async def test_limits(records: list[TrajectoryRecord]) -> None:
    score = check_trajectory(
        records,
        [
            {"max_calls": 4},
            {"max_calls": 3},
            {"max_denied": 0},
            {"max_denied": 1},
            {"max_errors": 0},
            {"max_errors": 1},
        ],
    )
    assert [c["passed"] for c in score.details["checks"]] == [
        True,
        False,
        False,
        True,
        False,
        True,
    ]
    assert score.details["checks"][2]["detail"] == "1: freeze"
    assert "insufficient funds" in score.details["checks"][4]["detail"]


async def test_python_checks_and_json_records(records: list[TrajectoryRecord]) -> None:
    as_json = [r.to_json() for r in records]
    score = check_trajectory(
        as_json,
        [
            ("looked before moving", lambda calls: calls[0].tool == "get_account"),
            ("raises", lambda calls: calls[99]),
        ],
    )
    assert _results(score) == {"looked before moving": True, "raises": False}
    assert [c.tool for c in calls_of(as_json)] == [c.tool for c in calls_of(records)]
    denied = [c for c in calls_of(as_json) if c.denied]
    assert len(denied) == 1 and denied[0].error


async def test_only_call_records_count(gateway: Gateway) -> None:
    await gateway.call(AGENT, "get_account", {"id": "a1"}, session="p1")
    await gateway.restore(SYSTEM, gateway.instance().state.snapshot())  # a control record
    records = list(gateway.instance().trajectory)
    assert {r.kind for r in records} == {"call", "control"}
    assert check_trajectory(records, [{"max_calls": 1}]).passed


async def test_records_between_keeps_one_prompt(gateway: Gateway) -> None:
    await gateway.call(AGENT, "get_account", {"id": "a1"}, session="p1")
    start = len(gateway.instance().trajectory)
    await gateway.call(AGENT, "get_account", {"id": "a2"}, session="p2")
    await gateway.call(AGENT, "get_account", {"id": "a1"}, session="other")
    await gateway.call(AGENT, "get_account", {"id": "a1"})
    end = len(gateway.instance().trajectory)
    await gateway.call(AGENT, "get_account", {"id": "a2"}, session="p2")
    trajectory = list(gateway.instance().trajectory)
    window = records_between(trajectory, start, end, session="p2")
    assert [(r.session, r.args) for r in window] == [("p2", {"id": "a2"}), (None, {"id": "a1"})]
    assert len(records_between(trajectory, start)) == 4


def test_bad_checks_are_errors() -> None:
    with pytest.raises(VerifierError, match="trajectory check 0: a trajectory check has one of"):
        check_trajectory([], [{"tool": "x"}])
    with pytest.raises(VerifierError, match=r"trajectory check 0 \(max_calls\): Extra inputs"):
        check_trajectory([], [{"called": "x", "max_calls": 3}])
    with pytest.raises(VerifierError, match="no checks"):
        check_trajectory([], [])
