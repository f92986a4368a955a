"""The background ticker visits only instances with something due (gateway.ticker).

Two kinds of test. With a fake real-time source (the clocks' and the ticker's), a random
script of clock, trigger, call and drop operations runs on two gateways at once: one ticks
through the heap of due times, the other through the old sweep that visited every instance.
Their trigger logs, trajectories and states must agree after every tick, with the heap
visiting fewer instances. With real time, a running ticker (in process and behind a real
uvicorn server) fires a wall-clock trigger among many idle instances, wakes for a trigger
registered while it sleeps, passes over a dropped instance, and visits nothing when nothing
is due. Visits are counted, never timed: a firing is waited for with a generous safety
limit, which only a ticker that slept through it would hit.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal, ToolContext
from agentenv.env.tool import Tool, tool
from agentenv.gateway import GatewayError
from agentenv.gateway.errors import ClockError
from agentenv.gateway.firing import NlInstruction
from agentenv.gateway.ticker import Ticker
from agentenv.serve.server import make_server
from agentenv.spec.environment import ClockSpec
from agentenv.spec.triggers import TriggerRegistration
from agentenv.state import State

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
FAR = "2100-01-01T00:00:00Z"
AGENT = Principal("default", name="ada")
SAFETY_S = 15.0  # a firing not seen by then was slept through: a failure, not a timing
WALL = {"mode": "wall", "rate": 86400}  # an hour of virtual time is 1/24 s of real time


@tool
def bump(ctx: ToolContext, name: str) -> int:
    """Count one more firing under `name`."""
    record = ctx.state.get("counters", name)
    count = (record["count"] if record else 0) + 1
    ctx.state.put("counters", {"id": name, "count": count})
    return count


@tool(duration=timedelta(minutes=1))
def answer(ctx: ToolContext, topic: str) -> str:
    """Answer a topic (what deadlines wait for)."""
    ctx.state.put("answers", {"id": topic})
    return topic


def make_env(**fields: Any) -> Environment:
    built = [Tool.from_function(fn) for fn in (bump, answer)]
    tools: dict[str, Tool] = {t.name: t for t in built}
    seed = State.from_records({"counters": [{"id": "seed", "count": 0}], "answers": []})
    return Environment(name="ticking", tools=tools, seed=seed.snapshot(), **fields)


def reg(*triggers: dict[str, Any]) -> TriggerRegistration:
    return TriggerRegistration.model_validate({"triggers": list(triggers)})


def counting(trigger_id: str, **when: Any) -> dict[str, Any]:
    action = {"type": "tool", "tool": "bump", "args": {"name": trigger_id}}
    return {"id": trigger_id, "when": {"type": "time", **when}, "actions": [action]}


def count(gw: Gateway, name: str, instance: str = "default") -> int:
    record = gw.instance(instance).state.get("counters", name)
    return record["count"] if record else 0


def status(gw: Gateway, trigger_id: str, instance: str = "default") -> str:
    [info] = [t for t in gw.triggers_state(instance).triggers if t.id == trigger_id]
    return info.status


def ticker(gw: Gateway) -> Ticker:
    """The gateway's own ticker, whose visits the tests count."""
    return gw._firer.ticker


# -- the heap against the sweep, on a fake clock ---------------------------------------------


class FakeTime:
    """A real-time source that moves only when told."""

    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


_WALL_FIELDS = ("ts", "detected_at", "fired_at", "last_failure_at")


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _WALL_FIELDS}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def observe(gw: Gateway) -> dict[str, Any]:
    """Everything a tick can change, but wall-clock stamps."""
    seen: dict[str, Any] = {}
    for instance in gw.instances:
        inst = gw.instance(instance)
        records = [
            (r.kind, r.virtual_time, r.tool, r.trigger_id, r.event, r.detail, r.state_hash)
            for r in inst.trajectory
        ]
        seen[instance] = (
            _strip(gw.triggers_state(instance).to_wire()),
            records,
            inst.state.hash(),
        )
    return seen


