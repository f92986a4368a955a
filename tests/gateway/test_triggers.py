"""Triggers end to end through the Gateway: action, state and time triggers and their actions."""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.gateway import GatewayError
from agentenv.gateway.firing import NlInstruction
from agentenv.gateway.trigger_rules import TemplateError, check_value, render
from agentenv.gateway.triggers import SUPPORTED_TRIGGER_FEATURES
from agentenv.spec import Predicate, TriggerRegistration, parse_environment_spec

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
AGENT = Principal("agent", name="ada")
SUPERVISOR = Principal("supervisor")

TICKET = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "string", "enum": ["open", "escalated", "closed"]},
        "priority": {"type": "string", "enum": ["low", "high"]},
        "level": {"type": "integer"},
    },
    "required": ["id", "status"],
}


def _crud(name: str, collection: str, op: str, **extra) -> dict:
    return {"name": name, "crud": {"collection": collection, "op": op}, **extra}


def desk_doc(**fields) -> dict:
    return {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": "desk",
        "roles": [{"name": "agent"}, {"name": "supervisor"}],
        "state": {"tickets": {"schema": TICKET}, "notes": {}},
        "seed": {
            "tickets": [{"id": "t1", "title": "Printer", "status": "open", "priority": "low"}]
        },
        "tools": [
            _crud("create_ticket", "tickets", "create", duration=0),
            _crud("update_ticket", "tickets", "update", duration="PT1M"),
            _crud("get_ticket", "tickets", "get", duration=0),
            _crud("delete_ticket", "tickets", "delete"),
            _crud("add_note", "notes", "create", duration=0),
            _crud("list_notes", "notes", "list", duration=0),
        ],
        **fields,
    }


@pytest.fixture(scope="module")
def desk() -> Environment:
    return Environment.from_spec(parse_environment_spec(desk_doc()))


@pytest.fixture
def gw(desk: Environment) -> Gateway:
    return Gateway(desk)


def reg(*triggers: dict, **fields) -> TriggerRegistration:
    return TriggerRegistration.model_validate({"triggers": list(triggers), **fields})


def note_action(note_id: str = "n-${args.id}", **record) -> dict:
    return {"type": "tool", "tool": "add_note", "args": {"record": {"id": note_id, **record}}}


def on_create(trigger_id: str = "escalate", *, where=None, actions=None, **when) -> dict:
    return {
        "id": trigger_id,
        "when": {"type": "action", "tool": "create_ticket", "where": where or [], **when},
        "actions": actions or [note_action()],
    }


async def create(
    gw: Gateway, ticket_id: str, who: Principal = AGENT, instance: str = "default", **fields
):
    args = {"id": ticket_id, "status": "open", "priority": "low", **fields}
    out = await gw.call(who, "create_ticket", args, instance=instance)
    assert out.ok, out.error
    return out


def notes(gw: Gateway, instance: str = "default") -> list[str]:
    return gw.instance(instance).state.keys("notes")


def info(gw: Gateway, trigger_id: str, instance: str = "default"):
    (found,) = [t for t in gw.triggers_state(instance).triggers if t.id == trigger_id]
    return found


def events(gw: Gateway, trigger_id: str, instance: str = "default") -> list[str]:
    return [e.event for e in gw.triggers_state(instance).log if e.trigger_id == trigger_id]


# -- action triggers -------------------------------------------------------------------------


async def test_an_action_trigger_fires_once_with_templated_args(gw: Gateway) -> None:
    ids = await gw.register_triggers(
        SYSTEM,
        reg(
            on_create(
                where=[{"path": "args.priority", "equals": "high"}],
                actions=[
                    note_action(text="High: ${result.title} (${args.id})", level="${args.level}")
                ],
            )
        ),
    )
    assert (ids.ok, ids.added, ids.all) == (True, ["escalate"], ["escalate"])
    assert info(gw, "escalate").status == "armed"
    assert info(gw, "escalate").type == "action"

    await create(gw, "t2", title="Paper", priority="low")
    assert notes(gw) == []
    assert events(gw, "escalate") == ["added"]

    out = await create(gw, "t3", title="Fire", priority="high", level=3)
    assert out.value["id"] == "t3"  # the provoking call's own answer is unchanged
    note = gw.instance().state.get("notes", "n-t3")
    # A placeholder inside text is rendered as text; a lone one keeps its type.
    assert note == {"id": "n-t3", "text": "High: Fire (t3)", "level": 3}
    t = info(gw, "escalate")
    assert (t.status, t.fired, t.error) == ("fired", 1, None)
    assert events(gw, "escalate") == ["added", "detected", "action_ok", "fired"]

    await create(gw, "t4", priority="high")
    assert notes(gw) == ["n-t3"]  # not repeated
    assert info(gw, "escalate").fired == 1


async def test_the_firing_is_in_the_trajectory(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create()))
    out = await create(gw, "t2")
    records = gw.instance().trajectory.since(out.seq)
    assert [(r.kind, r.tool, r.event) for r in records] == [
        ("call", "create_ticket", None),
        ("trigger", "add_note", None),
        ("trigger", None, "fired"),
    ]
    action, fired = records[1], records[2]
    assert (action.role, action.trigger_id) == ("system", "escalate")
    assert action.args == {"record": {"id": "n-t2"}}
    assert fired.trigger_id == "escalate"
    assert fired.state_hash == gw.instance().state.hash()


async def test_a_repeat_trigger_fires_on_every_match(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create(repeat=True)))
    for i in range(3):
        await create(gw, f"t{i + 2}")
    assert notes(gw) == ["n-t2", "n-t3", "n-t4"]
    assert (info(gw, "escalate").status, info(gw, "escalate").fired) == ("armed", 3)


@pytest.mark.parametrize(
    ("where", "fires"),
    [
        ([{"path": "args.title", "regex": "^Fi"}], True),
        ([{"path": "args.title", "regex": "^Pa"}], False),
        ({"args.title": "Fire"}, True),  # the mapping form, a plain value means equals
        ({"args.title": {"exists": True}}, True),
        ({"args.colour": {"exists": True}}, False),
        ({"result.status": "open", "result.priority": {"equals": "high"}}, True),
        ({"result.status": "open", "result.priority": "low"}, False),
        ({"args.title": {"regex": "F"}, "result.nothing": {"exists": True}}, False),
    ],
)
async def test_where_predicates(gw: Gateway, where, fires: bool) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create(where=where)))
    await create(gw, "t2", title="Fire", priority="high")
    assert (notes(gw) == ["n-t2"]) is fires


async def test_watch_roles_limit_who_provokes(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create(repeat=True), watch_roles=["supervisor"]))
    await create(gw, "t2", who=AGENT)
    assert notes(gw) == []
    await create(gw, "t3", who=SUPERVISOR)
    assert notes(gw) == ["n-t3"]


async def test_exists_false_matches_an_argument_the_caller_left_out(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create(where={"args.level": {"exists": False}})))
    await create(gw, "t2")  # no level given
    assert gw.instance().trajectory.calls()[0].args == {
        "id": "t2",
        "status": "open",
        "priority": "low",
    }
    assert notes(gw) == ["n-t2"]


async def test_a_failed_call_provokes_nothing(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create(repeat=True)))
    out = await gw.call(AGENT, "create_ticket", {"id": "t1", "status": "open"})  # key taken
    assert not out.ok
    assert notes(gw) == []
    assert events(gw, "escalate") == ["added"]


