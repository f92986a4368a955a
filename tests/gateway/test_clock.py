"""The virtual clock: stepped and wall modes, arming, get_time, and the gateway's use of it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import httpx
import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.gateway import ClockError, VirtualClock
from agentenv.gateway.clock import MAX_RATE, ClockNotArmed
from agentenv.serve import create_app
from agentenv.spec import ClockSpec, parse_environment_spec

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


class FakeTime:
    """A real-time source the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# -- VirtualClock ----------------------------------------------------------------------------


def test_an_unarmed_clock_has_no_time() -> None:
    clock = VirtualClock()
    assert not clock.armed
    assert clock.now() is None
    with pytest.raises(ClockNotArmed, match="not armed"):
        clock.require()
    state = clock.state()
    assert (state.armed, state.virtual_time, state.start) == (False, None, None)
    clock.advance(timedelta(hours=1))  # nothing to advance
    assert clock.now() is None


def test_arming_sets_the_time_in_utc() -> None:
    clock = VirtualClock()
    clock.set(datetime(2026, 3, 2, 10, 0, tzinfo=timezone(timedelta(hours=1))))
    assert clock.armed
    assert clock.now() == T0
    assert clock.now().tzinfo == UTC
    assert clock.start == T0
    assert clock.require() == T0


def test_a_naive_time_is_refused() -> None:
    clock = VirtualClock()
    with pytest.raises(ValueError, match="needs a timezone"):
        clock.set(datetime(2026, 3, 2, 9, 0))
    assert not clock.armed


def test_stepped_time_moves_only_when_advanced() -> None:
    real = FakeTime()
    clock = VirtualClock("stepped", real_time=real)
    clock.set(T0)
    real.now += 3600
    assert clock.now() == T0  # real time does not matter
    clock.advance(timedelta(minutes=5))
    assert clock.now() == T0 + timedelta(minutes=5)
    clock.advance(timedelta(0))
    clock.advance(timedelta(seconds=-30))  # never backwards
    assert clock.now() == T0 + timedelta(minutes=5)
    assert clock.start == T0  # start is when it was set, not now


def test_wall_time_is_t0_plus_real_elapsed_times_rate() -> None:
    real = FakeTime()
    clock = VirtualClock("wall", rate=60, real_time=real)
    clock.set(T0)
    assert clock.now() == T0
    real.now += 2.5
    assert clock.now() == T0 + timedelta(seconds=150)
    assert clock.now() == clock.now()  # reading never advances time
    clock.advance(timedelta(hours=1))  # a jump adds to wall time too
    assert clock.now() == T0 + timedelta(hours=1, seconds=150)


def test_real_at_is_the_first_reading_at_which_the_clock_gets_there() -> None:
    """What the ticker sleeps until: never a float step early, never one late."""
    import math
    import random

    rng = random.Random(12)
    for _ in range(3000):
        real = FakeTime()
        real.now = rng.uniform(1.0, 1e7)
        clock = VirtualClock("wall", rate=rng.choice([1e-6, 0.001, 1, 3.7, 60, MAX_RATE]))
        clock.real_time = real
        clock.set(T0)
        moment = T0 + timedelta(microseconds=rng.choice([1, 999, rng.randrange(1, 10**13)]))
        at = clock.real_at(moment)
        assert at is not None
        real.now = at
        assert clock.now() >= moment
        real.now = math.nextafter(at, -math.inf)
        assert clock.now() < moment
    # A moment already passed: the reading at which the clock was set.
    assert clock.real_at(T0 - timedelta(days=1)) == clock.real_at(T0)


def test_real_at_is_none_for_a_clock_that_does_not_move_by_itself() -> None:
    real = FakeTime()
    for clock in (
        VirtualClock("stepped", real_time=real),
        VirtualClock("wall", rate=0, real_time=real),
        VirtualClock("wall", rate=1, real_time=real),  # not armed
    ):
        if clock.mode == "stepped" or clock.rate == 0:
            clock.set(T0)
        assert not clock.moves_by_itself
        assert clock.real_at(T0 + timedelta(hours=1)) is None