def random_trigger(rng: random.Random, trigger_id: str, ids: list[str]) -> dict[str, Any]:
    minutes = rng.choice([0, 1, 7, 30, 90, 600])
    kind = rng.randrange(9)
    if kind == 0:
        when: dict[str, Any] = {"at": (T0 + timedelta(minutes=rng.randrange(-60, 900))).isoformat()}
    elif kind == 1:
        when = {"after": f"PT{minutes}M"}
    elif kind == 2:
        when = {"offset": f"PT{minutes}M"}
    elif kind == 3:
        when = {"after": f"PT{minutes}M", "every": "PT13M", "count": rng.randint(1, 12)}
    elif kind == 4:
        when = {"every": "PT45M", "until": f"PT{rng.randint(1, 12)}H"}
    elif kind == 5:
        when = {"every": {"dist": "exp", "mean": "PT20M"}, "seed": rng.randrange(99), "count": 6}
    elif kind == 6:
        when = {"after": f"PT{minutes or 1}M", "unless": {"tool": "answer"}}
    elif kind == 7 and ids:
        when = {"after": rng.choice(ids), "offset": f"PT{minutes or 5}M"}
    else:  # an action trigger whose firing is delayed: a queued firing
        action = {"type": "tool", "tool": "bump", "args": {"name": trigger_id}}
        return {
            "id": trigger_id,
            "when": {"type": "action", "tool": "answer", "delay": f"PT{minutes or 3}M"},
            "actions": [action],
        }
    trigger = counting(trigger_id, **when)
    if rng.random() < 0.3:  # a second action put off: the firing waits in the queue
        later = {"type": "tool", "tool": "bump", "args": {"name": f"{trigger_id}-later"}}
        trigger["actions"].append({**later, "delay": f"PT{rng.choice([2, 40])}M"})
    return trigger


async def run_script(seed: int, env: Environment) -> tuple[int, int]:
    """The same random operations on a heap-ticked and a swept gateway; they must agree
    after every tick. Returns the instances each visited."""
    rng = random.Random(seed)
    fake = FakeTime()
    heap, swept = Gateway(env), Gateway(env)
    for gw in (heap, swept):
        ticker(gw).time_source = fake
        gw.instance().clock.real_time = fake
    names = ["default"]
    triggers: dict[str, list[str]] = {"default": []}
    made = 0

    async def both(method: str, *args: Any, **kwargs: Any) -> None:
        """`gw.method(*args, **kwargs)` on each gateway: the same outcome on both."""
        outcomes = []
        for gw in (heap, swept):
            try:
                result = getattr(gw, method)(*args, **kwargs)
                if asyncio.iscoroutine(result):
                    await result
                if method == "create_instance":
                    result.clock.real_time = fake
                outcomes.append(("ok", None))
            except (GatewayError, ClockError) as exc:
                outcomes.append((type(exc).__name__, str(exc)))
        assert outcomes[0] == outcomes[1]

    for _ in range(70):
        name = rng.choice(names)
        roll = rng.random()
        if roll < 0.08 and len(names) < 6:
            made += 1
            new = f"i{made}"
            await both("create_instance", new)
            names.append(new)
            triggers[new] = []
        elif roll < 0.2:
            at = T0 + timedelta(minutes=rng.randrange(0, 120))
            rate = rng.choice([0, 1, 60, 3600, 86400])
            mode = rng.choice(["wall", "wall", "stepped"])
            await both("set_clock", SYSTEM, at, rate, mode, instance=name)
        elif roll < 0.45:
            trigger_id = f"t{rng.randrange(10**6)}"
            spec = random_trigger(rng, trigger_id, triggers[name])
            await both("register_triggers", SYSTEM, reg(spec), instance=name)
            triggers[name].append(trigger_id)
        elif roll < 0.55:
            topic = f"q{rng.randrange(5)}"
            await both("call", AGENT, "answer", {"topic": topic}, instance=name)
        elif roll < 0.6:
            delta = timedelta(minutes=rng.choice([1, 30, 240]))
            await both("advance_clock", SYSTEM, delta, instance=name)
        elif roll < 0.64 and triggers[name]:
            ids = None if rng.random() < 0.2 else [rng.choice(triggers[name])]
            await both("remove_triggers", SYSTEM, ids, instance=name)
        elif roll < 0.66:
            await both("clear_clock", SYSTEM, instance=name)
        elif roll < 0.69 and name != "default":
            await both("drop_instance", name)
            names.remove(name)
        else:
            fake.now += rng.choice([1e-4, 0.01, 0.05, 0.3, 2.0, 40.0])
            await heap.tick()
            await ticker(swept).sweep(swept._instances)
            assert observe(heap) == observe(swept)
    return ticker(heap).visits, ticker(swept).visits