async def test_calls_made_by_triggers_provoke_no_triggers(gw: Gateway) -> None:
    loop = {
        "id": "loop",
        "when": {"type": "action", "tool": "add_note", "repeat": True},
        "actions": [note_action("copy-${result.id}")],
    }
    await gw.register_triggers(SYSTEM, reg(loop))
    await gw.call(AGENT, "add_note", {"record": {"id": "x"}})
    assert notes(gw) == ["x", "copy-x"]
    assert info(gw, "loop").fired == 1


async def test_trigger_actions_run_as_the_system_past_access_rules(gw: Gateway) -> None:
    await gw.set_tool_access(SYSTEM, "disable", "*", ["add_note"])
    await gw.register_triggers(SYSTEM, reg(on_create()))
    await create(gw, "t2")
    assert notes(gw) == ["n-t2"]


async def test_an_action_as_a_role_obeys_that_roles_rules(gw: Gateway) -> None:
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["add_note"])
    action = {**note_action(), "as": "agent"}
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[action])))
    await create(gw, "t2")
    assert notes(gw) == []
    t = info(gw, "escalate")
    assert (t.status, t.failure_count) == ("armed", 1)  # a failed firing re-arms it
    assert t.error == "actions[0] (tool): role 'agent' may not call 'add_note'"
    action_record = next(r for r in gw.instance().trajectory if r.kind == "trigger" and r.tool)
    assert (action_record.role, action_record.principal, action_record.denied) == (
        "agent",
        "trigger:escalate",
        True,
    )


# -- delays ----------------------------------------------------------------------------------


async def test_a_delayed_trigger_is_queued_then_fired_when_the_clock_gets_there(
    gw: Gateway,
) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(on_create(delay="PT10M")))
    await create(gw, "t2")
    assert notes(gw) == []
    t = info(gw, "escalate")
    assert t.status == "queued"
    queued = next(e for e in gw.triggers_state().log if e.event == "delayed")
    assert queued.detail == "due 2026-03-02T09:10:00Z"

    await gw.advance_clock(SYSTEM, timedelta(minutes=9))
    assert notes(gw) == []
    assert info(gw, "escalate").status == "queued"

    await gw.advance_clock(SYSTEM, timedelta(minutes=1))
    assert notes(gw) == ["n-t2"]
    assert info(gw, "escalate").status == "fired"
    fired = [r for r in gw.instance().trajectory if r.kind == "trigger" and r.event == "fired"]
    assert fired[0].virtual_time == T0 + timedelta(minutes=10)
    assert events(gw, "escalate") == ["added", "detected", "delayed", "action_ok", "fired"]


async def test_a_once_trigger_is_queued_only_once(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(on_create(delay="PT10M")))
    await create(gw, "t2")
    await create(gw, "t3")
    await gw.advance_clock(SYSTEM, timedelta(hours=1))
    assert notes(gw) == ["n-t2"]


async def test_a_repeat_delayed_trigger_queues_every_match(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(on_create(delay="PT10M", repeat=True)))
    await create(gw, "t2")
    await gw.advance_clock(SYSTEM, timedelta(minutes=5))
    await create(gw, "t3")
    await gw.advance_clock(SYSTEM, timedelta(minutes=5))
    assert notes(gw) == ["n-t2"]
    assert info(gw, "escalate").status == "queued"
    await gw.advance_clock(SYSTEM, timedelta(minutes=5))
    assert notes(gw) == ["n-t2", "n-t3"]
    assert info(gw, "escalate").status == "armed"


async def test_a_delay_needs_an_armed_clock(gw: Gateway) -> None:
    with pytest.raises(GatewayError, match="'delay' needs an armed clock"):
        await gw.register_triggers(SYSTEM, reg(on_create("ok"), on_create("late", delay="PT1M")))
    assert gw.triggers_state().triggers == []
    assert gw.triggers_state().log == []


async def test_a_queued_firing_of_a_removed_trigger_never_runs(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(on_create(delay="PT10M")))
    await create(gw, "t2")
    await gw.remove_triggers(SYSTEM, ["escalate"])
    await gw.advance_clock(SYSTEM, timedelta(hours=1))
    assert notes(gw) == []


# -- state triggers --------------------------------------------------------------------------


def closed_check(ticket: str = "t1") -> dict:
    return {
        "tool": "get_ticket",
        "args": {"id": ticket},
        "extract": "status",
        "predicate": {"equals": "closed"},
    }


async def test_a_state_trigger_fires_when_its_checks_hold(gw: Gateway) -> None:
    trigger = {
        "id": "closed",
        "when": {"type": "state", "check": [closed_check()]},
        "actions": [note_action("closed-note")],
    }
    await gw.register_triggers(SYSTEM, reg(trigger))
    assert info(gw, "closed").type == "state"
    await gw.call(AGENT, "update_ticket", {"id": "t1", "status": "escalated"})
    assert notes(gw) == []
    before = gw.instance().state.changes
    await gw.call(AGENT, "update_ticket", {"id": "t1", "status": "closed"})
    assert notes(gw) == ["closed-note"]
    assert (
        gw.instance().state.changes == before + 2
    )  # the update and the note; checks write nothing
    assert info(gw, "closed").status == "fired"
    assert events(gw, "closed") == ["added", "detected", "action_ok", "fired"]


async def test_a_state_check_that_fails_is_logged_and_does_not_fire(gw: Gateway) -> None:
    trigger = {
        "id": "missing",
        "when": {"type": "state", "check": [closed_check("t9")]},
        "actions": [note_action("never")],
    }
    await gw.register_triggers(SYSTEM, reg(trigger))
    await gw.call(AGENT, "update_ticket", {"id": "t1", "status": "closed"})
    assert notes(gw) == []
    assert info(gw, "missing").status == "armed"
    failed = [e for e in gw.triggers_state().log if e.event == "eval_error"]
    assert len(failed) == 1
    assert failed[0].detail == "ToolError: no record 't9' in 'tickets'"


async def test_a_state_check_on_an_unknown_tool_is_refused_at_registration(gw: Gateway) -> None:
    trigger = {
        "id": "bad-check",
        "when": {
            "type": "state",
            "check": [{"tool": "get_tikcet", "args": {}, "predicate": {"exists": True}}],
        },
        "actions": [note_action("x")],
    }
    with pytest.raises(GatewayError, match="get_tikcet"):
        await gw.register_triggers(SYSTEM, reg(trigger))
    assert gw.triggers_state().triggers == []


# -- time triggers ---------------------------------------------------------------------------


def timed(trigger_id: str, note: str | None = None, **when) -> dict:
    return {
        "id": trigger_id,
        "when": {"type": "time", **when},
        "actions": [note_action(note or trigger_id)],
    }


def fire_times(gw: Gateway, trigger_id: str, instance: str = "default") -> list[datetime]:
    return [
        r.virtual_time
        for r in gw.instance(instance).trajectory
        if r.kind == "trigger" and r.event == "fired" and r.trigger_id == trigger_id
    ]


def counting(trigger_id: str, **when) -> dict:
    """A time trigger whose action only reads, so it can fire any number of times."""
    return {
        "id": trigger_id,
        "when": {"type": "time", **when},
        "actions": [{"type": "tool", "tool": "list_notes", "args": {}}],
    }


