"""Trajectory records as upstream's trajectory events (what `GET /trajectory` serves)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from agentenv import SYSTEM, Gateway, Principal
from agentenv.gateway import Trajectory
from agentenv.gateway.events import (
    EVENT_ADAPTER,
    records_events,
    to_jsonl,
    trajectory_events,
)
from agentenv.spec import TriggerRegistration

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def _events(gw: Gateway, since: int = 0) -> list[dict]:
    events = trajectory_events(gw.instance().trajectory, since)
    for event in events:
        EVENT_ADAPTER.validate_python(event)  # every line matches the documented schema
    return events


async def test_a_call_is_a_tool_call_event_and_its_result(gw: Gateway, agent: Principal) -> None:
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 5}, session="s-1")
    call, result = _events(gw)
    assert call["event_type"] == "tool_call"
    assert call["event_id"] == "event_1"
    assert call["tool_call"] == {
        "function_name": "deposit",
        "arguments": {"account_id": "a1", "amount": 5},
    }
    assert (call["role"], call["principal"], call["session"]) == ("agent", "ada", "s-1")
    assert "virtual_time" not in call  # the clock is not armed
    assert result["event_type"] == "tool_call_result"
    assert result["tool_call_event_id"] == "event_1" and result["event_id"] == "event_2"
    record = gw.instance().trajectory[0]
    assert result["tool_call_result"]["isError"] is False
    assert result["tool_call_result"]["structuredContent"] == record.result
    assert json.loads(result["tool_call_result"]["content"][0]["text"]) == record.result
    assert (result["changelog_id_before"], result["changelog_id"]) == (
        record.changelog_id - 1,
        record.changelog_id,
    )
    assert result["state_hash"] == record.state_hash
    start = datetime.fromisoformat(call["timestamp_utc"])
    end = datetime.fromisoformat(result["timestamp_utc"])
    assert start <= end and end.tzinfo is not None


async def test_a_tool_error_is_a_result_a_refused_call_has_none(
    gw: Gateway, agent: Principal
) -> None:
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": -1})  # the tool refuses
    await gw.call(agent, "freeze", {"account_id": "a1"})  # denied
    await gw.call(agent, "nope", {})  # unknown
    await gw.call(agent, "hang", {})  # times out
    outcomes = [e for e in _events(gw) if e["event_type"] != "tool_call"]
    refused, denied, unknown, timed_out = outcomes
    assert refused["event_type"] == "tool_call_result"
    assert refused["tool_call_result"]["isError"] is True
    assert refused["tool_call_result"]["content"][0]["text"] == "Error: amount must be positive"
    assert refused["error_kind"] == "tool_error"
    assert [e["event_type"] for e in (denied, unknown, timed_out)] == ["tool_call_failed"] * 3
    assert denied["error"] == "denied: role 'agent' may not call 'freeze'"
    assert (denied["denied"], denied["changelog_id_before"]) == (True, None)
    assert unknown["error"].startswith("unknown_tool: ")
    assert timed_out["error"].startswith("timeout: ")


async def test_virtual_time_is_stamped_while_the_clock_is_armed(
    gw: Gateway, agent: Principal
) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.call(agent, "whoami", {})
    control, call, result = _events(gw)
    assert control["event_type"] == "control" and control["event"] == "clock_set"
    assert call["virtual_time"] == result["virtual_time"] == "2026-03-02T09:00:00Z"


async def test_trigger_actions_and_firings_use_upstreams_trigger_events(
    gw: Gateway, agent: Principal
) -> None:
    registration = TriggerRegistration.model_validate(
        {
            "triggers": [
                {
                    "id": "audit",
                    "when": {"type": "action", "tool": "deposit"},
                    "actions": [
                        {
                            "type": "tool",
                            "tool": "open_account",
                            "args": {"id": "new", "owner": "X", "balance": 0},
                        }
                    ],
                }
            ]
        }
    )
    await gw.register_triggers(SYSTEM, registration)
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    types = [e["event_type"] for e in _events(gw)]
    assert types == [
        "control",
        "tool_call",
        "tool_call_result",
        "internal_tool_call",
        "trigger_fired",
    ]
    internal, fired = _events(gw)[3:]
    assert internal["trigger_id"] == "audit" and internal["tool"] == "open_account"
    assert internal["as"] is None and internal["ok"] is True
    assert internal["changelog_id_after"] == internal["changelog_id_before"] + 1
    assert len(internal["result_sha256"]) == 16 and internal["result_len"] > 0
    assert (fired["trigger_id"], fired["outcome"], fired["source"]) == (
        "audit",
        "fired",
        "trigger_engine",
    )


async def test_since_skips_the_events_a_reader_has_and_keeps_their_ids(
    gw: Gateway, agent: Principal
) -> None:
    for _ in range(3):
        await gw.call(agent, "whoami", {})
    everything = _events(gw)
    assert [e["event_id"] for e in everything] == [f"event_{n}" for n in range(1, 7)]
    assert _events(gw, since=3) == everything[3:]  # mid-call: from the first call's result on
    assert _events(gw, since=6) == []
    assert _events(gw, since=600) == []
    assert _events(gw, since=-5) == everything


async def test_records_read_back_render_the_same_events(gw: Gateway, agent: Principal) -> None:
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 5})
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["deposit"])
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 5})
    live = gw.instance().trajectory
    back = Trajectory.read_jsonl(live.to_jsonl())
    assert records_events(back) == trajectory_events(live)


async def test_jsonl_is_one_event_per_line(gw: Gateway, agent: Principal) -> None:
    await gw.call(agent, "returns_text", {})
    body = to_jsonl(_events(gw))
    lines = body.decode().splitlines()
    assert body.endswith(b"\n") and len(lines) == 2
    assert json.loads(lines[1])["tool_call_result"]["structuredContent"] == {"result": "plain text"}
    assert to_jsonl([]) == b""


# -- records whose values were replaced; long trajectories (issue 11) ------------------------


def _strict(line: bytes) -> dict:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


async def test_a_sanitized_call_renders_strict_json_events_that_say_so(
    gw: Gateway, agent: Principal
) -> None:
    await gw.call(agent, "deposit", {"account_id": "a\ud800", "amount": float("nan")})
    call, outcome = _events(gw)
    notes = gw.instance().trajectory[0].sanitized
    assert {"path": "/args/amount", "what": "nan"} in notes
    assert call["sanitized"] == notes and outcome["sanitized"] == notes
    assert call["tool_call"]["arguments"] == {"account_id": "a\ufffd", "amount": None}
    body = to_jsonl([call, outcome])  # raised UnicodeEncodeError (and wrote NaN) before
    assert [_strict(x)["event_type"] for x in body.splitlines()] == [
        "tool_call",
        outcome["event_type"],
    ]


async def test_events_of_a_clean_call_carry_no_sanitized_key(gw: Gateway, agent: Principal) -> None:
    await gw.call(agent, "whoami", {})
    assert all("sanitized" not in e for e in _events(gw))


def test_a_surrogate_in_records_read_from_elsewhere_is_escaped_not_fatal() -> None:
    from agentenv.gateway import TrajectoryRecord

    record = TrajectoryRecord(
        seq=0, kind="call", wall_time=T0, state_hash="0", changelog_id=0, tool="t",
        args={"x": "\ud800"},
    )  # fmt: skip
    lines = to_jsonl(records_events([record])).splitlines()
    assert json.loads(lines[0])["tool_call"]["arguments"] == {"x": "\ud800"}


def test_paging_events_of_a_spilled_trajectory(monkeypatch) -> None:
    import io

    import agentenv.gateway.trajectory as module
    from agentenv.gateway.events import iter_events, write_events

    monkeypatch.setattr(module, "HOT_RECORDS", 6)
    traj = Trajectory()
    base = {"wall_time": T0, "state_hash": "0", "changelog_id": 0}
    for i in range(40):
        if i % 4 == 3:
            traj.append(kind="control", event="clock_set", **base)
        else:
            traj.append(kind="call", tool="t", args={"i": i}, result=i, **base)
    assert traj.spilled > 0
    everything = trajectory_events(traj)
    assert len(everything) == traj.event_count
    assert [e["event_id"] for e in everything] == [f"event_{n}" for n in range(1, 71)]
    assert records_events(list(traj)) == everything
    for since in (0, 1, 5, 33, 69, 70, 99):
        for limit in (1, 2, 7, 100, None):
            end = None if limit is None else since + limit
            assert list(iter_events(traj, since, limit)) == everything[since:end], (since, limit)
    out = io.BytesIO()
    assert write_events(out, traj, 3, 10) == len(out.getvalue())
    assert out.getvalue() == to_jsonl(everything[3:13])
