"""The call path's fast paths give what the slow paths give.

`Gateway.call` skips pydantic for flat simple arguments (`env.fast_args`) and records a call
as a compact row (`gateway.rows`). Here the same calls go through a gateway whose tools take
the fast path and one whose tools cannot, and every result and record must agree.
"""

from __future__ import annotations

import asyncio
import gc
import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from agentenv import Environment, Gateway, Principal, Tool, ToolContext, tool
from agentenv.gateway import Trajectory
from agentenv.gateway.rows import EPOCH, micros, time_of
from agentenv.spec import parse_environment_spec

AGENT = Principal("agent", name="ada")


@tool
def put_note(
    ctx: ToolContext,
    note_id: str,
    text: str = "",
    stars: int = 0,
    weight: float | None = None,
    pinned: bool = False,
    color: Literal["red", "blue"] | None = None,
) -> dict[str, Any]:
    """Write a note."""
    return ctx.state.put(
        "notes",
        {"id": note_id, "text": text, "stars": stars, "weight": weight, "color": color},
    )


@tool(kind="read")
def echo(extra: Any = None, items: list | None = None) -> Any:
    """Give back what it got."""
    return {"extra": extra, "items": items}


def _env() -> Environment:
    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "fast",
            "roles": [{"name": "agent"}],
            "state": {"notes": {"key": "id"}},
            "clock": {"start": "2026-03-02T09:00:00Z"},
        }
    )
    env = Environment.from_spec(spec)
    return replace(env, tools={t.__name__: Tool.from_function(t) for t in (put_note, echo)})


def _slow(env: Environment) -> Environment:
    tools = {}
    for name, made in env.tools.items():
        made = replace(made)
        made._fast = (made.args_model, None)  # no fast path: pydantic validates every call
        tools[name] = made
    return replace(env, tools=tools)


VALUES: list[Any] = [
    "n1", "", "é", "\ud800", 0, 3, -1, True, 2.5, float("nan"), None, "red", "green",
    [1, 2], {"a": 1}, (1, 2), {1, 2},
]  # fmt: skip


def _record_fields(record: Any) -> dict[str, Any]:
    fields = {
        k: getattr(record, k)
        for k in ("seq", "kind", "tool", "args", "result", "error", "denied", "sanitized")
    }
    fields["changelog"] = (record.changelog_id_before, record.changelog_id)
    return fields


def test_fast_and_slow_validation_agree_call_for_call() -> None:
    fast_gw, slow_gw = Gateway(_env()), Gateway(_slow(_env()))
    assert fast_gw.env.tools["put_note"].fast_args() is not None
    assert slow_gw.env.tools["put_note"].fast_args() is None
    rng = random.Random(5)
    names = ["note_id", "text", "stars", "weight", "pinned", "color", "extra", "items", "bogus"]

    async def run() -> None:
        for _ in range(600):
            name = rng.choice(["put_note", "echo"])
            args = {n: rng.choice(VALUES) for n in rng.sample(names, rng.randint(0, 4))}
            if name == "put_note" and rng.random() < 0.7:
                args.setdefault("note_id", "n1")
            a = await fast_gw.call(AGENT, name, dict(args))
            b = await slow_gw.call(AGENT, name, dict(args))
            assert (a.ok, a.text, a.error, a.changelog_id, a.seq) == (
                b.ok, b.text, b.error, b.changelog_id, b.seq,
            ), args  # fmt: skip
            assert a.state_hash == b.state_hash

    asyncio.run(run())
    fast_records, slow_records = (
        list(fast_gw.instance().trajectory),
        list(slow_gw.instance().trajectory),
    )
    assert len(fast_records) == 600
    for a, b in zip(fast_records, slow_records, strict=True):
        assert _record_fields(a) == _record_fields(b)
    oks = sum(r.error is None for r in fast_records)
    assert 100 < oks < 550  # both kinds of outcome were exercised