def test_the_epoch_changes_with_the_mapping_from_real_to_virtual_time() -> None:
    clock = VirtualClock("wall", rate=2, real_time=FakeTime())
    seen = [clock.epoch]
    clock.set(T0)
    seen.append(clock.epoch)
    clock.advance(timedelta(seconds=5))
    seen.append(clock.epoch)
    clock.advance(timedelta(0))  # moves nothing: the same epoch
    assert clock.epoch == seen[-1]
    clock.clear()
    seen.append(clock.epoch)
    assert len(set(seen)) == 4


def test_wall_time_saturates_at_the_end_of_time() -> None:
    real = FakeTime()
    clock = VirtualClock("wall", rate=MAX_RATE, real_time=real)
    clock.set(T0)
    real.now += 1e12  # far past what a datetime holds
    assert clock.now() == datetime.max.replace(tzinfo=UTC)
    clock.set(T0, rate=1)
    clock.advance(timedelta.max)
    real.now += 10
    assert clock.now() == datetime.max.replace(tzinfo=UTC)
    assert clock.state().virtual_time == datetime.max.replace(tzinfo=UTC)


def test_rate_zero_freezes_wall_time() -> None:
    real = FakeTime()
    clock = VirtualClock("wall", rate=0, real_time=real)
    clock.set(T0)
    real.now += 1e6
    assert clock.now() == T0


def test_setting_again_restarts_from_the_new_time_and_rate() -> None:
    real = FakeTime()
    clock = VirtualClock("wall", rate=1, real_time=real)
    clock.set(T0)
    real.now += 10
    later = T0 + timedelta(days=1)
    clock.set(later, rate=2)
    assert clock.rate == 2
    assert clock.now() == later
    real.now += 10
    assert clock.now() == later + timedelta(seconds=20)
    clock.set(T0, mode="stepped")
    real.now += 10
    assert (clock.mode, clock.now()) == ("stepped", T0)


@pytest.mark.parametrize("rate", [0, 1, 0.5, MAX_RATE])
def test_rates_in_bounds(rate: float) -> None:
    clock = VirtualClock()
    clock.set(T0, rate=rate)
    assert clock.rate == rate


@pytest.mark.parametrize("rate", [-1, -0.001, MAX_RATE + 1])
def test_rates_out_of_bounds_change_nothing(rate: float) -> None:
    clock = VirtualClock(rate=3)
    with pytest.raises(
        ValueError, match=r"virtual_seconds_per_real_second must be in \[0, 86400\]"
    ):
        clock.set(T0, rate=rate)
    assert (clock.armed, clock.rate) == (False, 3)


def test_clear_disarms() -> None:
    clock = VirtualClock()
    clock.set(T0)
    clock.clear()
    assert (clock.armed, clock.now(), clock.start) == (False, None, None)


def test_state_reports_everything() -> None:
    real = FakeTime()
    clock = VirtualClock("wall", rate=2, real_time=real)
    clock.set(T0)
    real.now += 30
    state = clock.state()
    assert state.armed and state.mode == "wall"
    assert state.virtual_time == T0 + timedelta(minutes=1)
    assert state.virtual_seconds_per_real_second == 2
    assert state.start == T0


def test_from_spec_arms_a_clock_with_a_start() -> None:
    spec = ClockSpec(start=T0, mode="wall", rate=5, default_duration=timedelta(minutes=2))
    clock = VirtualClock.from_spec(spec)
    assert clock.armed and clock.start == T0
    assert (clock.mode, clock.rate, clock.default_duration) == ("wall", 5, timedelta(minutes=2))
    assert not VirtualClock.from_spec(ClockSpec()).armed


# -- the gateway's clock ---------------------------------------------------------------------


async def test_an_unarmed_clock_in_the_gateway(gw: Gateway, agent: Principal) -> None:
    with pytest.raises(ClockError, match="not armed"):
        gw.clock_time()
    assert gw.clock_state().armed is False
    assert "get_time" not in [t.name for t in gw.list_tools(agent)]
    out = await gw.call(agent, "get_time", {})
    assert out.error is not None and out.error.kind == "unknown_tool"
    with pytest.raises(ClockError, match="not armed"):
        await gw.advance_clock(SYSTEM, timedelta(hours=1))
    record = await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    assert gw.instance().trajectory[record.seq].virtual_time is None