async def test_the_heap_fires_exactly_what_the_sweep_fires() -> None:
    env = make_env()
    heap_visits = sweep_visits = 0
    for seed in range(40):
        ours, theirs = await run_script(seed, env)
        assert ours <= theirs, f"seed {seed}"
        heap_visits, sweep_visits = heap_visits + ours, sweep_visits + theirs
    assert 0 < heap_visits < sweep_visits / 3  # it visits what is due, and fires it all


async def test_a_busy_instance_is_passed_over_and_visited_a_period_later() -> None:
    fake = FakeTime()
    gw = Gateway(make_env())
    ticker(gw).time_source = fake
    inst = gw.instance()
    inst.clock.real_time = fake
    await gw.set_clock(SYSTEM, T0, 3600, "wall")
    await gw.register_triggers(SYSTEM, reg(counting("soon", after="PT1M")))
    fake.now += 1.0  # a minute of virtual time: due
    async with inst.lock:  # a control op or a call holds the instance
        await gw.tick()
    assert (ticker(gw).visits, count(gw, "soon")) == (0, 0)
    await gw.tick()  # the retry is a period away
    assert ticker(gw).visits == 0
    fake.now += ticker(gw).period
    await gw.tick()
    assert (ticker(gw).visits, count(gw, "soon")) == (1, 1)


async def test_a_tick_cancelled_mid_visit_leaves_the_rest_due() -> None:
    never = asyncio.Event()

    @tool
    async def hang(ctx: ToolContext) -> None:
        """Wait for ever."""
        await never.wait()

    env = Environment(
        name="hanging",
        tools={t.name: t for t in map(Tool.from_function, (bump, hang))},
        seed=State.from_records({"counters": [{"id": "seed", "count": 0}]}).snapshot(),
    )
    fake = FakeTime()
    gw = Gateway(env)
    ticker(gw).time_source = fake
    hanging = {"id": "stuck", "when": {"type": "time", "after": "PT1M"}}
    hanging["actions"] = [{"type": "tool", "tool": "hang", "args": {}}]
    for name, spec in (("a", hanging), ("b", counting("soon", after="PT2M"))):
        gw.create_instance(name).clock.real_time = fake
        await gw.set_clock(SYSTEM, T0, 3600, "wall", instance=name)
        await gw.register_triggers(SYSTEM, reg(spec), instance=name)
    fake.now += 5.0  # both due: "a" first, and its firing never ends
    tick = asyncio.create_task(gw.tick())
    while status(gw, "stuck", "a") != "firing":
        await asyncio.sleep(0)
    tick.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await tick
    assert count(gw, "soon", "b") == 0
    await gw.tick()  # "b" was popped but not visited: it is still due
    assert count(gw, "soon", "b") == 1
    assert status(gw, "stuck", "a") == "failed"  # "the firing was cancelled"