async def test_at_fires_once_the_clock_reaches_it(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(timed("alarm", at="2026-03-02T10:00:00Z")))
    assert info(gw, "alarm").next_due == T0 + timedelta(hours=1)
    await gw.advance_clock(SYSTEM, timedelta(minutes=59))
    assert notes(gw) == []
    await gw.advance_clock(SYSTEM, timedelta(minutes=30))
    assert notes(gw) == ["alarm"]
    assert fire_times(gw, "alarm") == [T0 + timedelta(hours=1)]
    t = info(gw, "alarm")
    assert (t.status, t.fired, t.next_due) == ("fired", 1, None)


async def test_an_at_trigger_may_be_registered_before_the_clock_is_armed(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(timed("alarm", at="2026-03-02T10:00:00Z")))
    await gw.set_clock(SYSTEM, T0 + timedelta(hours=2))  # arming past it fires it
    assert notes(gw) == ["alarm"]
    assert fire_times(gw, "alarm") == [T0 + timedelta(hours=1)]


async def test_after_counts_from_registration_and_offset_from_clock_start(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.advance_clock(SYSTEM, timedelta(minutes=10))
    await gw.register_triggers(
        SYSTEM, reg(timed("after", after="PT2H"), timed("offset", offset="PT3H"))
    )
    assert info(gw, "after").next_due == T0 + timedelta(hours=2, minutes=10)
    assert info(gw, "offset").next_due == T0 + timedelta(hours=3)
    await gw.advance_clock(SYSTEM, timedelta(hours=5))
    assert fire_times(gw, "after") == [T0 + timedelta(hours=2, minutes=10)]
    assert fire_times(gw, "offset") == [T0 + timedelta(hours=3)]
    assert notes(gw) == ["after", "offset"]  # fired in time order


async def test_a_relative_time_trigger_registered_before_the_clock_counts_from_its_arming(
    gw: Gateway,
) -> None:
    await gw.register_triggers(
        SYSTEM,
        reg(
            timed("rel", after="PT1H"),
            timed("from-start", at="PT2H"),  # the protocol's t0-relative `at`
        ),
    )
    assert info(gw, "rel").next_due is None  # not known until the clock is armed
    await gw.set_clock(SYSTEM, T0)
    assert info(gw, "rel").next_mark == "2026-03-02T10:00:00Z"
    assert info(gw, "from-start").next_mark == "2026-03-02T11:00:00Z"
    await gw.advance_clock(SYSTEM, timedelta(hours=3))
    assert fire_times(gw, "rel") == [T0 + timedelta(hours=1)]
    assert fire_times(gw, "from-start") == [T0 + timedelta(hours=2)]


async def test_every_with_count_fires_every_missed_occurrence_in_order(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(counting("tick", every="PT1H", count=3)))
    await gw.advance_clock(SYSTEM, timedelta(hours=10))
    assert fire_times(gw, "tick") == [T0 + timedelta(hours=h) for h in (1, 2, 3)]
    t = info(gw, "tick")
    assert (t.status, t.fired, t.next_due) == ("fired", 3, None)


async def test_every_fires_step_by_step_as_time_passes(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(counting("tick", every="PT1H", count=3)))
    for _ in range(5):
        await gw.advance_clock(SYSTEM, timedelta(hours=1))
    assert fire_times(gw, "tick") == [T0 + timedelta(hours=h) for h in (1, 2, 3)]


async def test_every_with_until(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(
        SYSTEM, reg(counting("tick", after="PT30M", every="PT1H", until="2026-03-02T12:00:00Z"))
    )
    await gw.advance_clock(SYSTEM, timedelta(days=1))
    assert fire_times(gw, "tick") == [T0 + timedelta(minutes=m) for m in (30, 90, 150)]
    assert info(gw, "tick").status == "fired"


async def test_an_open_ended_every_stays_armed(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(counting("tick", every="PT15M")))
    await gw.advance_clock(SYSTEM, timedelta(hours=1))
    t = info(gw, "tick")
    assert (t.status, t.fired, t.next_due) == ("armed", 4, T0 + timedelta(minutes=75))


async def test_count_is_per_trigger_when_several_come_due_together(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(
        SYSTEM,
        reg(counting("first", after="PT30M"), counting("tick", every="PT1H", count=3)),
    )
    await gw.advance_clock(SYSTEM, timedelta(hours=10))
    assert info(gw, "tick").fired == 3


async def test_time_triggers_fire_when_a_call_moves_the_clock(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(timed("soon", after="PT30S")))
    await gw.call(AGENT, "update_ticket", {"id": "t1", "title": "x"})  # takes one minute
    assert notes(gw) == ["soon"]


async def test_a_random_every_is_reproducible_with_its_seed(gw: Gateway) -> None:
    gw.create_instance("b")
    gw.create_instance("c")
    for instance, seed in (("default", 7), ("b", 7), ("c", 8)):
        await gw.set_clock(SYSTEM, T0, instance=instance)
        await gw.register_triggers(
            SYSTEM,
            reg(counting("jitter", every=["PT10M", "PT20M"], seed=seed, count=6)),
            instance=instance,
        )
        await gw.advance_clock(SYSTEM, timedelta(hours=3), instance=instance)
    a, b, c = (fire_times(gw, "jitter", i) for i in ("default", "b", "c"))
    assert len(a) == 6
    assert a == b
    assert a != c
    gaps = [(y - x) for x, y in zip([T0, *a], a, strict=False)]
    assert all(timedelta(minutes=10) <= g <= timedelta(minutes=20) for g in gaps)


async def test_a_random_every_without_a_seed_is_reproducible(desk: Environment) -> None:
    async def run() -> tuple:
        gw = Gateway(desk)
        await gw.set_clock(SYSTEM, T0)
        await gw.register_triggers(SYSTEM, reg(counting("jitter", every=["PT1M", "PT10M"])))
        first_due = info(gw, "jitter").next_due
        await gw.advance_clock(SYSTEM, timedelta(hours=1))
        return first_due, info(gw, "jitter").next_due, fire_times(gw, "jitter"), gw.status()

    (due, nxt, times, status), *others = [await run() for _ in range(3)]
    assert T0 + timedelta(minutes=1) <= due <= T0 + timedelta(minutes=10)
    assert len(times) >= 6  # an hour of 1 to 10 minute gaps
    for other in others:
        assert other[:3] == (due, nxt, times)
        assert other[3].state_hash == status.state_hash


async def test_near_the_end_of_time_relative_triggers_never_come_due(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    end = (await gw.advance_clock(SYSTEM, timedelta.max)).virtual_time  # saturates
    assert end == datetime.max.replace(tzinfo=UTC)
    await gw.register_triggers(
        SYSTEM, reg(timed("later", after="PT2M"), on_create("slow", delay="PT2M"))
    )
    assert (info(gw, "later").status, info(gw, "later").next_due) == ("armed", None)

    out = await create(gw, "t2")  # provokes the delayed trigger, whose moment never comes
    assert out.value["id"] == "t2"
    assert gw.instance().state.has("tickets", "t2")
    assert events(gw, "slow") == ["added", "detected", "failed"]
    failed = gw.triggers_state().log[-1]
    assert failed.detail == "its delay runs past the end of time"

    await gw.advance_clock(SYSTEM, timedelta(hours=1))
    assert notes(gw) == []
    assert (await gw.call(AGENT, "get_ticket", {"id": "t2"})).ok


# -- other actions, failures and verify ------------------------------------------------------


async def test_a_permission_action_changes_tool_access(gw: Gateway) -> None:
    action = {
        "type": "permission",
        "role": "agent",
        "action": "disable",
        "tools": ["delete_ticket"],
    }
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[action])))
    assert "delete_ticket" in [t.name for t in gw.list_tools(AGENT)]
    await create(gw, "t2")
    assert "delete_ticket" not in [t.name for t in gw.list_tools(AGENT)]
    assert (await gw.call(AGENT, "delete_ticket", {"id": "t2"})).denied
    assert (await gw.call(SUPERVISOR, "delete_ticket", {"id": "t2"})).ok
    assert info(gw, "escalate").status == "fired"


async def test_an_nl_action_fails_with_a_clear_reason(gw: Gateway) -> None:
    await gw.register_triggers(
        SYSTEM,
        reg(on_create(actions=[{"type": "nl", "text": "Tell the customer"}, note_action()])),
    )
    await create(gw, "t2")
    t = info(gw, "escalate")
    assert (t.status, t.failure_count) == ("armed", 1)  # a failed firing re-arms it
    assert t.error is not None and "nl actions go to an executor agent over A2A" in t.error
    assert t.error.startswith("actions[0] (nl): ")
    assert notes(gw) == []  # the first failure stops the firing
    assert events(gw, "escalate") == ["added", "detected", "action_failed", "failed"]
    log = [e for e in gw.triggers_state().log if e.event in ("action_failed", "failed")]
    assert [e.detail for e in log] == [t.error, t.error]
    record = gw.instance().trajectory[-1]
    assert (record.kind, record.event, record.detail) == ("trigger", "failed", t.error)


async def test_verify_that_does_not_hold_fails_the_firing(gw: Gateway) -> None:
    action = {**note_action(), "verify": closed_check("t1")}
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[action, note_action("second")])))
    await create(gw, "t2")
    t = info(gw, "escalate")
    assert (t.status, t.error) == ("armed", "actions[0] (tool): verify did not hold")
    assert "second" not in notes(gw)


