"""The trajectory: an append-only record of calls, denials, trigger firings and control."""

from __future__ import annotations

import json
import os
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
    # Records are kept compactly and built when read: equal, not the same objects.
    assert traj[0] == first and traj[-1] == second
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


# -- values JSON cannot carry (issue 11, defects 4 and 13) ----------------------------------


def _strict_json(line: str) -> dict:
    """Parse one line as JSON that any parser takes (no NaN, no Infinity)."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


async def test_a_lone_surrogate_is_replaced_and_the_record_says_so(
    gw: Gateway, agent: Principal
) -> None:
    await gw.call(agent, "deposit", {"account_id": "a\ud800", "amount": 5})
    await gw.call(agent, "n\udfffpe", {"k\ud83d": "v"})
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    traj = gw.instance().trajectory
    bad, unknown, good = traj
    assert bad.args == {"account_id": "a\ufffd", "amount": 5}
    assert {"path": "/args/account_id", "what": "lone_surrogate"} in bad.sanitized
    assert unknown.tool == "n\ufffdpe" and unknown.args == {"k\ufffd": "v"}
    assert {"path": "/tool", "what": "lone_surrogate"} in unknown.sanitized
    assert {"path": "/args/k\ufffd", "what": "lone_surrogate"} in unknown.sanitized
    assert good.sanitized is None
    lines = traj.to_jsonl().splitlines()  # failed with UnicodeEncodeError before
    assert [_strict_json(x)["seq"] for x in lines] == [0, 1, 2]
    assert _strict_json(lines[0])["sanitized"] == bad.sanitized
    assert Trajectory.read_jsonl(traj.to_jsonl()) == list(traj)


def test_a_lone_surrogate_in_any_text_field_is_replaced() -> None:
    traj = Trajectory()
    record = _append(
        traj,
        kind="message",
        detail="hi \ud800",
        session="s\udc00",
        error=CallError(kind="tool_error", message="bad \udbff"),
    )
    assert (record.detail, record.session) == ("hi \ufffd", "s\ufffd")
    assert record.error == CallError(kind="tool_error", message="bad \ufffd")
    assert [n["path"] for n in record.sanitized] == ["/session", "/detail", "/error/message"]
    _strict_json(traj.to_jsonl())


async def test_nan_and_infinite_arguments_become_null_and_are_noted(
    gw: Gateway, agent: Principal
) -> None:
    args = {"account_id": "a1", "amount": float("nan"), "more": [float("inf"), -float("inf")]}
    await gw.call(agent, "deposit", args)
    record = gw.instance().trajectory[0]
    assert record.args == {"account_id": "a1", "amount": None, "more": [None, None]}
    assert record.sanitized == [
        {"path": "/args/amount", "what": "nan"},
        {"path": "/args/more/0", "what": "infinity"},
        {"path": "/args/more/1", "what": "-infinity"},
    ]
    line = _strict_json(gw.instance().trajectory.to_jsonl())
    assert line["args"]["amount"] is None and line["sanitized"] == record.sanitized


def _nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_values_nested_past_the_limit_are_cut_with_a_marker() -> None:
    from agentenv.gateway.sanitize import TOO_DEEP
    from agentenv.spec.limits import MAX_JSON_DEPTH, value_too_deep

    traj = Trajectory()
    ok = _append(traj, args=_nested(MAX_JSON_DEPTH))
    assert ok.sanitized is None  # at the limit: kept whole
    record = _append(traj, args={"x": 1}, result=_nested(10_000))  # deeper than Python recurses
    assert not value_too_deep(record.result)
    (note,) = record.sanitized
    assert note["what"] == "too_deep"
    assert note["path"] == "/result" + "/a" * MAX_JSON_DEPTH
    inner = record.result
    for _ in range(MAX_JSON_DEPTH - 1):
        inner = inner["a"]
    assert inner == {"a": TOO_DEEP}
    assert [_strict_json(x)["seq"] for x in traj.to_jsonl().splitlines()] == [0, 1]


def test_python_values_json_has_no_form_for_are_their_repr_and_noted() -> None:
    from agentenv.gateway.sanitize import CIRCULAR

    class Broken:
        def __repr__(self) -> str:
            raise RuntimeError("no repr")

    loop: list = [1]
    loop.append(loop)
    when = datetime(2026, 1, 2, tzinfo=UTC)
    traj = Trajectory()
    record = _append(
        traj,
        args={"when": when, "tags": {"x"}, "odd": Broken(), (1, 2): "tuple key", 3: "int key"},
        result=loop,
    )
    assert record.args["when"] == repr(when)
    assert record.args["tags"] == "{'x'}"
    assert record.args["odd"] == "<Broken object>"
    assert record.args["(1, 2)"] == "tuple key" and record.args["3"] == "int key"
    assert record.result == [1, CIRCULAR]
    assert {n["path"]: n["what"] for n in record.sanitized} == {
        "/args/when": "not_json",
        "/args/tags": "not_json",
        "/args/odd": "not_json",
        "/args/(1, 2)": "not_json",
        "/result/1": "circular",
    }
    _strict_json(traj.to_jsonl())


def test_notes_are_capped_with_one_more() -> None:
    from agentenv.gateway.sanitize import MAX_NOTES

    traj = Trajectory()
    record = _append(traj, result=[float("nan")] * 100)
    assert record.result == [None] * 100
    assert len(record.sanitized) == MAX_NOTES + 1
    assert record.sanitized[-1] == {"path": f"/result/{MAX_NOTES}", "what": "more"}


def test_a_plain_record_is_kept_as_given() -> None:
    traj = Trajectory()
    args = {"a": [1, 2.5, "é", {"b": None, "c": True}]}
    record = _append(traj, args=args, result="text")
    assert record.args == args and record.sanitized is None


# -- bounded memory: older records spill to a file -------------------------------------------


@pytest.fixture
def small_window(monkeypatch: pytest.MonkeyPatch) -> int:
    """A trajectory keeps 8 records in memory (instead of about a thousand)."""
    import agentenv.gateway.trajectory as module

    monkeypatch.setattr(module, "HOT_RECORDS", 8)
    return 8


def _mixed(traj: Trajectory, n: int) -> list[TrajectoryRecord]:
    made = []
    for i in range(n):
        if i % 3 == 2:
            made.append(_append(traj, kind="control", event=f"e{i}", detail="d"))
        else:
            made.append(_append(traj, tool=f"t{i}", args={"i": i}, result={"r": [i, "é"]}))
    return made


def test_a_long_trajectory_spills_and_reads_back_the_same(small_window: int) -> None:
    traj = Trajectory()
    made = _mixed(traj, 100)
    assert traj.spilled > 0 and len(traj) - traj.spilled <= small_window
    assert len(traj) == 100 and list(traj) == made
    assert [traj[i] for i in range(100)] == made and traj[-1] == made[-1] and traj[0] == made[0]
    assert traj[10:20] == made[10:20] and traj[::7] == made[::7]
    assert traj.since(37) == made[37:] and traj.calls() == [r for r in made if r.kind == "call"]
    assert Trajectory.read_jsonl(traj.to_jsonl()) == made
    assert traj.to_jsonl(since=41).splitlines() == traj.to_jsonl().splitlines()[41:]
    numbers, events = [], 0
    for record in made:
        numbers.append(events)
        events += 2 if record.kind == "call" else 1
    assert traj.event_count == events
    assert [traj.first_event(i) for i in range(100)] == numbers
    for event in range(events):
        seq = traj.record_at_event(event)
        assert numbers[seq] <= event < numbers[seq] + (2 if made[seq].kind == "call" else 1)
    assert traj.record_at_event(events) == 100
    with pytest.raises(IndexError):
        traj[100]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_spilling_leaves_the_parents_trajectory_whole(small_window: int) -> None:
    # Parent and child inherit one spill file; the child spilling after the parent must not
    # write over the parent's chunks (nor the parent over the child's).
    traj = Trajectory()
    made = _mixed(traj, 40)
    assert traj.spilled > 0
    go_read, go_write = os.pipe()
    done_read, done_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: wait for the parent to spill, then spill other records
        ok = False
        try:
            os.read(go_read, 1)
            child = made + [_append(traj, tool="child", args={"i": i}) for i in range(60)]
            ok = list(traj) == child
        finally:
            os.write(done_write, b"1" if ok else b"0")
            os._exit(0)
    ours = made + _mixed(traj, 60)
    os.write(go_write, b"x")
    child_ok = os.read(done_read, 1)
    os.waitpid(pid, 0)
    for fd in (go_read, go_write, done_read, done_write):
        os.close(fd)
    assert child_ok == b"1"
    assert list(traj) == ours


def test_spilled_times_come_back_exactly(small_window: int) -> None:
    from datetime import timezone

    paris = timezone(timedelta(hours=1))
    traj = Trajectory()
    made = []
    for i in range(40):
        wall = WALL + timedelta(microseconds=7 * i + 1, days=i)
        virtual = [None, T0 + timedelta(seconds=i), datetime(2026, 5, 1, i % 24, tzinfo=paris)]
        made.append(_append(traj, wall_time=wall, virtual_time=virtual[(i // 10) % 3]))
    assert traj.spilled >= 24
    back = list(traj)
    assert back == made
    assert [r.virtual_time.tzinfo if r.virtual_time else None for r in back] == [
        r.virtual_time.tzinfo if r.virtual_time else None for r in made
    ]


def test_when_nothing_can_be_spilled_the_records_stay_in_memory(
    small_window: int, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import tempfile

    real = tempfile.gettempdir()
    monkeypatch.setattr(tempfile, "tempdir", "/nonexistent/agentenv-test")  # no such folder
    traj = Trajectory()
    made = _mixed(traj, 40)
    assert traj.spilled == 0 and list(traj) == made
    assert "cannot spill" in caplog.text
    warnings = caplog.text.count("cannot spill")
    assert 1 <= warnings <= 3  # tries again only once the window has doubled
    monkeypatch.setattr(tempfile, "tempdir", real)
    made += _mixed(traj, 40)
    assert traj.spilled > 0 and list(traj) == made
    made += _mixed(traj, 40)  # and once it could, the window is back to its size
    assert len(traj) - traj.spilled <= small_window


def test_a_chunk_pickle_refuses_is_spilled_as_json(small_window: int) -> None:
    import enum

    class Local(enum.IntEnum):  # defined in a function: pickle cannot name it
        THREE = 3

    traj = Trajectory()
    for _ in range(20):
        _append(traj, args={"x": Local.THREE})
    assert traj.spilled > 0
    assert traj[0].args == {"x": 3} and traj[-1].args == {"x": Local.THREE}


def test_a_short_trajectory_makes_no_file(small_window: int) -> None:
    traj = Trajectory()
    _mixed(traj, small_window - 1)
    assert traj.spilled == 0


def test_big_values_spill_sooner(monkeypatch: pytest.MonkeyPatch) -> None:
    import agentenv.gateway.trajectory as module

    monkeypatch.setattr(module, "HOT_BYTES", 1_000_000)
    traj = Trajectory()
    for _ in range(10):
        _append(traj, result="x" * 300_000)
    assert traj.spilled >= 6 and traj[0].result == "x" * 300_000


def test_readers_in_other_threads_see_whole_records_while_it_spills(small_window: int) -> None:
    import threading

    traj = Trajectory()
    stop = threading.Event()
    seen: list[str] = []

    def read() -> None:
        while not stop.is_set():
            records = list(traj)
            if [r.seq for r in records] != list(range(len(records))):
                seen.append(f"out of order: {[r.seq for r in records]}")
            if len(records) > 1:
                traj.first_event(len(records) - 1)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        _mixed(traj, 3000)
    finally:
        stop.set()
        reader.join()
    assert seen == []
    assert [r.seq for r in traj] == list(range(3000))


def test_a_time_in_a_zone_pickle_refuses_is_spilled_as_its_iso_text(small_window: int) -> None:
    from datetime import tzinfo

    class Local(tzinfo):  # defined in a function: pickle cannot name it
        def utcoffset(self, dt: datetime | None) -> timedelta:
            return timedelta(hours=2)

        def dst(self, dt: datetime | None) -> timedelta:
            return timedelta(0)

    traj = Trajectory()
    when = datetime(2026, 5, 1, 12, 30, 0, 123_456, tzinfo=Local())
    made = [_append(traj, virtual_time=when, args={"i": i}) for i in range(20)]
    assert traj.spilled > 0
    back = list(traj)
    assert back == made  # the same instants
    assert back[0].virtual_time.utcoffset() == timedelta(hours=2)
