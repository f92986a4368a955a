"""The personal-assistant world: ten services composed into examples/envs/personal.

Driven through the Gateway as an agent would drive it: the roles see different tools,
denied calls are refused and recorded, and the cross-service triggers carry an action in
one service over into another.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentenv import SYSTEM, CallResult, Environment, Gateway, Principal
from agentenv.serve import build_card

EXAMPLES = Path(__file__).parents[2] / "examples" / "envs"
PERSONAL = EXAMPLES / "personal"
SERVICES = EXAMPLES / "services"

ASSISTANT = Principal("assistant", name="assistant-1")
USER = Principal("user", name="alex")
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

# alias -> service folder
CHILDREN = {
    "email": "email",
    "calendar": "calendar",
    "chat": "chat",
    "contacts": "contacts",
    "notes": "notes",
    "files": "files",
    "tasks": "tasks",
    "bank": "bank",
    "shop": "shopping",
    "travel": "travel",
}
PLUMBING = {"calendar__import_invite", "chat__receive_message", "bank__record_card_payment"}


@pytest.fixture(scope="module")
def env() -> Environment:
    return Environment.load(PERSONAL)


@pytest.fixture
def gw(env: Environment) -> Gateway:
    return Gateway(env)


async def ok(gw: Gateway, who: Principal, tool: str, **args: Any) -> Any:
    result = await gw.call(who, tool, args)
    assert result.ok, f"{tool} failed: {result.text}"
    return result.value


async def fails(gw: Gateway, who: Principal, tool: str, **args: Any) -> CallResult:
    """A call that must fail and leave the state exactly as it was."""
    state = gw.instance().state
    before = state.hash()
    result = await gw.call(who, tool, args)
    assert not result.ok, f"{tool} should have failed: {result.text}"
    assert state.hash() == before == result.state_hash
    return result


def names(gw: Gateway, who: Principal) -> set[str]:
    return {t.name for t in gw.list_tools(who)}


def fired(gw: Gateway, trigger_id: str) -> int:
    return {t.id: t.fired for t in gw.triggers_state().triggers}[trigger_id]


# -- loading ----------------------------------------------------------------------------------


def test_ten_children_under_short_aliases(env: Environment) -> None:
    assert env.name == "personal"
    assert [alias for alias, _ in env.children] == list(CHILDREN)
    assert [child.name for _, child in env.children] == list(CHILDREN.values())
    assert env.roles == ("assistant", "user")
    assert env.default_role == "assistant"
    assert env.clock.start == T0
    assert env.clock.mode == "stepped"
    for alias in CHILDREN:
        assert any(name.startswith(f"{alias}__") for name in env.tools), alias


@pytest.mark.parametrize("alias", list(CHILDREN))
def test_each_service_loads_alone_and_its_seed_is_in_the_whole(
    env: Environment, alias: str
) -> None:
    alone = Environment.load(SERVICES / CHILDREN[alias])
    assert set(alone.roles) == {"assistant", "user"}
    assert alone.clock.start == T0
    whole = env.seed.to_dict()
    for collection, rows in alone.seed.to_dict().items():
        assert whole[f"{alias}__{collection}"] == rows, collection
    assert {f"{alias}__{t}" for t in alone.tools} <= set(env.tools)
    assert 3 <= len(alone.tools) <= 7
    assert any(t.kind == "write" for t in alone.tools.values())


@pytest.mark.parametrize(
    ("collection", "key", "field", "value"),
    [
        ("email__messages", "M-0007", "subject", "Acme Analytics renewal quote"),
        ("calendar__events", "E-0003", "title", "Q2 roadmap review"),
        ("chat__channels", "alex-assistant", "members", ["alex", "assistant"]),
        ("contacts__contacts", "C-005", "name", "Chris Rivera"),
        ("notes__notes", "N-002", "title", "Gift ideas for Chris"),
        ("notes__journal", "2026-03-01", "mood", "okay"),
        ("files__files", "/work/roadmap-q2.md", "size", 177),
        ("tasks__tasks", "T-003", "status", "open"),
        ("bank__accounts", "CHK-001", "balance", 2450.75),
        ("shop__products", "P-006", "stock", 0),
        ("travel__flights", "F-103", "seats_left", 0),
    ],
)
def test_each_services_seed_is_loaded(
    gw: Gateway, collection: str, key: str, field: str, value: Any
) -> None:
    record = gw.instance().state.get(collection, key)
    assert record is not None, f"{collection}/{key}"
    assert record[field] == value


# -- roles ------------------------------------------------------------------------------------


def test_the_roles_see_different_tools(gw: Gateway) -> None:
    assistant, user = names(gw, ASSISTANT), names(gw, USER)
    assert len(assistant) == 51
    assert len(user) == 31
    assert not PLUMBING & (assistant | user)  # hidden by the children's own rules
    # the assistant runs errands but keeps out of the journal
    assert {"bank__transfer", "shop__place_order", "travel__book_flight"} <= assistant
    assert {"notes__journal_read", "notes__journal_write"}.isdisjoint(assistant)
    assert "contacts__delete_contact" not in assistant  # roles: [user] on the tool
    # the user chats, keeps notes and journal, and only looks things up elsewhere
    assert {"chat__post_message", "notes__journal_read", "contacts__delete_contact"} <= user
    assert {"bank__get_balance", "bank__list_transactions", "shop__list_orders"} <= user
    assert not {"bank__transfer", "bank__list_payees", "shop__place_order"} & user
    assert not any(name.startswith(("files__", "travel__book")) for name in user)
    assert {"email__send_email", "calendar__create_event"}.isdisjoint(user)
    assert {"get_time", "chat__post_message", "tasks__add_task"} <= assistant & user


async def test_a_user_bank_transfer_is_refused_and_recorded(gw: Gateway) -> None:
    result = await fails(
        gw, USER, "bank__transfer", from_account="CHK-001", amount=42.5, payee_id="PY-001"
    )
    assert result.denied
    record = gw.instance().trajectory.calls()[-1]
    assert record.tool == "bank__transfer"
    assert record.denied is True
    assert record.role == "user"
    assert record.principal == "alex"
    assert gw.instance().state.get("bank__accounts", "CHK-001")["balance"] == 2450.75


async def test_the_assistant_cannot_read_the_journal(gw: Gateway) -> None:
    result = await fails(gw, ASSISTANT, "notes__journal_read", day="2026-03-01")
    assert result.denied
    assert gw.instance().trajectory.calls()[-1].denied
    page = await ok(gw, USER, "notes__journal_read", day="2026-03-01")
    assert "promotion" in page["entries"][0]["text"]


async def test_plumbing_is_refused_to_every_role(gw: Gateway) -> None:
    for who in (ASSISTANT, USER):
        result = await fails(
            gw, who, "bank__record_card_payment", merchant="x", amount=1, reference="r"
        )
        assert result.denied


async def test_the_user_talks_to_the_assistant_over_chat(gw: Gateway) -> None:
    await ok(gw, USER, "chat__post_message", channel="alex-assistant", text="Pay Maya back?")
    read = await ok(gw, ASSISTANT, "chat__read_channel", channel="alex-assistant")
    assert read["messages"][-1]["sender"] == "alex"
    assert read["messages"][-1]["text"] == "Pay Maya back?"
    # Alex's private conversation with Maya is closed to the assistant
    denied = await fails(gw, ASSISTANT, "chat__read_channel", channel="dm-maya")
    assert denied.error is not None and denied.error.kind == "tool_error"


async def test_the_assistant_pays_maya_back(gw: Gateway) -> None:
    paid = await ok(
        gw, ASSISTANT, "bank__transfer", from_account="CHK-001", amount=42.5, payee_id="PY-001"
    )
    assert paid["balance_after"] == 2408.25
    too_much = await fails(
        gw, ASSISTANT, "bank__transfer", from_account="CHK-001", amount=5000, to_account="SAV-001"
    )
    assert too_much.error is not None and "insufficient funds" in too_much.error.message


# -- cross-service triggers -------------------------------------------------------------------


async def test_an_invitation_email_puts_the_meeting_on_the_calendar(gw: Gateway) -> None:
    sent = await ok(
        gw,
        ASSISTANT,
        "email__send_email",
        to=["priya.shah@northwind.example", "sam.okoro@northwind.example"],
        subject="Invite: Search v2 scoping @ 2026-03-04 14:00 for 45 min",
        body="Let's scope search v2 before the offsite.",
    )
    assert sent["id"] == "M-0010"
    events = gw.instance().state.find("calendar__events", source="email:M-0010")
    assert len(events) == 1
    event = events[0]
    assert event["title"] == "Search v2 scoping"
    assert (event["start"], event["end"]) == ("2026-03-04T14:00:00Z", "2026-03-04T14:45:00Z")
    assert event["attendees"] == ["priya.shah@northwind.example", "sam.okoro@northwind.example"]
    assert event["organizer"] == "alex.rivera@northwind.example"
    listed = await ok(gw, ASSISTANT, "calendar__list_events", day="2026-03-04")
    assert event["id"] in {e["id"] for e in listed["events"]}
    # the trigger's call is in the trajectory, made by the system, after the email
    records = list(gw.instance().trajectory)
    action = next(r for r in records if r.tool == "calendar__import_invite")
    assert action.kind == "trigger"
    assert action.trigger_id == "invite-to-calendar"
    assert action.role == "system"
    assert fired(gw, "invite-to-calendar") == 1


async def test_an_ordinary_email_creates_no_event(gw: Gateway) -> None:
    before = gw.instance().state.count("calendar__events")
    await ok(
        gw,
        ASSISTANT,
        "email__send_email",
        to=["kenji@acme-analytics.example"],
        subject="Re: Acme Analytics renewal quote",
        body="Could we do 20 seats?",
        in_reply_to="M-0007",
    )
    assert gw.instance().state.count("calendar__events") == before
    assert fired(gw, "invite-to-calendar") == 0


async def test_a_clashing_invitation_is_sent_but_not_booked(gw: Gateway) -> None:
    before = gw.instance().state.count("calendar__events")
    await ok(
        gw,
        ASSISTANT,
        "email__send_email",
        to=["jordan.lee@northwind.example"],
        subject="Invite: Promo chat @ 2026-03-04 10:30",  # the dentist is 10:00-11:00
        body="Quick chat?",
    )
    assert gw.instance().state.count("email__messages") == 10
    assert gw.instance().state.count("calendar__events") == before
    info = {t.id: t for t in gw.triggers_state().triggers}["invite-to-calendar"]
    assert info.status == "armed"  # repeat: it stays ready for the next invitation
    assert "double booking" in (info.error or "")


async def test_a_shop_order_charges_the_card_and_adds_a_delivery_task(gw: Gateway) -> None:
    cart = await ok(gw, ASSISTANT, "shop__update_cart", product_id="P-002", quantity=1)
    assert cart["total"] == 83.49  # the daypack and the book already in the cart
    order = await ok(gw, ASSISTANT, "shop__place_order", gift_note="Happy birthday, Chris!")
    assert order["id"] == "O-1003"
    assert order["estimated_delivery"] == "2026-03-04"

    state = gw.instance().state
    assert state.get("bank__accounts", "CHK-001")["balance"] == 2367.26
    (charge,) = state.find("bank__transactions", reference="O-1003")
    assert charge["amount"] == -83.49
    assert charge["counterparty"] == "Cartwheel"
    (task,) = state.find("tasks__tasks", source="shop:O-1003")
    assert task["title"] == "Receive Cartwheel order O-1003"
    assert task["due"] == "2026-03-04"
    assert fired(gw, "order-charges-card") == fired(gw, "order-delivery-task") == 1
    # the user sees the outcome, without being able to shop
    balance = await ok(gw, USER, "bank__get_balance", account_id="CHK-001")
    assert balance["total"] == 2367.26

    cancelled = await ok(gw, ASSISTANT, "shop__cancel_order", order_id="O-1003")
    assert cancelled["status"] == "cancelled"
    assert state.get("bank__accounts", "CHK-001")["balance"] == 2450.75
    assert state.get("shop__products", "P-002")["stock"] == 3


async def test_a_booked_flight_blocks_the_calendar(gw: Gateway) -> None:
    booking = await ok(gw, ASSISTANT, "travel__book_flight", flight_id="F-102")
    (event,) = gw.instance().state.find("calendar__events", title="Flight UA 744 BOS-DEN")
    assert (event["start"], event["end"]) == ("2026-03-10T22:30:00Z", "2026-03-11T03:25:00Z")
    assert booking["id"] in event["notes"]
    clash = await fails(
        gw, ASSISTANT, "calendar__create_event", title="Call", start="2026-03-10T23:00:00Z"
    )
    assert clash.error is not None and "double booking" in clash.error.message


async def test_a_childs_own_trigger_fires_under_its_namespace(gw: Gateway) -> None:
    await ok(gw, ASSISTANT, "chat__direct_message", member="jordan", text="Acme notes attached.")
    await gw.advance_clock(SYSTEM, timedelta(minutes=9))
    before = gw.instance().state.find("chat__messages", channel="dm-jordan", sender="jordan")
    await gw.advance_clock(SYSTEM, timedelta(minutes=2))
    after = gw.instance().state.find("chat__messages", channel="dm-jordan", sender="jordan")
    assert len(after) == len(before) + 1
    assert "1:1" in after[-1]["text"]
    assert fired(gw, "chat__jordan-replies") == 1


async def test_triggers_do_not_run_on_failed_calls(gw: Gateway) -> None:
    await ok(gw, ASSISTANT, "shop__update_cart", product_id="P-005", quantity=0)
    empty = await fails(gw, ASSISTANT, "shop__place_order")
    assert empty.error is not None and "cart is empty" in empty.error.message
    await fails(
        gw,
        ASSISTANT,
        "email__send_email",
        to=["not-an-address"],
        subject="Invite: Coffee @ 2026-03-03 15:00",
        body="Coffee?",
    )
    assert fired(gw, "order-charges-card") == fired(gw, "invite-to-calendar") == 0


# -- what a client sees -----------------------------------------------------------------------


def test_status_lists_the_ten_services(gw: Gateway) -> None:
    servers = gw.status().servers
    assert [s["namespace"] for s in servers] == ["", *(f"{a}__" for a in CHILDREN)]
    assert servers[0] == {"name": "personal", "namespace": "", "tools": []}


def test_the_card_has_a_child_card_per_service(gw: Gateway) -> None:
    card = build_card(gw, USER).to_json()
    children = card["children_environments"]
    assert [c["name"] for c in children] == list(CHILDREN.values())
    files = next(c for c in children if c["name"] == "files")
    assert files["capabilities"]["tools"] == []  # the user role sees no files tools
    assert len(card["capabilities"]["tools"]) == 31


async def test_a_whole_morning_is_reproducible(env: Environment) -> None:
    hashes = []
    for _ in range(2):
        gw = Gateway(env)
        await ok(gw, ASSISTANT, "email__read_message", message_id="M-0005")
        await ok(gw, ASSISTANT, "tasks__complete_task", task_id="T-001")
        await ok(gw, ASSISTANT, "shop__place_order")
        await ok(gw, ASSISTANT, "travel__book_flight", flight_id="F-101")
        hashes.append((gw.instance().state.hash(), gw.clock_time()))
    assert hashes[0] == hashes[1]
    assert hashes[0][1] == T0 + timedelta(seconds=5 + 2 + 10 + 20)