async def test_verify_that_holds_lets_the_firing_go_on(gw: Gateway) -> None:
    verify = {
        "tool": "get_ticket",
        "args": {"id": "t1"},
        "extract": "status",
        "predicate": {"equals": "open"},
    }
    action = {**note_action(), "verify": verify}
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[action, note_action("second")])))
    await create(gw, "t2")
    assert notes(gw) == ["n-t2", "second"]
    assert info(gw, "escalate").status == "fired"


async def test_a_verify_that_raises_fails_the_firing_not_the_provoking_call(
    bank_env: Environment,
) -> None:
    gw = Gateway(bank_env)
    missing = {"tool": "get_account", "args": {"account_id": "nope"}, "predicate": {"exists": True}}
    trigger = {
        "id": "t1",
        "when": {"type": "action", "tool": "deposit", "repeat": True},
        "actions": [
            {"type": "tool", "tool": "freeze", "args": {"account_id": "a2"}, "verify": missing}
        ],
    }
    await gw.register_triggers(SYSTEM, reg(trigger))

    out = await gw.call(AGENT, "deposit", {"account_id": "a1", "amount": 5})
    assert (out.ok, out.error) == (True, None)
    assert out.value == {"id": "a1", "owner": "Ada", "balance": 105}
    t = info(gw, "t1")
    assert (t.status, t.failure_count) == ("armed", 1)  # a repeat trigger stays armed
    assert t.error is not None and t.error.startswith("actions[0] (tool): ")
    assert "RecordNotFound" in t.error and "nope" in t.error
    assert events(gw, "t1") == ["added", "detected", "action_failed", "failed"]
    record = gw.instance().trajectory[-1]
    assert (record.kind, record.trigger_id, record.event, record.detail) == (
        "trigger",
        "t1",
        "failed",
        t.error,
    )

    out = await gw.call(AGENT, "deposit", {"account_id": "a1", "amount": 5})
    assert out.ok
    assert gw.instance().state.get("accounts", "a1")["balance"] == 110
    assert (info(gw, "t1").status, info(gw, "t1").failure_count) == ("armed", 2)
    assert events(gw, "t1")[4:] == ["detected", "action_failed", "failed"]


async def test_a_failing_tool_action_fails_the_firing_and_writes_nothing(gw: Gateway) -> None:
    bad = {"type": "tool", "tool": "add_note", "args": {"record": {"text": "no id"}}}
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[bad])))
    await create(gw, "t2")
    t = info(gw, "escalate")
    assert (t.status, t.failure_count) == ("armed", 1)  # a failed firing re-arms it
    assert t.error == "actions[0] (tool): invalid record notes: missing key field 'id'"
    assert notes(gw) == []
    action = next(r for r in gw.instance().trajectory if r.kind == "trigger" and r.tool)
    assert action.error is not None and action.error.kind == "tool_error"


async def test_a_placeholder_with_no_value_fails_the_firing(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[note_action("${args.missing}")])))
    await create(gw, "t2")
    t = info(gw, "escalate")
    assert (t.status, t.failure_count) == ("armed", 1)  # a failed firing re-arms it
    assert t.error == "actions[0] (tool): ${args.missing} has no value in the provoking call"
    assert notes(gw) == []


async def test_a_barrier_timeout_fails_the_firing_and_rolls_back(bank_env: Environment) -> None:
    gw = Gateway(bank_env)
    trigger = {
        "id": "slow",
        "when": {"type": "action", "tool": "deposit"},
        "actions": [{"type": "tool", "tool": "stall", "args": {}}],
        "barrier": {"timeout_seconds": 0.01},
    }
    await gw.register_triggers(SYSTEM, reg(trigger))
    out = await gw.call(Principal("agent"), "deposit", {"account_id": "a1", "amount": 1})
    assert out.ok
    t = info(gw, "slow")
    assert (t.status, t.failure_count) == ("armed", 1)  # a failed firing re-arms it
    assert t.error is not None and "barrier" in t.error
    assert gw.instance().state.count("audit") == 0


GATED_TOOLS = """
from agentenv import tool

GATE = None  # an asyncio.Event the test puts here


@tool(duration=0)
def ping() -> str:
    return "pong"


@tool
async def gated(ctx) -> str:
    ctx.state.put("log", {"id": "gated"})
    await GATE.wait()
    return "through"
"""


async def test_a_trigger_is_firing_while_its_actions_run_and_the_call_waits(
    tmp_path: Path,
) -> None:
    (tmp_path / "gated_tools.py").write_text(GATED_TOOLS)
    (tmp_path / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: gated\n"
        "state: {log: {}}\ntools: [{module: gated_tools.py}]\n"
    )
    gw = Gateway(Environment.load(tmp_path))
    module = sys.modules[gw.env.tools["gated"].source.split(":")[0]]
    module.GATE = asyncio.Event()
    trigger = {
        "id": "hold",
        "when": {"type": "action", "tool": "ping"},
        "actions": [{"type": "tool", "tool": "gated", "args": {}}],
        "barrier": {"at": "provoking_call", "timeout_seconds": 60},
    }
    await gw.register_triggers(SYSTEM, reg(trigger))
    call = asyncio.ensure_future(gw.call(Principal("default"), "ping", {}))
    for _ in range(1000):  # let the call reach the action; no clock involved
        if info(gw, "hold").status == "firing":
            break
        await asyncio.sleep(0)
    assert info(gw, "hold").status == "firing"
    assert not call.done()  # the provoking call's answer waits for the firing
    module.GATE.set()
    out = await call
    assert (out.ok, out.value) == (True, "pong")
    assert info(gw, "hold").status == "fired"
    assert gw.instance().state.has("log", "gated")


