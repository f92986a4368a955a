"""The trajectory: an append-only record of calls, denials, trigger firings and control."""

from __future__ import annotations

import json
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.gateway import Trajectory, TrajectoryRecord
from agentenv.spec import CallError, TriggerRegistration

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
WALL = datetime(2026, 1, 1, tzinfo=UTC)


def _append(traj: Trajectory, **fields) -> TrajectoryRecord:
    base = {"kind": "call", "wall_time": WALL, "state_hash": "0" * 64, "changelog_id": 0}
    return traj.append(**{**base, **fields})


# -- Trajectory itself -----------------------------------------------------------------------


def test_records_are_numbered_in_order() -> None:
    traj = Trajectory()
    assert len(traj) == 0
    first = _append(traj, tool="a")
    second = _append(traj, kind="control", event="clock_set")
    assert (first.seq, second.seq) == (0, 1)
    assert len(traj) == 2
    assert traj[0] is first and traj[-1] is second
    assert list(traj) == [first, second]
    assert traj.since(1) == [second]
    assert traj.since() == [first, second]
    assert traj.calls() == [first]


def test_jsonl_round_trip() -> None:
    traj = Trajectory()
    _append(
        traj,
        tool="deposit",
        args={"amount": 5},
        result={"balance": 105, "tags": ["é"]},
        virtual_time=T0,
        role="agent",
        principal="ada",
        session="s",
        duration_ms=1.5,
    )
    _append(
        traj,
        tool="freeze",
        args={},
        error=CallError(kind="denied", message="no"),
        denied=True,
        changelog_id=3,
    )
    _append(traj, kind="trigger", trigger_id="t", event="failed", detail="why")
    text = traj.to_jsonl()
    lines = text.splitlines()
    assert len(lines) == 3 and text.endswith("\n")
    first = json.loads(lines[0])
    assert first["seq"] == 0
    assert first["virtual_time"] == "2026-03-02T09:00:00Z"
    assert first["result"] == {"balance": 105, "tags": ["é"]}
    assert json.loads(lines[1])["error"] == {"kind": "denied", "message": "no"}

    back = Trajectory.read_jsonl(text)
    assert back == list(traj)
    assert back[1].error == CallError(kind="denied", message="no")
    assert back[0].virtual_time == T0
    assert Trajectory.read_jsonl(text + "\n\n") == back
    assert traj.to_jsonl(since=2) == lines[2] + "\n"


def test_read_jsonl_refuses_a_malformed_record() -> None:
    with pytest.raises(ValueError):
        Trajectory.read_jsonl('{"seq": 0, "kind": "dance"}\n')


# -- what the gateway records ----------------------------------------------------------------


async def test_every_call_is_recorded_good_bad_and_denied(
    gw: Gateway, agent: Principal, supervisor: Principal
) -> None:
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 5})
    await gw.call(agent, "nope", {"x": 1})
    await gw.call(agent, "freeze", {"account_id": "a1"})
    await gw.call(supervisor, "freeze", {"account_id": "a1"})
    records = gw.instance().trajectory.calls()
    assert [(r.tool, r.role, r.error and r.error.kind, r.denied) for r in records] == [
        ("deposit", "agent", None, False),
        ("nope", "agent", "unknown_tool", False),
        ("freeze", "agent", "denied", True),
        ("freeze", "supervisor", None, False),
    ]
    assert [r.changelog_id for r in records] == [4, 4, 4, 5]
    assert records[-1].state_hash == gw.instance().state.hash()
    assert all(r.duration_ms >= 0 for r in records)
    assert all(r.wall_time.tzinfo is not None for r in records)


async def test_control_operations_are_recorded(gw: Gateway, agent: Principal) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.advance_clock(SYSTEM, timedelta(minutes=5))
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["deposit"])
    await gw.clear_clock(Principal("ops", name="olga", admin=True))
    control = [r for r in gw.instance().trajectory if r.kind == "control"]
    assert [r.event for r in control] == [
        "clock_set",
        "clock_advance",
        "tools_disable",
        "clock_clear",
    ]
    assert control[0].detail == "2026-03-02T09:00:00+00:00 x1"
    assert control[2].detail == "agent: ['deposit']"
    assert (control[3].role, control[3].principal) == ("ops", "olga")
    assert control[0].role == "system"