def test_a_call_record_keeps_what_the_call_was() -> None:
    gw = Gateway(_env())

    async def run() -> None:
        await gw.call(AGENT, "put_note", {"note_id": "n1", "text": "é", "stars": 2}, session="s")
        await gw.call(AGENT, "echo", {"extra": "plain text"})
        await gw.call(AGENT, "echo", {"extra": {"\ud800": float("inf")}})
        await gw.call(AGENT, "nope", {"x": 1})

    asyncio.run(run())
    put, plain, dirty, unknown = gw.instance().trajectory
    assert put.args == {"note_id": "n1", "text": "é", "stars": 2} and put.session == "s"
    assert put.result == {"id": "n1", "text": "é", "stars": 2, "weight": None, "color": None}
    assert put.principal == "ada" and put.role == "agent" and put.sanitized is None
    assert put.virtual_time == datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    assert put.wall_time.tzinfo is UTC and abs(datetime.now(UTC) - put.wall_time) < timedelta(
        minutes=5
    )
    assert plain.result == {"extra": "plain text", "items": None}
    assert dirty.args == {"extra": {"\ufffd": None}}
    assert {n["what"] for n in dirty.sanitized} == {"lone_surrogate", "infinity"}
    assert unknown.error is not None and unknown.error.kind == "unknown_tool"
    assert unknown.result is None and unknown.changelog_id_before is None


def test_rows_hold_nothing_the_garbage_collector_tracks() -> None:
    traj = Trajectory()
    for i in range(50):
        traj.append(
            kind="call",
            wall_time=datetime.now(UTC),
            virtual_time=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=i),
            state_hash="0" * 64,
            changelog_id=i,
            tool="t",
            args={"i": i, "tags": ["a"]},
            result={"ok": [i]},
        )
    gc.collect()
    rows = traj._hot  # the in-memory window: one tuple per record
    assert len(rows) == 50 and all(type(r) is tuple for r in rows)
    assert not any(gc.is_tracked(r) for r in rows)
    assert not any(gc.is_tracked(v) for r in rows for v in r)


def test_times_are_kept_exactly_for_any_date() -> None:
    for when in [
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC),
        datetime(2026, 3, 2, 9, 0, 0, 123_457, tzinfo=UTC),
        datetime.max.replace(tzinfo=UTC),
    ]:
        slot = micros(when)
        assert type(slot) is int and time_of(slot) == when and time_of(slot).tzinfo is UTC
    assert time_of(micros(EPOCH)) == EPOCH
    naive = datetime(2026, 1, 1)
    assert micros(naive) is naive and time_of(naive) is naive


def test_triggers_see_the_given_arguments_even_when_the_tool_changes_its_values() -> None:
    """A document's CRUD tools take their values as a dict (and may pop from it); the
    arguments a trigger sees are taken before the tool runs."""
    from agentenv import SYSTEM
    from agentenv.spec import TriggerRegistration

    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "crud",
            "roles": [{"name": "agent"}],
            "state": {"notes": {"key": "id"}},
            "seed": {"notes": [{"id": "n1"}]},
            "tools": [
                {"name": "list_notes", "crud": {"collection": "notes", "op": "list"}},
                {"name": "create_note", "crud": {"collection": "notes", "op": "create"}},
            ],
        }
    )
    gw = Gateway(Environment.from_spec(spec))
    made = gw.env.tools["list_notes"]
    assert made.fast_args() is not None  # the bounds of limit/offset are the fast path's

    async def run() -> None:
        registration = TriggerRegistration.model_validate(
            {
                "triggers": [
                    {
                        "id": "seen",
                        "when": {"type": "action", "tool": "list_notes"},
                        "actions": [
                            {
                                "type": "tool",
                                "tool": "create_note",
                                "args": {"record": {"id": "seen-${args.limit}"}},
                            }
                        ],
                    }
                ]
            }
        )
        await gw.register_triggers(SYSTEM, registration)
        out = await gw.call(AGENT, "list_notes", {"limit": 5})
        assert out.ok, out.text

    asyncio.run(run())
    assert "seen-5" in gw.instance().state.keys("notes")
