"""Who changed what (`urn:agentenv:changes/v1`): changelog rows joined onto the calls'
write windows, as `GET /changes` answers them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.gateway.changes import (
    CHANGES_PAGE_DEFAULT,
    CHANGES_PAGE_MAX,
    ChangesPage,
    ChangesQueryError,
    changes_page,
    parse_query,
)
from agentenv.gateway.events import trajectory_events
from agentenv.spec import DataPart, TriggerRegistration


def _page(gw: Gateway, after_id: int = 0, limit: int = CHANGES_PAGE_DEFAULT) -> dict[str, Any]:
    page = changes_page(gw.instance(), gw.env.name, after_id, limit)
    data = page.model_dump(mode="json")
    assert ChangesPage.model_validate(data) == page  # the wire shape round-trips
    return data


def _who(change: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(a["kind"], a["tool"], a["role"]) for a in change["actors"]]


async def test_each_row_names_the_call_that_wrote_it(
    gw: Gateway, agent: Principal, supervisor: Principal
) -> None:
    seeded = gw.instance().state.changes
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 5})
    await gw.call(agent, "get_account", {"account_id": "a1"})  # a read writes nothing
    await gw.call(supervisor, "freeze", {"account_id": "a2"})
    page = _page(gw)
    assert page["has_more"] is False and page["dropped"] == 0
    assert [(c["id"], c["table_name"], c["row_id"], c["operation"]) for c in page["changes"]] == [
        (seeded + 1, "accounts", "a1", "UPDATE"),
        (seeded + 2, "accounts", "a2", "UPDATE"),
    ]
    assert [_who(c) for c in page["changes"]] == [
        [("tool_call", "deposit", "agent")],
        [("tool_call", "freeze", "supervisor")],
    ]
    first = page["changes"][0]
    assert first["schema_name"] == "bank"
    assert first["changed_fields"] == {"balance": {"old": 100, "new": 105}}
    assert first["summary"] == "balance: '100' -> '105'"
    assert set(first) == {
        "id",
        "timestamp",
        "schema_name",
        "table_name",
        "operation",
        "row_id",
        "summary",
        "changed_fields",
        "actors",
    }
    # An actor's event id is its call's tool_call event on GET /trajectory.
    events = {e["event_id"]: e for e in trajectory_events(gw.instance().trajectory)}
    called = events[first["actors"][0]["event_id"]]
    assert called["event_type"] == "tool_call"
    assert called["tool_call"]["function_name"] == "deposit"


async def test_a_call_that_writes_several_records_claims_each_of_them(
    gw: Gateway, agent: Principal
) -> None:
    await gw.call(agent, "transfer", {"source": "a1", "target": "a2", "amount": 10})
    await gw.call(agent, "blocking_audit", {"account_id": "a1"})  # writes merged from a thread
    rows = [(c["row_id"], c["operation"], _who(c)[0][1]) for c in _page(gw)["changes"]]
    assert rows[:2] == [("a1", "UPDATE", "transfer"), ("a2", "UPDATE", "transfer")]
    # a thread's writes are merged (so written) in the merge's own order
    assert sorted(rows[2:]) == [
        ("a1", "UPDATE", "blocking_audit"),
        ("a3", "DELETE", "blocking_audit"),
        ("blocking", "INSERT", "blocking_audit"),
    ]


async def test_failed_and_denied_calls_leave_no_rows(gw: Gateway, agent: Principal) -> None:
    await gw.call(agent, "explode", {})  # writes, then crashes: rolled back
    await gw.call(agent, "transfer", {"source": "a1", "target": "zz", "amount": 1})
    await gw.call(agent, "freeze", {"account_id": "a1"})  # denied
    await gw.call(agent, "hang", {})  # writes, then times out
    assert _page(gw)["changes"] == []


async def test_a_trigger_action_is_named_as_the_trigger_and_its_role(
    gw: Gateway, agent: Principal
) -> None:
    registration = TriggerRegistration.model_validate(
        {
            "triggers": [
                {
                    "id": "bonus",
                    "when": {"type": "action", "tool": "deposit"},
                    "actions": [
                        {
                            "type": "tool",
                            "tool": "open_account",
                            "args": {"id": "bonus", "owner": "Bank", "balance": 1},
                        },
                        {
                            "type": "tool",
                            "tool": "freeze",
                            "args": {"account_id": "bonus"},
                            "as": "supervisor",
                        },
                    ],
                }
            ]
        }
    )
    await gw.register_triggers(SYSTEM, registration)
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    changes = _page(gw)["changes"]
    assert [_who(c) for c in changes] == [
        [("tool_call", "deposit", "agent")],
        [("trigger_action", "open_account", None)],  # ran as the system: no role
        [("trigger_action", "freeze", "supervisor")],
    ]
    assert {a["trigger_id"] for c in changes[1:] for a in c["actors"]} == {"bonus"}
    events = {e["event_id"]: e for e in trajectory_events(gw.instance().trajectory)}
    assert events[changes[1]["actors"][0]["event_id"]]["event_type"] == "internal_tool_call"


async def test_a_write_no_call_made_has_no_actor(gw: Gateway) -> None:
    await gw.data_add(SYSTEM, [DataPart(kind="data", data={"audit": [{"id": "loaded"}]})])
    [change] = _page(gw)["changes"]
    assert (change["table_name"], change["row_id"], change["actors"]) == ("audit", "loaded", [])


async def test_after_a_restore_old_calls_claim_no_new_rows(gw: Gateway, agent: Principal) -> None:
    inst = gw.instance()
    snapshot = inst.state.snapshot()
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 2})
    await gw.restore(SYSTEM, snapshot)
    assert _page(gw)["changes"] == []  # the rows went with the state
    await gw.call(agent, "open_account", {"id": "a9", "owner": "Di", "balance": 0})
    [change] = _page(gw)["changes"]
    assert change["id"] == snapshot.changes + 1
    assert _who(change) == [("tool_call", "open_account", "agent")]


async def test_pages_follow_after_id_and_limit(gw: Gateway, agent: Principal) -> None:
    for amount in range(1, 6):
        await gw.call(agent, "deposit", {"account_id": "a1", "amount": amount})
    seeded = gw.instance().state.changes - 5
    first = _page(gw, limit=2)
    assert [c["id"] for c in first["changes"]] == [seeded + 1, seeded + 2]
    assert first["has_more"] is True
    rest = _page(gw, after_id=first["changes"][-1]["id"], limit=10)
    assert [c["id"] for c in rest["changes"]] == [seeded + 3, seeded + 4, seeded + 5]
    assert rest["has_more"] is False
    assert _page(gw, after_id=seeded + 5)["changes"] == []
    assert [_who(c)[0][1] for c in rest["changes"]] == ["deposit"] * 3


async def test_instances_keep_their_own_changelogs(gw: Gateway, agent: Principal) -> None:
    gw.create_instance("ep-1")
    await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1}, instance="ep-1")
    assert _page(gw)["changes"] == []
    page = changes_page(gw.instance("ep-1"), gw.env.name, 0, 10)
    assert [c.row_id for c in page.changes] == ["a1"]


def test_the_query_is_checked_as_upstream_checks_it() -> None:
    assert parse_query(None, None) == (0, CHANGES_PAGE_DEFAULT)
    assert parse_query("7", str(CHANGES_PAGE_MAX)) == (7, CHANGES_PAGE_MAX)
    with pytest.raises(ChangesQueryError, match="must be integers"):
        parse_query("x", None)
    with pytest.raises(ChangesQueryError, match="must be integers"):
        parse_query(None, "1.5")
    for after_id, limit in (("-1", None), (None, "0"), (None, str(CHANGES_PAGE_MAX + 1))):
        with pytest.raises(ChangesQueryError, match="limit between 1 and 10000"):
            parse_query(after_id, limit)


async def test_in_the_performance_mode_overlapping_calls_each_claim_their_rows(
    bank_env: Environment, agent: Principal
) -> None:
    gw = Gateway(bank_env, mode="performance")
    seeded = gw.instance().state.changes
    await asyncio.gather(
        gw.call(agent, "async_deposit", {"account_id": "a1", "amount": 1}),
        gw.call(agent, "async_deposit", {"account_id": "a2", "amount": 1}),
    )
    changes = _page(gw)["changes"]
    assert [c["id"] for c in changes] == [seeded + 1, seeded + 2]
    by_record = {c["row_id"]: [a["seq"] for a in c["actors"]] for c in changes}
    calls = {r.args["account_id"]: r.seq for r in gw.instance().trajectory.calls()}
    for account, seq in calls.items():
        assert seq in by_record[account]  # its own call is always among a row's actors
