"""Gateway modes: `consistent` runs the calls on one instance one at a time; `performance`
lets them overlap, each still all-or-nothing, and never lets a control operation or a
trigger interleave with a call.

Overlap is shown, never timed: a tool that waits for a second call to arrive can only
finish when the two really run together.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal, ToolContext, ToolError
from agentenv.env.tool import Tool, tool
from agentenv.gateway import GatewayError
from agentenv.gateway.instance import SharedLock
from agentenv.spec import parse_environment_spec
from agentenv.spec.triggers import TriggerRegistration
from agentenv.state import State

AGENT = Principal("agent")
SAFETY_S = 20  # a tool gives up waiting for its partner after this long: a failure, not a timing


class Meeting:
    """Two calls meet here: neither goes on until both have arrived."""

    def __init__(self) -> None:
        self.arrived = 0
        self.both = asyncio.Event()
        self.log: list[tuple[str, str]] = []

    async def meet(self, who: str) -> None:
        self.log.append(("start", who))
        self.arrived += 1
        if self.arrived == 2:
            self.both.set()
        try:
            await asyncio.wait_for(self.both.wait(), SAFETY_S)
        except TimeoutError:
            raise ToolError(f"{who} waited alone: the calls did not overlap") from None


def make_env(*functions: Callable[..., Any], mode: str = "consistent") -> Environment:
    state = State.from_records({"notes": [{"id": "n0", "text": "seed"}]})
    tools: dict[str, Tool] = {}
    for fn in functions:
        built = Tool.from_function(fn)
        tools[built.name] = built
    return Environment(
        name="modes",
        tools=tools,
        seed=state.snapshot(),
        gateway_mode=mode,  # type: ignore[arg-type]
    )


def meeting_tools(meeting: Meeting) -> list[Callable[..., Any]]:
    @tool(kind="read")
    async def meet(ctx: ToolContext, who: str) -> str:
        await meeting.meet(who)
        meeting.log.append(("end", who))
        return who

    @tool
    async def meet_and_write(ctx: ToolContext, who: str, note: str) -> str:
        await meeting.meet(who)
        ctx.state.put("notes", {"id": note, "text": who})
        return who

    @tool
    async def write_and_meet(ctx: ToolContext, who: str, note: str) -> str:
        ctx.state.put("notes", {"id": note, "text": who})
        await meeting.meet(who)
        return who

    @tool(kind="read")
    def read_note(ctx: ToolContext, note: str) -> dict | None:
        return ctx.state.get("notes", note)

    return [meet, meet_and_write, write_and_meet, read_note]


# -- choosing the mode ------------------------------------------------------------------------


def test_the_mode_comes_from_the_document_and_the_gateway_may_override_it() -> None:
    spec = parse_environment_spec(
        {"apiVersion": "agentenv/v1", "kind": "Environment", "name": "m"}
        | {"gateway_mode": "performance"}
    )
    env = Environment.from_spec(spec)
    assert env.gateway_mode == "performance"
    assert Gateway(env).mode == "performance"
    assert isinstance(Gateway(env).instance().lock, SharedLock)
    assert Gateway(env, mode="consistent").mode == "consistent"
    assert isinstance(Gateway(env, mode="consistent").instance().lock, asyncio.Lock)
    default = Environment.from_spec(spec.model_copy(update={"gateway_mode": "consistent"}))
    assert Gateway(default).mode == "consistent"


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(GatewayError, match="unknown gateway mode 'fast'"):
        Gateway(make_env(), mode="fast")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="gateway_mode"):
        parse_environment_spec(
            {"apiVersion": "agentenv/v1", "kind": "Environment", "name": "m", "gateway_mode": "x"}
        )


# -- consistent: one at a time -----------------------------------------------------------------


async def test_in_consistent_mode_calls_on_one_instance_never_overlap() -> None:
    log: list[tuple[str, str]] = []

    @tool(kind="read")
    async def slow(ctx: ToolContext, who: str) -> str:
        log.append(("start", who))
        for _ in range(5):
            await asyncio.sleep(0)  # every chance to interleave
        log.append(("end", who))
        return who

    gw = Gateway(make_env(slow))
    results = await asyncio.gather(*(gw.call(AGENT, "slow", {"who": w}) for w in "abc"))
    assert all(r.ok for r in results)
    for i in range(0, len(log), 2):
        assert log[i][0] == "start" and log[i + 1] == ("end", log[i][1]), log


async def test_different_instances_overlap_in_consistent_mode() -> None:
    meeting = Meeting()
    gw = Gateway(make_env(*meeting_tools(meeting)))
    gw.create_instance("b")
    a, b = await asyncio.gather(
        gw.call(AGENT, "meet", {"who": "a"}),
        gw.call(AGENT, "meet", {"who": "b"}, instance="b"),
    )
    assert a.ok and b.ok, (a.error, b.error)


# -- performance: calls overlap ----------------------------------------------------------------


async def test_in_performance_mode_two_async_calls_overlap() -> None:
    meeting = Meeting()
    gw = Gateway(make_env(*meeting_tools(meeting)), mode="performance")
    a, b = await asyncio.gather(
        gw.call(AGENT, "meet", {"who": "a"}), gw.call(AGENT, "meet", {"who": "b"})
    )
    assert a.ok and b.ok, (a.error, b.error)
    assert [step for step, _ in meeting.log[:2]] == ["start", "start"]
    # The trajectory lists calls in the order they finished.
    assert [r.tool for r in gw.instance().trajectory] == ["meet", "meet"]


async def test_in_performance_mode_two_blocking_calls_overlap() -> None:
    barrier = threading.Barrier(2, timeout=SAFETY_S)

    @tool(blocking=True)
    def rendezvous(ctx: ToolContext, note: str) -> int:
        ctx.state.put("notes", {"id": note, "text": "from a thread"})
        try:
            return barrier.wait()
        except threading.BrokenBarrierError:
            raise ToolError("the blocking calls did not overlap") from None

    gw = Gateway(make_env(rendezvous), mode="performance")
    a, b = await asyncio.gather(
        gw.call(AGENT, "rendezvous", {"note": "n1"}), gw.call(AGENT, "rendezvous", {"note": "n2"})
    )
    assert a.ok and b.ok, (a.error, b.error)
    assert {a.value, b.value} == {0, 1}
    state = gw.instance().state
    assert state.has("notes", "n1") and state.has("notes", "n2")


async def test_overlapping_writes_to_different_records_all_land() -> None:
    meeting = Meeting()
    gw = Gateway(make_env(*meeting_tools(meeting)), mode="performance")
    before = gw.instance().state.changes
    a, b = await asyncio.gather(
        gw.call(AGENT, "write_and_meet", {"who": "a", "note": "na"}),
        gw.call(AGENT, "write_and_meet", {"who": "b", "note": "nb"}),
    )
    assert a.ok and b.ok, (a.error, b.error)
    state = gw.instance().state
    assert state.get("notes", "na") == {"id": "na", "text": "a"}
    assert state.get("notes", "nb") == {"id": "nb", "text": "b"}
    assert state.changes == before + 2
    assert gw.instance().trajectory[-1].state_hash == state.hash()
    # Each call's write window (what GET /changes attributes to it) holds its own write only.
    windows = [(r.changelog_id_before, r.changelog_id) for r in gw.instance().trajectory]
    assert windows == [(before, before + 1), (before + 1, before + 2)]


async def test_overlapping_writes_to_one_record_the_first_to_finish_wins() -> None:
    meeting = Meeting()
    gw = Gateway(make_env(*meeting_tools(meeting)), mode="performance")
    a, b = await asyncio.gather(
        gw.call(AGENT, "meet_and_write", {"who": "a", "note": "n0"}),
        gw.call(AGENT, "meet_and_write", {"who": "b", "note": "n0"}),
    )
    [won] = [r for r in (a, b) if r.ok]
    [lost] = [r for r in (a, b) if not r.ok]
    assert lost.error is not None and lost.error.kind == "tool_error"
    assert "another call changed while it ran; nothing was applied" in lost.error.message
    assert gw.instance().state.get("notes", "n0") == {"id": "n0", "text": won.value}
    first, second = gw.instance().trajectory
    assert (first.error, second.error is not None) == (None, True)  # in the order they ended
    assert second.changelog_id_before == second.changelog_id  # nothing of it landed


async def test_a_call_sees_the_state_as_it_was_when_it_started() -> None:
    meeting = Meeting()
    written = asyncio.Event()

    @tool(kind="read")
    async def late_read(ctx: ToolContext) -> dict | None:
        await meeting.meet("reader")
        await written.wait()
        return ctx.state.get("notes", "n0")

    @tool
    async def overwrite(ctx: ToolContext) -> None:
        await meeting.meet("writer")
        ctx.state.put("notes", {"id": "n0", "text": "new"})

    gw = Gateway(make_env(late_read, overwrite), mode="performance")
    reader = asyncio.create_task(gw.call(AGENT, "late_read", {}))
    wrote = await gw.call(AGENT, "overwrite", {})
    assert wrote.ok, wrote.error
    written.set()
    read = await reader
    assert read.ok and read.value == {"id": "n0", "text": "seed"}
    assert gw.instance().state.get("notes", "n0") == {"id": "n0", "text": "new"}


async def test_a_failing_overlapping_call_applies_nothing() -> None:
    meeting = Meeting()

    @tool
    async def write_then_fail(ctx: ToolContext) -> None:
        ctx.state.put("notes", {"id": "bad", "text": "half"})
        await meeting.meet("failing")
        raise ToolError("changed my mind")

    @tool(kind="read")
    async def sneaky(ctx: ToolContext) -> None:
        await meeting.meet("sneaky")
        ctx.state.put("notes", {"id": "sneaky", "text": "a read that writes"})

    gw = Gateway(make_env(write_then_fail, sneaky), mode="performance")
    before = gw.instance().state.hash()
    bad, read = await asyncio.gather(
        gw.call(AGENT, "write_then_fail", {}), gw.call(AGENT, "sneaky", {})
    )
    assert bad.error is not None and bad.error.message == "changed my mind"
    assert read.error is not None and "read tool 'sneaky' tried to change" in read.error.message
    assert gw.instance().state.hash() == before


async def test_sync_tools_in_performance_mode_keep_their_transactions() -> None:
    @tool
    def half(ctx: ToolContext) -> None:
        ctx.state.put("notes", {"id": "x", "text": "x"})
        raise ToolError("no")

    @tool
    def add(ctx: ToolContext, note: str) -> None:
        ctx.state.put("notes", {"id": note, "text": note})

    gw = Gateway(make_env(half, add), mode="performance")
    before = gw.instance().state.hash()
    assert not (await gw.call(AGENT, "half", {})).ok
    assert gw.instance().state.hash() == before
    assert (await gw.call(AGENT, "add", {"note": "y"})).ok
    assert gw.instance().state.has("notes", "y")


# -- performance: what still runs alone ------------------------------------------------------


async def test_a_control_operation_waits_for_calls_in_flight_and_goes_before_later_ones() -> None:
    release = asyncio.Event()

    @tool(kind="read")
    async def hold(ctx: ToolContext, who: str) -> str:
        await release.wait()
        return who

    gw = Gateway(make_env(hold), mode="performance")
    first = asyncio.create_task(gw.call(AGENT, "hold", {"who": "first"}))
    await asyncio.sleep(0)
    control = asyncio.create_task(gw.set_tool_access(SYSTEM, "disable", "agent", ["hold"]))
    await asyncio.sleep(0)
    later = asyncio.create_task(gw.call(AGENT, "hold", {"who": "later"}))
    for _ in range(10):
        await asyncio.sleep(0)
    assert not first.done() and not control.done() and not later.done()
    release.set()
    assert (await first).ok
    await control
    refused = await later  # it arrived after the rule, so the rule applies to it
    assert refused.denied
    kinds = [(r.kind, r.tool or r.event) for r in gw.instance().trajectory]
    assert kinds == [("call", "hold"), ("control", "tools_disable"), ("call", "hold")]


async def test_the_ticker_passes_over_an_instance_with_calls_in_flight() -> None:
    release = asyncio.Event()

    @tool(kind="read")
    async def hold(ctx: ToolContext) -> str:
        await release.wait()
        return "held"

    gw = Gateway(make_env(hold), mode="performance")
    await gw.set_clock(SYSTEM, datetime(2026, 3, 2, 9, tzinfo=UTC))
    call = asyncio.create_task(gw.call(AGENT, "hold", {}))
    await asyncio.sleep(0)
    await asyncio.wait_for(gw.tick(), SAFETY_S)  # does not wait for the call
    assert not call.done()
    release.set()
    assert (await call).ok


async def test_with_triggers_registered_calls_run_one_at_a_time() -> None:
    log: list[tuple[str, str]] = []

    @tool
    async def slow(ctx: ToolContext, who: str) -> str:
        log.append(("start", who))
        for _ in range(5):
            await asyncio.sleep(0)
        log.append(("end", who))
        return who

    @tool
    def note(ctx: ToolContext) -> None:
        ctx.state.put("notes", {"id": "fired", "text": "by a trigger"})

    gw = Gateway(make_env(slow, note), mode="performance")
    registration = TriggerRegistration.model_validate(
        {
            "triggers": [
                {
                    "id": "after-slow",
                    "when": {"type": "action", "tool": "slow"},
                    "actions": [{"type": "tool", "tool": "note"}],
                }
            ]
        }
    )
    await gw.register_triggers(SYSTEM, registration)
    results = await asyncio.gather(*(gw.call(AGENT, "slow", {"who": w}) for w in "abc"))
    assert all(r.ok for r in results)
    for i in range(0, len(log), 2):
        assert log[i][0] == "start" and log[i + 1] == ("end", log[i][1]), log
    assert gw.instance().state.has("notes", "fired")


# -- the lock itself ---------------------------------------------------------------------------


async def test_the_shared_lock_lets_sharers_in_together_and_an_exclusive_holder_alone() -> None:
    lock = SharedLock()
    async with lock.shared(), lock.shared():
        assert lock.sharers == 2 and not lock.locked()
    async with lock:
        assert lock.locked()
        waiting = asyncio.create_task(_share(lock))
        await asyncio.sleep(0)
        assert not waiting.done()
    await waiting
    assert lock.sharers == 0 and not lock.locked()
    with pytest.raises(RuntimeError, match="not held"):
        lock.release()


async def test_a_cancelled_waiter_does_not_keep_the_lock() -> None:
    lock = SharedLock()
    await lock.acquire()
    waiter = asyncio.create_task(lock.acquire())
    sharer = asyncio.create_task(_share(lock))
    await asyncio.sleep(0)
    waiter.cancel()
    sharer.cancel()
    for task in (waiter, sharer):
        with pytest.raises(asyncio.CancelledError):
            await task
    lock.release()
    async with lock:
        assert lock.locked()
    async with lock.shared():
        assert lock.sharers == 1


async def _share(lock: SharedLock) -> None:
    async with lock.shared():
        await asyncio.sleep(0)