async def test_what_comes_due_while_an_nl_action_waits_for_its_executor_fires_meanwhile() -> None:
    answered = asyncio.Event()
    sent: list[str] = []

    async def executor(request: NlInstruction) -> str:
        sent.append(request.instruction)
        await answered.wait()
        return "done"

    fake = FakeTime()
    gw = Gateway(make_env(), nl_sender=executor)
    ticker(gw).time_source = fake
    gw.instance().clock.real_time = fake
    await gw.set_clock(SYSTEM, T0, 60, "wall")  # a virtual minute a real second
    ask = {"id": "ask", "when": {"type": "time", "after": "PT1M"}}
    ask["actions"] = [{"type": "nl", "instruction": "Please look into it"}]
    await gw.register_triggers(SYSTEM, reg(ask, counting("meanwhile", after="PT3M")))
    fake.now += 2.0
    asking = asyncio.create_task(gw.tick())
    while not sent:
        await asyncio.sleep(0)
    fake.now += 2.0  # "meanwhile" is due while the executor works, the lock released
    await gw.tick()
    assert (count(gw, "meanwhile"), status(gw, "ask")) == (1, "firing")
    answered.set()
    await asking
    assert (status(gw, "ask"), status(gw, "meanwhile")) == ("fired", "fired")


async def test_a_stepped_backlog_past_the_catch_up_limit_drains_one_tick_at_a_time() -> None:
    gw = Gateway(make_env())
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(counting("often", every="PT1S", count=2500)))
    await gw.advance_clock(SYSTEM, timedelta(hours=1))
    assert count(gw, "often") == 1000  # MAX_CATCH_UP firings by one clock jump
    await gw.tick()
    assert count(gw, "often") == 2000
    await gw.tick()
    await gw.tick()
    assert (count(gw, "often"), ticker(gw).visits) == (2500, 2)  # nothing left: no visit


async def test_stale_entries_do_not_pile_up_when_nobody_ticks() -> None:
    # Each new instance arms the document's wall clock and time trigger: one push each.
    env = make_env(
        clock=ClockSpec(start=T0, mode="wall", rate=1.0),
        triggers=reg(counting("far", at=FAR)),
    )
    gw = Gateway(env)
    for i in range(5000):
        gw.create_instance(f"i{i}")
        gw.drop_instance(f"i{i}")
    for _ in range(5000):  # and one instance's due time moved again and again
        await gw.advance_clock(SYSTEM, timedelta(seconds=1))
    assert ticker(gw).entries <= 2048


# -- a running ticker, real time -------------------------------------------------------------


def wall_env() -> Environment:
    return make_env(clock=ClockSpec(start=T0, mode="wall", rate=1.0))


async def crowd(gw: Gateway, n: int) -> None:
    """`n` idle instances on wall clocks; one in a hundred with a far-future trigger."""
    for i in range(n):
        gw.create_instance(f"i{i}")
        if i % 100 == 0:
            await gw.register_triggers(SYSTEM, reg(counting("far", at=FAR)), instance=f"i{i}")