async def test_virtual_time_is_stamped_only_while_the_clock_is_armed(
    gw: Gateway, agent: Principal
) -> None:
    await gw.call(agent, "whoami", {})
    await gw.set_clock(SYSTEM, T0)
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    await gw.call(agent, "whoami", {})
    await gw.clear_clock(SYSTEM)
    await gw.call(agent, "whoami", {})
    calls = gw.instance().trajectory.calls()
    assert [r.virtual_time for r in calls] == [None, T0, T0 + timedelta(seconds=60), None]


async def test_trigger_firings_are_recorded(gw: Gateway, agent: Principal) -> None:
    registration = TriggerRegistration.model_validate(
        {
            "triggers": [
                {
                    "id": "audit",
                    "when": {"type": "action", "tool": "deposit"},
                    "actions": [{"type": "tool", "tool": "whoami", "args": {}}],
                }
            ]
        }
    )
    await gw.register_triggers(SYSTEM, registration)
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    kinds = [(r.kind, r.tool, r.event) for r in gw.instance().trajectory]
    assert kinds == [
        ("control", None, "triggers_register"),
        ("call", "deposit", None),
        ("trigger", "whoami", None),
        ("trigger", None, "fired"),
    ]
    assert gw.instance().trajectory[2].result["role"] == "system"
    assert gw.instance().trajectory.calls() == [gw.instance().trajectory[1]]


async def test_the_gateway_trajectory_exports_as_jsonl(gw: Gateway, agent: Principal) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    await gw.call(agent, "returns_set", {})
    traj = gw.instance().trajectory
    back = Trajectory.read_jsonl(traj.to_jsonl())
    assert [r.to_json() for r in back] == [r.to_json() for r in traj]
    assert back[2].error is not None and back[2].error.kind == "invalid_result"


async def test_same_actions_give_the_same_trajectory_apart_from_wall_clock(
    bank_env: Environment, agent: Principal
) -> None:
    async def run() -> list[dict]:
        gw = Gateway(bank_env)
        await gw.set_clock(SYSTEM, T0)
        await gw.call(agent, "deposit", {"account_id": "a1", "amount": 3})
        await gw.call(agent, "transfer", {"source": "a1", "target": "zz", "amount": 1})
        await gw.call(agent, "freeze", {"account_id": "a1"})
        out = []
        for r in gw.instance().trajectory:
            data = r.to_json()
            del data["wall_time"], data["duration_ms"]
            out.append(data)
        return out

    assert await run() == await run()


async def test_a_recorded_result_does_not_change_when_the_tool_reuses_its_object(
    tmp_path: Path,
) -> None:
    (tmp_path / "log_tools.py").write_text(
        textwrap.dedent(
            """
            from agentenv import tool

            SEEN = []


            @tool
            def remember(item: str) -> list:
                SEEN.append(item)
                return SEEN
            """
        )
    )
    (tmp_path / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: log\ntools: [{module: log_tools.py}]\n"
    )
    gw = Gateway(Environment.load(tmp_path))
    who = Principal("default")
    await gw.call(who, "remember", {"item": "a"})
    await gw.call(who, "remember", {"item": "b"})
    assert gw.instance().trajectory[0].result == ["a"]


async def test_a_recorded_call_does_not_change_when_the_caller_reuses_its_args(
    gw: Gateway, agent: Principal
) -> None:
    args = {"account_id": "a1", "amount": 5}
    await gw.call(agent, "deposit", args)
    args["amount"] = 500
    assert gw.instance().trajectory[0].args == {"account_id": "a1", "amount": 5}


def test_records_number_their_wire_events_as_they_are_appended() -> None:
    traj = Trajectory()
    _append(traj, tool="a")  # a call: two events
    _append(traj, kind="control", event="clock_set")  # one
    _append(traj, tool="b")
    assert traj.event_count == 5
    assert [traj.first_event(seq) for seq in range(3)] == [0, 2, 3]
    assert [traj.record_at_event(n) for n in range(6)] == [0, 0, 1, 2, 2, 3]


async def test_a_call_whose_tool_ran_records_its_write_window(
    gw: Gateway, agent: Principal
) -> None:
    before = gw.instance().state.changes
    await gw.call(agent, "transfer", {"source": "a1", "target": "a2", "amount": 1})
    await gw.call(agent, "freeze", {"account_id": "a1"})  # denied: never ran
    ran, denied = gw.instance().trajectory.calls()
    assert (ran.changelog_id_before, ran.changelog_id) == (before, before + 2)
    assert (denied.changelog_id_before, denied.changelog_id) == (None, before + 2)