async def test_arming_adds_get_time_and_clearing_removes_it(gw: Gateway, agent: Principal) -> None:
    state = await gw.set_clock(SYSTEM, T0)
    assert (state.armed, state.virtual_time, state.mode) == (True, T0, "stepped")
    assert gw.clock_time() == T0
    tools = {t.name: t for t in gw.list_tools(agent)}
    assert "get_time" in tools
    assert tools["get_time"].input_schema["properties"]["time_zone"]["type"] == "string"
    assert tools["get_time"].input_schema["additionalProperties"] is False
    assert "get_time" in gw.status().tools and gw.status().clock_armed
    out = await gw.call(agent, "get_time", {})
    assert out.value == {
        "current_time": "2026-03-02T09:00:00Z",
        "virtual_time": "2026-03-02T09:00:00Z",
    }
    assert gw.clock_time() == T0  # get_time takes no time

    cleared = await gw.clear_clock(SYSTEM)
    assert cleared.armed is False
    assert "get_time" not in [t.name for t in gw.list_tools(agent)]
    assert (await gw.call(agent, "get_time", {})).error.kind == "unknown_tool"
    events = [r.event for r in gw.instance().trajectory if r.kind == "control"]
    assert events == ["clock_set", "clock_clear"]


async def test_stepped_mode_advances_by_each_tools_duration(gw: Gateway, agent: Principal) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})  # 60 s
    assert gw.clock_time() == T0 + timedelta(seconds=60)
    await gw.call(agent, "get_account", {"account_id": "a1"})  # 0 s
    assert gw.clock_time() == T0 + timedelta(seconds=60)
    await gw.call(agent, "transfer", {"source": "a1", "target": "a2", "amount": 1})  # default 1 s
    assert gw.clock_time() == T0 + timedelta(seconds=61)
    # Each record carries the virtual time at which its call started.
    times = [r.virtual_time for r in gw.instance().trajectory.calls()]
    assert times == [T0, T0 + timedelta(seconds=60), T0 + timedelta(seconds=60)]


async def test_the_tool_sees_the_virtual_time(gw: Gateway, agent: Principal) -> None:
    await gw.set_clock(SYSTEM, T0)
    assert (await gw.call(agent, "whoami", {})).value["now"] == "2026-03-02T09:00:00+00:00"


async def test_calls_that_do_not_run_take_no_time(gw: Gateway, agent: Principal) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.call(agent, "nope", {})
    await gw.call(agent, "deposit", {"account_id": "a1"})
    await gw.call(agent, "freeze", {"account_id": "a1"})  # denied
    assert gw.clock_time() == T0
    # A call that ran and failed took its time.
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": -1})
    assert gw.clock_time() == T0 + timedelta(seconds=60)


async def test_a_tool_may_spend_extra_time(gw: Gateway, agent: Principal) -> None:
    await gw.set_clock(SYSTEM, T0)
    out = await gw.call(agent, "wait", {"minutes": 90})
    assert out.ok
    assert gw.clock_time() == T0 + timedelta(minutes=90)