async def until(done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + SAFETY_S
    while not done():
        assert time.monotonic() < deadline, "not fired: the ticker slept through it"
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def running(gw: Gateway, period: float = 0.25) -> AsyncIterator[None]:
    task = asyncio.create_task(gw.run_ticker(period))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_wall_clock_trigger_fires_among_many_idle_instances() -> None:
    gw = Gateway(wall_env())
    await crowd(gw, 2000)
    async with running(gw):
        await gw.set_clock(SYSTEM, T0, 86400, "wall", instance="i7")
        await gw.register_triggers(SYSTEM, reg(counting("soon", after="PT1H")), instance="i7")
        await until(lambda: count(gw, "soon", "i7") == 1)
    [fired] = [r for r in gw.instance("i7").trajectory if r.event == "fired"]
    [added] = [e for e in gw.triggers_state("i7").events if e.kind == "added"]
    assert added.virtual_time is not None  # `after` counts from the registration
    assert fired.virtual_time == datetime.fromisoformat(added.virtual_time) + timedelta(hours=1)
    assert ticker(gw).visits == 1  # that one instance, once


async def test_an_idle_gateway_visits_no_instance() -> None:
    gw = Gateway(wall_env())
    await crowd(gw, 2000)
    async with running(gw, period=0.01):
        await asyncio.sleep(0.2)
        await gw.tick()
    assert ticker(gw).visits == 0
    await ticker(gw).sweep(gw._instances)  # the old tick: every instance, every time
    assert ticker(gw).visits == 2001


async def test_a_trigger_registered_while_the_ticker_sleeps_wakes_it() -> None:
    gw = Gateway(wall_env())
    await crowd(gw, 300)
    async with running(gw):
        await asyncio.sleep(0.05)  # asleep until the far future (an hour at a time)
        await gw.set_clock(SYSTEM, T0, 86400, "wall", instance="i3")
        await gw.register_triggers(SYSTEM, reg(counting("later", after="PT2H")), instance="i3")
        await until(lambda: count(gw, "later", "i3") == 1)


@pytest.mark.parametrize("frozen", [{"mode": "stepped"}, {"mode": "wall", "rate": 0}])
async def test_a_clock_set_to_move_by_itself_brings_its_trigger_due(frozen: dict) -> None:
    gw = Gateway(make_env())
    await gw.set_clock(SYSTEM, T0, frozen.get("rate"), frozen["mode"])
    await gw.register_triggers(SYSTEM, reg(counting("at-ten", at="2026-03-02T10:00:00Z")))
    assert ticker(gw).entries == 0  # only a call or a control op moves this clock
    async with running(gw):
        await gw.set_clock(SYSTEM, T0, 86400, "wall")
        await until(lambda: count(gw, "at-ten") == 1)
    assert status(gw, "at-ten") == "fired"


async def test_a_dropped_instance_is_not_visited() -> None:
    gw = Gateway(make_env())
    for name in ("gone", "sentinel", "again"):
        gw.create_instance(name)
        await gw.set_clock(SYSTEM, T0, 86400, "wall", instance=name)
    await gw.register_triggers(SYSTEM, reg(counting("soon", after="PT1H")), instance="gone")
    await gw.register_triggers(SYSTEM, reg(counting("soon", after="PT1H")), instance="again")
    await gw.register_triggers(SYSTEM, reg(counting("late", after="PT3H")), instance="sentinel")
    gone = gw.instance("gone")
    gw.drop_instance("gone")
    gw.drop_instance("again")
    gw.create_instance("again")  # the same id, a new instance with no trigger
    async with running(gw):
        await until(lambda: count(gw, "late", "sentinel") == 1)  # past the others' time
    [soon] = gone.triggers.state().triggers
    assert (soon.status, gone.state.get("counters", "soon")) == ("armed", None)
    assert ticker(gw).visits == 1  # the sentinel only


# -- behind a real server --------------------------------------------------------------------


@contextlib.contextmanager
def served(gw: Gateway) -> Iterator[str]:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = make_server(gw, host="127.0.0.1", port=port)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + SAFETY_S
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=SAFETY_S)


def test_a_served_gateway_fires_a_wall_clock_trigger_among_many_idle_instances() -> None:
    gw = Gateway(wall_env())
    asyncio.run(crowd(gw, 2000))
    with served(gw) as url, httpx.Client(base_url=f"{url}/instances/i42") as client:
        clock = {"virtual_time": T0.isoformat(), "virtual_seconds_per_real_second": 86400}
        assert client.put("/clock/set-time", json={**clock, "mode": "wall"}).status_code == 200
        body = {"triggers": [counting("soon", after="PT1H")]}
        assert client.post("/triggers/register", json=body).status_code == 200
        deadline = time.monotonic() + SAFETY_S
        while (state := client.get("/triggers/state").json())["triggers"][0]["status"] == "armed":
            assert time.monotonic() < deadline, "not fired: the ticker slept through it"
            time.sleep(0.02)
        assert state["triggers"][0]["status"] == "fired"
        assert [e["kind"] for e in state["events"]][-2:] == ["action_ok", "fired"]
    assert count(gw, "soon", "i42") == 1
    assert ticker(gw).visits == 1