async def test_a_cancelled_call_ends_its_firing_and_a_repeat_trigger_fires_again(
    bank_env: Environment,
) -> None:
    waiting = asyncio.Event()
    sent: list[str] = []

    async def sender(request) -> str:
        sent.append(request.instruction)
        if len(sent) == 1:  # the first firing waits for its executor until cancelled
            waiting.set()
            await asyncio.Event().wait()
        return "done"

    gw = Gateway(bank_env, nl_sender=sender)
    trigger = {
        "id": "t1",
        "when": {"type": "action", "tool": "deposit", "repeat": True},
        "actions": [{"type": "nl", "text": "do it"}],
    }
    await gw.register_triggers(SYSTEM, reg(trigger))
    call = asyncio.ensure_future(gw.call(AGENT, "deposit", {"account_id": "a1", "amount": 5}))
    await asyncio.wait_for(waiting.wait(), 10)
    assert info(gw, "t1").status == "firing"
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    t = info(gw, "t1")
    assert (t.status, t.failure_count, t.error) == ("armed", 1, "the firing was cancelled")
    record = gw.instance().trajectory[-1]
    assert (record.kind, record.event, record.detail) == (
        "trigger",
        "failed",
        "the firing was cancelled",
    )

    out = await gw.call(AGENT, "deposit", {"account_id": "a1", "amount": 5})
    assert out.ok
    assert sent == ["do it", "do it"]
    t = info(gw, "t1")
    assert (t.status, t.fire_count, t.failure_count) == ("armed", 1, 1)
    assert events(gw, "t1")[-2:] == ["action_ok", "fired"]


# -- registration, removal, state ------------------------------------------------------------


async def test_an_unknown_action_tool_fails_the_whole_registration(gw: Gateway) -> None:
    bad = on_create("bad", actions=[{"type": "tool", "tool": "add_nite", "args": {}}])
    with pytest.raises(
        GatewayError, match=r"trigger 'bad': actions\[0\]\.tool names unknown tool 'add_nite'"
    ) as e:
        await gw.register_triggers(SYSTEM, reg(on_create("good"), bad))
    assert e.value.status == 400
    assert gw.triggers_state().triggers == []
    assert gw.triggers_state().log == []
    assert [r.event for r in gw.instance().trajectory] == []


async def test_an_unknown_watched_tool_fails_the_registration(gw: Gateway) -> None:
    bad = {
        "id": "bad",
        "when": {"type": "action", "tool": "create_tikcet"},
        "actions": [note_action()],
    }
    with pytest.raises(
        GatewayError, match=r"trigger 'bad': when\.tool names unknown tool 'create_tikcet'"
    ):
        await gw.register_triggers(SYSTEM, reg(bad))
    assert gw.triggers_state().triggers == []


@pytest.mark.parametrize("role", ["agnet", "system"])
async def test_an_action_as_an_unknown_role_fails_the_registration(gw: Gateway, role: str) -> None:
    bad = on_create("bad", actions=[{**note_action(), "as": role}])
    with pytest.raises(
        GatewayError,
        match=rf"trigger 'bad': actions\[0\]\.as names unknown role '{role}' "
        r"\(roles: agent, supervisor\)",
    ) as e:
        await gw.register_triggers(SYSTEM, reg(on_create("good"), bad))
    assert e.value.status == 400
    assert gw.triggers_state().triggers == []
    await create(gw, "t2")
    assert notes(gw) == []


async def test_registration_is_additive_by_id_and_the_same_spec_again_is_a_no_op(
    gw: Gateway,
) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create("a"), on_create("b")))
    again = await gw.register_triggers(SYSTEM, reg(on_create("a"), on_create("c")))
    assert (again.added, again.all) == (["a", "c"], ["a", "b", "c"])
    assert [t.id for t in gw.triggers_state().triggers] == ["a", "b", "c"]
    assert events(gw, "a") == ["added"]  # the identical re-add changed nothing
    await create(gw, "t2")
    assert notes(gw) == ["n-t2"]  # a, b and c write the same note id once
    control = [r for r in gw.instance().trajectory if r.kind == "control"]
    assert [(r.event, r.detail) for r in control] == [
        ("triggers_register", "a, b"),
        ("triggers_register", "a, c"),
    ]


async def test_a_registered_id_with_a_different_spec_is_refused_and_nothing_is_added(
    gw: Gateway,
) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create("a")))
    with pytest.raises(
        GatewayError, match="trigger 'a' is already registered with a different spec"
    ) as e:
        await gw.register_triggers(
            SYSTEM, reg(on_create("c"), on_create("a", actions=[note_action("replaced")]))
        )
    assert e.value.status == 400
    assert [t.id for t in gw.triggers_state().triggers] == ["a"]
    await gw.remove_triggers(SYSTEM, ["a"])  # removed, the id may be reused
    await gw.register_triggers(SYSTEM, reg(on_create("a", actions=[note_action("replaced")])))
    await create(gw, "t2")
    assert notes(gw) == ["replaced"]


async def test_an_id_is_made_up_for_a_trigger_without_one(gw: Gateway) -> None:
    spec = on_create()
    del spec["id"]
    result = await gw.register_triggers(SYSTEM, reg(spec))
    (made,) = result.added
    assert made.startswith("trg_") and result.all == [made]


async def test_remove_and_clear(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create("a"), on_create("b"), on_create("c")))
    await gw.remove_triggers(SYSTEM, ["a"])
    assert [t.id for t in gw.triggers_state().triggers] == ["b", "c"]
    assert events(gw, "a") == ["added", "removed"]

    assert await gw.remove_triggers(SYSTEM, ["b", "zz"]) == ["b"]  # unknown ids are ignored
    assert [t.id for t in gw.triggers_state().triggers] == ["c"]

    await gw.remove_triggers(SYSTEM, None)
    assert gw.triggers_state().triggers == []
    await create(gw, "t2")
    assert notes(gw) == []
    assert gw.triggers_state().log == []  # clear forgets the firing log too
    assert [r.detail for r in gw.instance().trajectory if r.event == "triggers_remove"] == [
        "a",
        "b, zz",
        "*",
    ]


async def test_removing_the_same_id_twice_removes_it_once(gw: Gateway) -> None:
    await gw.register_triggers(SYSTEM, reg(on_create("t", actions=[note_action("by-t")])))
    await gw.register_triggers(SYSTEM, reg(on_create("u", actions=[note_action("by-u")])))
    await gw.remove_triggers(SYSTEM, ["t", "t"])
    assert [t.id for t in gw.triggers_state().triggers] == ["u"]
    assert events(gw, "t") == ["added", "removed"]
    await create(gw, "t2")
    assert notes(gw) == ["by-u"]
    assert info(gw, "u").fired == 1