async def test_advance_clock(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    state = await gw.advance_clock(SYSTEM, timedelta(days=2))
    assert state.virtual_time == T0 + timedelta(days=2)
    assert gw.instance().trajectory[-1].event == "clock_advance"


@pytest.mark.parametrize("rate", [False, True, float("nan"), "2", -1, 86401])
async def test_a_rate_that_is_not_a_number_in_range_is_refused(gw: Gateway, rate: object) -> None:
    """`False` once armed a frozen clock (it compares as 0); NaN and strings are refused too."""
    with pytest.raises(ClockError, match="virtual_seconds_per_real_second must be"):
        await gw.set_clock(SYSTEM, T0, rate=rate)  # type: ignore[arg-type]
    assert not gw.clock_state().armed
    assert len(gw.instance().trajectory) == 0


async def test_the_clock_does_not_advance_backwards(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    with pytest.raises(ClockError, match=r"the clock only moves forward \(got -60 s\)"):
        await gw.advance_clock(SYSTEM, timedelta(minutes=-1))
    assert gw.clock_time() == T0
    assert gw.instance().trajectory[-1].event == "clock_set"


async def test_wall_mode_with_rate_zero_is_frozen_and_calls_do_not_step_it(
    gw: Gateway, agent: Principal
) -> None:
    state = await gw.set_clock(SYSTEM, T0, rate=0, mode="wall")
    assert (state.mode, state.virtual_seconds_per_real_second) == ("wall", 0)
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    assert gw.clock_time() == T0


@pytest.mark.parametrize(
    ("when", "rate", "message"),
    [
        (datetime(2026, 3, 2, 9, 0), None, "needs a timezone"),
        (T0, -1, "virtual_seconds_per_real_second must be in"),
        (T0, 86401, "virtual_seconds_per_real_second must be in"),
        (datetime(9999, 12, 31, 23, 59, tzinfo=UTC), None, "before the year 9001"),
        (datetime(9001, 1, 1, tzinfo=UTC), None, "before the year 9001"),
    ],
)
async def test_bad_clock_settings_are_refused_and_change_nothing(
    gw: Gateway, when: datetime, rate: float | None, message: str
) -> None:
    with pytest.raises(ClockError, match=message) as info:
        await gw.set_clock(SYSTEM, when, rate)
    assert info.value.status == 400
    assert gw.clock_state().armed is False
    assert gw.clock_state().virtual_seconds_per_real_second == 1.0
    assert len(gw.instance().trajectory) == 0


async def test_a_time_after_the_year_9000_is_a_400_over_rest(gw: Gateway) -> None:
    app = create_app(gw, mcp=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        r = await client.put("/clock/set-time", json={"virtual_time": "9999-12-31T23:59:00Z"})
        assert r.status_code == 400
        assert r.json()["error"]["kind"] == "bad_request"
        assert "before the year 9001" in r.json()["error"]["message"]
        assert (await client.get("/clock/state")).json()["armed"] is False
    assert gw.clock_state().armed is False


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"virtual_seconds_per_real_second": False}, "virtual_seconds_per_real_second"),
        ({"virtual_seconds_per_real_second": True}, "virtual_seconds_per_real_second"),
        ({"virtual_seconds_per_real_second": "60"}, "virtual_seconds_per_real_second"),
    ],
)
async def test_a_rate_that_is_not_a_number_is_a_400_naming_the_field_over_rest(
    gw: Gateway, body: dict, field: str
) -> None:
    app = create_app(gw, mcp=False)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
        r = await client.put(
            "/clock/set-time", json={"virtual_time": "2026-03-02T09:00:00Z", **body}
        )
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"].startswith(f"{field}: ")
        r = await client.post("/clock/advance", json={"seconds": True})
        assert r.status_code == 400, r.text
        assert r.json()["error"]["message"].startswith("seconds: ")
    assert gw.clock_state().armed is False


async def test_the_year_9000_is_still_accepted(gw: Gateway, agent: Principal) -> None:
    late = datetime(9000, 12, 31, 23, 59, tzinfo=UTC)
    assert (await gw.set_clock(SYSTEM, late)).virtual_time == late
    assert (await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})).ok
    assert gw.clock_time() == late + timedelta(seconds=60)


async def test_a_wall_clock_advanced_past_the_end_of_time_saturates_and_keeps_working(
    gw: Gateway, agent: Principal
) -> None:
    end = datetime.max.replace(tzinfo=UTC)
    await gw.set_clock(SYSTEM, T0, rate=1, mode="wall")
    state = await gw.advance_clock(SYSTEM, timedelta(days=999_999_999))
    assert state.virtual_time == end
    assert gw.clock_state().virtual_time == end
    assert gw.clock_time() == end
    out = await gw.call(agent, "list_accounts", {})
    assert out.ok
    assert gw.instance().trajectory[out.seq].virtual_time == end
    assert (await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})).ok
    assert (await gw.call(agent, "get_time", {})).value == {
        "current_time": "9999-12-31T23:59:59Z",
        "virtual_time": "9999-12-31T23:59:59.999999Z",
    }


def _env(clock: dict) -> Environment:
    return Environment.from_spec(
        parse_environment_spec(
            {
                "apiVersion": "agentenv/v1",
                "kind": "Environment",
                "name": "clocked",
                "state": {"notes": {}},
                "tools": [{"name": "add_note", "crud": {"collection": "notes", "op": "create"}}],
                "clock": clock,
            }
        )
    )


