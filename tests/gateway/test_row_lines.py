"""A trajectory's JSON lines written straight from its rows (`rows.row_line`) are the
bytes pydantic's dump of each record gives (`trajectory.record_line`): rollouts read every
episode's trajectory back this way, and exporters and resumes parse what it wrote."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given, settings
from hypothesis import strategies as st

from agentenv import Environment, Gateway, Principal
from agentenv.gateway import Trajectory
from agentenv.gateway.rows import row_line
from agentenv.gateway.trajectory import record, record_line
from agentenv.spec import CallError

_text = st.text(max_size=12)  # any code point: controls, U+2028, lone surrogates (sanitized)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_times = st.none() | st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
)
_zoned = st.datetimes(timezones=st.just(timezone(timedelta(hours=2))))


@st.composite
def _fields(draw: st.DrawFn) -> dict:
    error = draw(st.none() | st.builds(CallError, kind=st.just("tool_error"), message=_text))
    return {
        "kind": draw(st.sampled_from(["call", "trigger", "control", "message"])),
        "wall_time": draw(_times.filter(lambda t: t is not None) | _zoned),
        "virtual_time": draw(_times | _zoned),
        "state_hash": "0" * 64,
        "changelog_id": draw(st.integers(0, 10**6)),
        "changelog_id_before": draw(st.none() | st.integers(0, 10**6)),
        "role": draw(st.none() | _text),
        "principal": draw(st.none() | _text),
        "session": draw(st.none() | _text),
        "tool": draw(st.none() | _text),
        "args": draw(st.none() | st.dictionaries(_text, _json, max_size=4)),
        "result": draw(_json),
        "error": error,
        "denied": draw(st.booleans()),
        "duration_ms": draw(st.floats(min_value=0, max_value=1e7) | st.just(1e-05)),
        "trigger_id": draw(st.none() | _text),
        "event": draw(st.none() | _text),
        "detail": draw(st.none() | _text),
    }


@settings(max_examples=400, deadline=None)
@given(st.lists(_fields(), min_size=1, max_size=5))
def test_a_row_line_is_the_records_own_dump_byte_for_byte(fields: list[dict]) -> None:
    traj = Trajectory()
    for each in fields:
        traj.append(**each)
    for row in traj._rows():
        line = row_line(row)
        assert line is None or line == record_line(record(row)), row


async def test_real_calls_are_written_from_their_rows_and_read_back_equal() -> None:
    env = Environment.load("examples/envs/support-desk")
    gw = Gateway(env)
    agent = Principal("agent", name="ana")
    for tool, args in [
        ("list_tickets", {}),
        ("get_ticket", {"ticket_id": "T-1031"}),
        ("get_ticket", {"ticket_id": "nope \u2028 é \x01"}),  # a tool error, odd text
        ("no_such_tool", {"x": [1, {"y": None}]}),
        ("get_ticket", {"ticket_id": 5}),  # invalid arguments
    ]:
        await gw.call(agent, tool, args, session="s-1")
    rows = list(gw.instance().trajectory._rows())
    lines = [row_line(row) for row in rows]
    assert all(line is not None for line in lines)  # the common records take the fast way
    assert lines == [record_line(record(row)) for row in rows]
    out = io.BytesIO()
    gw.instance().trajectory.write_jsonl(out)
    assert out.getvalue() == b"".join(lines)
    assert Trajectory.read_jsonl(out.getvalue().decode()) == list(gw.instance().trajectory)