async def test_the_firing_log_is_numbered_and_stamped(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(on_create()))
    await create(gw, "t2")
    log = gw.triggers_state().log
    assert [e.seq for e in log] == list(range(1, len(log) + 1))
    assert all(e.virtual_time == "2026-03-02T09:00:00Z" for e in log)
    assert all(e.ts.endswith("Z") for e in log)
    detected = next(e for e in log if e.event == "detected")
    assert detected.detail == "create_ticket matched"


async def test_document_triggers_are_armed_on_every_instance_separately() -> None:
    env = Environment.from_spec(parse_environment_spec(desk_doc(triggers=[on_create()])))
    gw = Gateway(env)
    gw.create_instance("b")
    assert [t.id for t in gw.triggers_state("b").triggers] == ["escalate"]
    await create(gw, "t2")
    assert notes(gw) == ["n-t2"]
    assert info(gw, "escalate", "b").status == "armed"
    await create(gw, "t3", instance="b")
    assert notes(gw, "b") == ["n-t3"]


def test_a_document_trigger_on_an_unknown_tool_stops_the_gateway() -> None:
    env = Environment.from_spec(
        parse_environment_spec(
            desk_doc(triggers=[on_create(actions=[{"type": "tool", "tool": "nope", "args": {}}])])
        )
    )
    with pytest.raises(GatewayError, match="unknown tool 'nope'"):
        Gateway(env)


# -- templating and checks on their own ------------------------------------------------------


def test_render_fills_placeholders() -> None:
    scope = {
        "args": {"to": "bob", "n": 3, "tags": ["a", "b"]},
        "result": {"id": "m-1", "items": [{"id": 7}]},
    }
    assert render("${args.n}", scope) == 3
    assert render("${args.tags}", scope) == ["a", "b"]
    assert render("to ${args.to}: ${args.n}", scope) == "to bob: 3"
    assert render({"x": ["${result.items.0.id}", "${result.items.-1.id}"], "y": 1}, scope) == {
        "x": [7, 7],
        "y": 1,
    }
    assert render("no placeholders", scope) == "no placeholders"
    with pytest.raises(TemplateError, match=r"\$\{result.items.5.id\} has no value"):
        render("${result.items.5.id}", scope)


def test_check_value_extracts_then_tests() -> None:
    result = {"status": "closed", "items": [{"id": 1}]}
    assert check_value(Predicate(equals="closed"), result, "status")
    assert check_value(Predicate(equals="closed"), result, "result.status")
    assert check_value(Predicate(regex="^clo"), result, "status")
    assert check_value(Predicate(regex="^1"), result, "items.0.id")  # on the JSON text
    assert check_value(Predicate(equals=1), result, "items[0].id")
    assert check_value(Predicate(equals=1), result, "items.0.id")
    assert check_value(Predicate(exists=False), result, "items.3")
    assert not check_value(Predicate(equals=None), result, "missing")
    assert check_value(Predicate(equals=result), result, None)


# -- the protocol's later features: unless, roles, delays, executors, hours -------------------


def deadline(trigger_id: str = "deadline", **when) -> dict:
    return {
        "id": trigger_id,
        "when": {"type": "time", **when},
        "actions": [note_action(f"late-{trigger_id}")],
    }


async def test_unless_cancels_a_deadline_answered_in_time(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    unless = {"tool": "create_ticket", "where": {"priority": {"equals": "high"}}}
    await gw.register_triggers(SYSTEM, reg(deadline(after="PT1H", unless=unless)))
    await create(gw, "t2", priority="low")  # does not match `where`: still armed
    assert info(gw, "deadline").status == "armed"
    await create(gw, "t3", priority="high")
    t = info(gw, "deadline")
    assert (t.status, t.next_mark) == ("cancelled", None)
    assert events(gw, "deadline") == ["added", "cancelled"]
    (cancelled,) = [e for e in gw.triggers_state().to_wire()["events"] if e["kind"] == "cancelled"]
    assert cancelled["provoking"] == {"tool": "create_ticket", "role": "agent"}
    await gw.advance_clock(SYSTEM, timedelta(hours=2))
    assert "late-deadline" not in notes(gw)


async def test_a_deadline_nobody_answers_fires(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    unless = {"tool": "create_ticket", "roles": ["supervisor"]}
    await gw.register_triggers(SYSTEM, reg(deadline(after="PT1H", unless=unless)))
    await create(gw, "t2")  # the agent is not a role that answers it
    await gw.advance_clock(SYSTEM, timedelta(hours=2))
    assert (info(gw, "deadline").status, "late-deadline" in notes(gw)) == ("fired", True)
    await create(gw, "t3", who=SUPERVISOR)  # too late to cancel a fired one
    assert info(gw, "deadline").status == "fired"


async def test_a_trigger_anchored_after_another_is_due_offset_after_it_fires(
    gw: Gateway,
) -> None:
    await gw.set_clock(SYSTEM, T0)
    follow_up = deadline("follow-up", after="escalate", offset="PT30M")
    await gw.register_triggers(SYSTEM, reg(on_create(), follow_up))
    assert info(gw, "follow-up").next_mark is None  # waits for its anchor
    await create(gw, "t2")
    assert info(gw, "follow-up").next_mark == "2026-03-02T09:30:00Z"
    assert events(gw, "follow-up") == ["added", "anchored"]
    await gw.advance_clock(SYSTEM, timedelta(minutes=31))
    assert "late-follow-up" in notes(gw)


async def test_cancelling_a_deadline_cancels_the_triggers_anchored_on_it(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    first = deadline("first", after="PT1H", unless={"tool": "add_note"})
    second = deadline("second", after="first", offset="PT1H")
    await gw.register_triggers(SYSTEM, reg(first, second))
    await gw.call(AGENT, "add_note", {"record": {"id": "answer"}})
    assert [info(gw, i).status for i in ("first", "second")] == ["cancelled", "cancelled"]


@pytest.mark.parametrize(
    ("when", "message"),
    [
        ({"every": "PT1H", "unless": {"tool": "add_note"}}, "only for a one-shot"),
        ({"after": "escalate"}, "needs an 'offset'"),
        ({"at": "PT1H", "roles": ["agent"]}, "roles"),
    ],
)
def test_bad_deadlines_are_refused(when: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        reg(deadline(**when))


async def test_when_roles_choose_who_provokes_past_the_watch_roles(gw: Gateway) -> None:
    await gw.register_triggers(
        SYSTEM, reg(on_create(repeat=True, roles=["supervisor"]), watch_roles=["agent"])
    )
    await create(gw, "t2")
    assert notes(gw) == []
    await create(gw, "t3", who=SUPERVISOR)
    assert notes(gw) == ["n-t3"]


async def test_the_executors_own_calls_provoke_nothing_unless_named(desk: Environment) -> None:
    gw = Gateway(desk)
    executor = {"a2a_url": "http://executor", "role": "supervisor"}
    await gw.register_triggers(SYSTEM, reg(on_create(repeat=True), executor=executor))
    await create(gw, "t2", who=SUPERVISOR)
    assert notes(gw) == []  # the executor's role is never watched
    await create(gw, "t3")
    assert notes(gw) == ["n-t3"]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"watch_roles": ["agent"], "executor": {"a2a_url": "http://x", "role": "agent"}},
            "executor.role 'agent' is in watch_roles",
        ),
        (
            {"executors": {"ops": {"a2a_url": "http://x", "role": "agent"}}, "watch_roles": []},
            None,
        ),
    ],
)
async def test_an_executor_must_not_be_watched(gw: Gateway, fields: dict, message) -> None:
    if message is None:
        await gw.register_triggers(SYSTEM, reg(**fields))
        return
    with pytest.raises(GatewayError, match=message):
        await gw.register_triggers(SYSTEM, reg(on_create(), **fields))
    assert gw.triggers_state().triggers == []