async def test_a_document_clock_with_a_start_arms_every_instance() -> None:
    gw = Gateway(_env({"start": "2026-03-02T09:00:00Z", "default_duration": "PT5M"}))
    who = Principal("default")
    assert gw.clock_time() == T0
    assert "get_time" in [t.name for t in gw.list_tools(who)]
    await gw.call(who, "add_note", {"record": {"id": "n1"}})
    assert gw.clock_time() == T0 + timedelta(minutes=5)
    gw.create_instance("b")
    assert gw.clock_time("b") == T0  # each instance has its own clock


async def test_same_calls_give_the_same_times(bank_env: Environment, agent: Principal) -> None:
    async def run() -> list:
        gw = Gateway(bank_env)
        await gw.set_clock(SYSTEM, T0)
        for amount in (1, 2, 3):
            await gw.call(agent, "deposit", {"account_id": "a1", "amount": amount})
            await gw.call(agent, "transfer", {"source": "a1", "target": "a2", "amount": 1})
        return [(r.virtual_time, r.state_hash) for r in gw.instance().trajectory]

    assert await run() == await run()


async def test_get_time_in_a_time_zone_adds_the_local_time(gw: Gateway, agent: Principal) -> None:
    await gw.set_clock(SYSTEM, T0)
    out = await gw.call(agent, "get_time", {"time_zone": "America/New_York"})
    assert out.value == {
        "current_time": "2026-03-02T09:00:00Z",
        "virtual_time": "2026-03-02T09:00:00Z",
        "time_zone": "America/New_York",
        "local_time": "2026-03-02T04:00:00-05:00",
    }


async def test_get_time_in_an_unknown_time_zone_is_a_tool_error(
    gw: Gateway, agent: Principal
) -> None:
    await gw.set_clock(SYSTEM, T0)
    out = await gw.call(agent, "get_time", {"time_zone": "Mars/Olympus"})
    assert (out.ok, out.error.kind) == (False, "tool_error")
    assert "unknown time zone 'Mars/Olympus'" in out.error.message
    bad = await gw.call(agent, "get_time", {"zone": "UTC"})  # additionalProperties: false
    assert bad.ok is False


async def test_get_time_reads_to_the_second_and_says_what_it_is_for(
    gw: Gateway, agent: Principal
) -> None:
    await gw.set_clock(SYSTEM, T0.replace(microsecond=250_000), rate=0, mode="wall")
    out = await gw.call(agent, "get_time", {})
    assert out.value["current_time"] == "2026-03-02T09:00:00Z"
    assert out.value["virtual_time"] == "2026-03-02T09:00:00.250000Z"
    (tool,) = [t for t in gw.list_tools(agent) if t.name == "get_time"]
    assert "current_time is UTC" in tool.description
    assert "local_time" in tool.description


async def test_the_clock_state_has_t0_and_an_unarmed_one_says_only_so(gw: Gateway) -> None:
    assert gw.clock_state().to_wire() == {
        "armed": False,
        "virtual_seconds_per_real_second": 1.0,
        "mode": "stepped",
    }
    await gw.set_clock(SYSTEM, T0)
    await gw.advance_clock(SYSTEM, timedelta(minutes=5))
    assert gw.clock_state().to_wire() == {
        "armed": True,
        "t0": "2026-03-02T09:00:00Z",
        "virtual_seconds_per_real_second": 1.0,
        "virtual_time": "2026-03-02T09:05:00Z",
        "mode": "stepped",
    }


async def test_behind_another_gateway_get_time_is_left_to_it(
    bank_env: Environment, agent: Principal
) -> None:
    gw = Gateway(bank_env, behind_gateway=True)
    await gw.set_clock(SYSTEM, T0)
    assert "get_time" not in [t.name for t in gw.list_tools(agent)]
    assert "get_time" not in gw.status().tools
    assert (await gw.call(agent, "get_time", {})).error.kind == "unknown_tool"
    out = await gw.call(agent, "list_accounts", {})
    assert gw.instance().trajectory[out.seq].virtual_time == T0  # the clock still stamps