async def test_watch_roles_and_executors_are_set_once(gw: Gateway) -> None:
    ops = {"a2a_url": "http://ops", "role": "supervisor"}
    await gw.register_triggers(
        SYSTEM, reg(on_create("a"), watch_roles=["agent"], executors={"ops": ops})
    )
    with pytest.raises(GatewayError, match="watch_roles \\['supervisor'\\] conflicts"):
        await gw.register_triggers(SYSTEM, reg(on_create("b"), watch_roles=["supervisor"]))
    other = {"a2a_url": "http://elsewhere", "role": "supervisor"}
    with pytest.raises(GatewayError, match="executors\\['ops'\\] conflicts"):
        await gw.register_triggers(SYSTEM, reg(on_create("b"), executors={"ops": other}))
    await gw.register_triggers(SYSTEM, reg(on_create("b"), executors={"ops": ops}))  # same: fine
    config = gw.triggers_state().config
    assert (config.watch_roles, config.executor_configured, config.executors) == (
        ["agent"],
        False,
        ["ops"],
    )
    await gw.remove_triggers(SYSTEM, None)  # clear: the settings may change again
    await gw.register_triggers(SYSTEM, reg(on_create("b"), watch_roles=["supervisor"]))


async def test_an_action_delay_puts_the_rest_of_the_firing_off(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    later = {**note_action("later"), "delay": "PT10M"}
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[note_action("now"), later])))
    await create(gw, "t2")
    assert notes(gw) == ["now"]
    t = info(gw, "escalate")
    assert (t.status, t.waiting, t.fire_count) == ("firing", True, 0)
    await gw.advance_clock(SYSTEM, timedelta(minutes=9))
    assert notes(gw) == ["now"]
    await gw.advance_clock(SYSTEM, timedelta(minutes=1))
    assert sorted(notes(gw)) == ["later", "now"]
    t = info(gw, "escalate")
    assert (t.status, t.waiting, t.fire_count) == ("fired", False, 1)
    assert events(gw, "escalate") == [
        "added",
        "detected",
        "action_ok",
        "delayed",
        "action_ok",
        "fired",
    ]
    (delayed,) = [e for e in gw.triggers_state().log if e.event == "delayed"]
    assert (delayed.action_index, delayed.until) == (1, "2026-03-02T09:10:00Z")
    later_record = next(r for r in gw.instance().trajectory if r.tool and r.trigger_id)
    assert later_record.virtual_time == T0  # the first action ran at once


async def test_a_random_delay_is_the_same_every_run(desk: Environment) -> None:
    async def due_of_delay() -> str | None:
        gw = Gateway(desk)
        await gw.set_clock(SYSTEM, T0)
        delayed = {**note_action("later"), "delay": {"dist": "exp", "mean": "PT1H", "seed": 3}}
        await gw.register_triggers(SYSTEM, reg(on_create(actions=[delayed])))
        await create(gw, "t2")
        (event,) = [e for e in gw.triggers_state().log if e.event == "delayed"]
        return event.until

    assert await due_of_delay() == await due_of_delay()


async def test_a_delayed_action_with_an_unarmed_clock_fails_clearly(gw: Gateway) -> None:
    later = {**note_action("later"), "delay": "PT10M"}
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[later])))
    await create(gw, "t2")
    t = info(gw, "escalate")
    assert (t.status, t.error) == (
        "armed",
        "actions[0] (tool): a delayed action needs an armed clock",
    )


def test_a_barrier_and_a_delayed_action_do_not_go_together() -> None:
    later = {**note_action("later"), "delay": "PT10M"}
    with pytest.raises(ValueError, match="a trigger with a barrier cannot delay its actions"):
        reg({**on_create(actions=[later]), "barrier": {}})


def nl(executor: str | None = None) -> dict:
    return {
        "type": "nl",
        "text": "Check ${args.id}",
        **({"executor": executor} if executor else {}),
    }


async def test_an_nl_action_goes_to_the_executor_it_names(desk: Environment) -> None:
    sent: list[tuple[str | None, str]] = []

    async def sender(request: NlInstruction) -> str:
        sent.append((request.executor.a2a_url if request.executor else None, request.instruction))
        return "done"

    gw = Gateway(desk, nl_sender=sender)
    executors = {
        "ops": {"a2a_url": "http://ops", "role": "supervisor"},
        "billing": {"a2a_url": "http://billing", "role": "supervisor"},
    }
    await gw.register_triggers(
        SYSTEM,
        reg(
            on_create(actions=[nl("billing"), nl()]),
            executor={"a2a_url": "http://default", "role": "supervisor"},
            executors=executors,
        ),
    )
    await create(gw, "t2")
    assert sent == [("http://billing", "Check t2"), ("http://default", "Check t2")]
    assert gw.triggers_state().config.executors == ["billing", "ops"]


async def test_an_nl_action_naming_an_unregistered_executor_is_refused(gw: Gateway) -> None:
    with pytest.raises(GatewayError, match=r"actions\[0\]\.executor 'ops' is not a registered"):
        await gw.register_triggers(SYSTEM, reg(on_create(actions=[nl("ops")])))
    assert gw.triggers_state().triggers == []


async def test_an_executor_outside_its_hours_gets_the_instruction_when_they_open(
    desk: Environment,
) -> None:
    sent: list[datetime | None] = []

    async def sender(request: NlInstruction) -> str:
        sent.append(request.virtual_time)
        return "done"

    gw = Gateway(desk, nl_sender=sender)
    await gw.set_clock(SYSTEM, T0)  # 09:00 UTC is 04:00 in New York
    hours = {"start": "09:00", "end": "17:00", "time_zone": "America/New_York"}
    executor = {"a2a_url": "http://ops", "role": "supervisor", "hours": hours}
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[nl()]), executor=executor))
    await create(gw, "t2")
    assert sent == []
    (deferred,) = [e for e in gw.triggers_state().log if e.event == "deferred"]
    assert deferred.until == "2026-03-02T14:00:00Z"
    assert info(gw, "escalate").waiting is True
    await gw.advance_clock(SYSTEM, timedelta(hours=5))
    assert sent == [datetime(2026, 3, 2, 14, 0, tzinfo=UTC)]
    assert info(gw, "escalate").status == "fired"


def test_the_supported_features_are_the_protocols_names_website_aside() -> None:
    assert set(SUPPORTED_TRIGGER_FEATURES) == {
        "named_executors",
        "provoking_roles",
        "action_delay",
        "executor_hours",
        "unless",
        "executor_hours_time_zone",
    }


async def test_the_state_layout_is_the_protocols(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(SYSTEM, reg(on_create(), watch_roles=["agent"]))
    await create(gw, "t2")
    wire = gw.triggers_state().to_wire()
    assert set(wire) == {"config", "triggers", "events", "events_dropped"}
    assert wire["config"] == {
        "watch_roles": ["agent"],
        "executor_configured": False,
        "executors": [],
    }
    (t,) = wire["triggers"]
    assert {
        "id", "type", "when", "status", "detected_at", "fired_at", "fire_count",
        "failure_count", "last_failure_at", "barrier", "pending", "waiting", "next_mark",
    } <= set(t)  # fmt: skip
    assert (t["status"], t["fire_count"], t["when"]["tool"]) == ("fired", 1, "create_ticket")
    detected = next(e for e in wire["events"] if e["kind"] == "detected")
    assert detected["provoking"] == {"tool": "create_ticket", "role": "agent"}
    assert detected["virtual_time"] == "2026-03-02T09:00:00Z"
    assert wire["events_dropped"] == 0


async def test_a_trigger_without_actions_records_its_firings(gw: Gateway) -> None:
    sensor = {"id": "decoy", "when": {"type": "action", "tool": "create_ticket"}, "actions": []}
    await gw.register_triggers(SYSTEM, reg(sensor))
    await create(gw, "t2")
    t = info(gw, "decoy")
    assert (t.status, t.fire_count) == ("fired", 1)
    assert events(gw, "decoy") == ["added", "detected", "fired"]


async def test_a_state_check_binds_a_value_for_its_next_step(gw: Gateway) -> None:
    # Step 1 finds the ticket escalated to level 2 among the notes' targets; step 2 reads it.
    check = {
        "steps": [
            {
                "tool": "list_notes",
                "extract": {
                    "path": "notes",
                    "match": {"kind": {"equals": "esc"}},
                    "take": "ticket",
                },
                "bind": "ticket_id",
            },
            {
                "tool": "get_ticket",
                "args": {"id": "${ticket_id}"},
                "extract": "status",
                "predicate": {"equals": "escalated"},
            },
        ]
    }
    trigger = {
        "id": "watch",
        "when": {"type": "state", "check": check},
        "actions": [note_action("seen")],
    }
    await gw.register_triggers(SYSTEM, reg(trigger))
    await gw.call(AGENT, "add_note", {"record": {"id": "a", "kind": "esc", "ticket": "t1"}})
    assert "seen" not in notes(gw)  # t1 is still open
    await gw.call(AGENT, "update_ticket", {"id": "t1", "status": "escalated"})
    assert "seen" in notes(gw)


async def test_a_verify_in_the_protocols_form_reads_the_provoking_call(gw: Gateway) -> None:
    verify = {
        "steps": [
            {"tool": "get_ticket", "args": {"id": "${args.id}"}, "extract": "id", "bind": "tid"},
            {"tool": "get_ticket", "args": {"id": "${tid}"}, "predicate": {"exists": True}},
        ]
    }
    await gw.register_triggers(
        SYSTEM, reg(on_create(actions=[{**note_action(), "verify": verify}]))
    )
    await create(gw, "t2")
    assert info(gw, "escalate").status == "fired"
    assert events(gw, "escalate")[-3:] == ["verify_ok", "action_ok", "fired"]


async def test_setting_the_clock_again_re_anchors_relative_time_triggers(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    await gw.register_triggers(
        SYSTEM,
        reg(
            timed("rel", at="PT1H"),
            timed("abs", at="2026-03-02T12:00:00Z"),
            counting("tick", every="PT30M"),
        ),
    )
    later = T0 + timedelta(days=1)
    await gw.set_clock(SYSTEM, later)
    assert info(gw, "rel").next_mark == "2026-03-03T10:00:00Z"
    assert info(gw, "tick").next_mark == "2026-03-03T09:30:00Z"
    assert info(gw, "abs").status == "fired"  # its instant passed in the jump: it fired
    (event,) = [
        e for e in gw.triggers_state().log if e.event == "reanchored" and e.trigger_id == "rel"
    ]
    assert event.dropped_mark == "2026-03-02T10:00:00Z"
    assert fire_times(gw, "tick") == []  # the old timeline's backlog is dropped


async def test_an_nl_action_that_fails_its_verify_is_sent_once_more(desk: Environment) -> None:
    sent: list[str] = []

    async def sender(request: NlInstruction) -> str:
        sent.append(request.instruction)
        if len(sent) == 2:  # the executor gets it right the second time
            await gw.call(SUPERVISOR, "add_note", {"record": {"id": "done"}})
        return "ok"

    gw = Gateway(desk, nl_sender=sender)
    verify = {"tool": "list_notes", "extract": "total", "predicate": {"equals": 1}}
    action = {**nl(), "verify": verify}
    executor = {"a2a_url": "http://ops", "role": "supervisor"}
    await gw.register_triggers(SYSTEM, reg(on_create(actions=[action]), executor=executor))
    await create(gw, "t2")
    assert len(sent) == 2 and sent[0] == "Check t2"
    assert sent[1].startswith("Check t2\n\n") and "again" in sent[1]
    assert info(gw, "escalate").status == "fired"
    assert events(gw, "escalate")[-4:] == ["verify_failed", "verify_ok", "action_ok", "fired"]


async def test_a_recurring_trigger_whose_until_has_passed_retires_unfired(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    late = counting("late", every="PT1H", until="2026-03-01T00:00:00Z")
    await gw.register_triggers(SYSTEM, reg(late))
    await gw.advance_clock(SYSTEM, timedelta(hours=2))
    t = info(gw, "late")
    assert (t.status, t.fire_count, t.next_mark) == ("fired", 0, None)


async def test_a_documents_triggers_leave_the_watch_roles_and_executor_to_the_task() -> None:
    doc_trigger = {**on_create("doc"), "watch_roles": None}
    env = Environment.from_spec(
        parse_environment_spec(
            desk_doc(
                triggers={
                    "watch_roles": ["agent"],
                    "executor": {"a2a_url": "http://doc", "role": "supervisor"},
                    "triggers": [doc_trigger],
                }
            )
        )
    )
    gw = Gateway(env)
    task_executor = {"a2a_url": "http://task", "role": "agent"}
    await gw.register_triggers(
        SYSTEM, reg(on_create("task"), watch_roles=["supervisor"], executor=task_executor)
    )
    config = gw.triggers_state().config
    assert (config.watch_roles, config.executor_configured) == (["supervisor"], True)
    assert gw.instance().triggers.executors[None].a2a_url == "http://task"
    await create(gw, "t2", who=SUPERVISOR)
    assert events(gw, "task")[-1] == "fired"


async def test_a_repeat_trigger_detected_while_it_fires_takes_its_turn_after(gw: Gateway) -> None:
    await gw.set_clock(SYSTEM, T0)
    later = {**note_action("later-${args.id}"), "delay": "PT10M"}
    await gw.register_triggers(SYSTEM, reg(on_create(repeat=True, actions=[later])))
    await create(gw, "t2")  # its firing waits out the delay
    await gw.advance_clock(SYSTEM, timedelta(minutes=5))
    await create(gw, "t3")  # detected mid-firing: queued behind it
    t = info(gw, "escalate")
    assert (t.status, t.pending) == ("queued", 1)
    await gw.advance_clock(SYSTEM, timedelta(minutes=5))
    # The first firing ends, then the queued one starts; its delay counts from its own call.
    assert notes(gw) == ["later-t2"]
    assert (info(gw, "escalate").status, info(gw, "escalate").pending) == ("firing", 0)
    await gw.advance_clock(SYSTEM, timedelta(minutes=5))
    assert sorted(notes(gw)) == ["later-t2", "later-t3"]
    assert (info(gw, "escalate").status, info(gw, "escalate").fire_count) == ("armed", 2)
