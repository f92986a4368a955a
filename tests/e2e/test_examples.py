"""The example environments a newcomer runs first: they load, and they behave as their
READMEs say, driven through the Gateway exactly as an agent would drive them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentenv import SYSTEM, CallResult, Environment, Gateway, Principal

EXAMPLES = Path(__file__).parents[2] / "examples" / "envs"
SUPPORT_DESK = EXAMPLES / "support-desk"
BOOKSHOP = EXAMPLES / "bookshop"

AGENT = Principal("agent", name="agent-1")
SUPERVISOR = Principal("supervisor", name="sup-1")
CUSTOMER = Principal("customer", name="dana")
DANA = "dana.whitfield@example.com"

AGENT_TOOLS = {
    "list_tickets",
    "read_ticket",
    "read_inbox",
    "send_email",
    "reply_to_customer",
    "issue_refund",
    "close_ticket",
    "wait",
    "get_customer",
    "search_customers",
    "get_order",
    "list_refunds",
    "get_time",
}
CUSTOMER_TOOLS = {"open_ticket", "check_ticket_status", "get_time"}


@pytest.fixture(scope="module")
def desk_env() -> Environment:
    return Environment.load(SUPPORT_DESK)


@pytest.fixture
def desk(desk_env: Environment) -> Gateway:
    return Gateway(desk_env)


@pytest.fixture(scope="module")
def shop_env() -> Environment:
    return Environment.load(BOOKSHOP)


@pytest.fixture
def shop(shop_env: Environment) -> Gateway:
    return Gateway(shop_env)


async def ok(gw: Gateway, who: Principal, tool: str, **args: Any) -> Any:
    result = await gw.call(who, tool, args)
    assert result.ok, f"{tool} failed: {result.text}"
    return result.value


async def fails(gw: Gateway, who: Principal, tool: str, **args: Any) -> CallResult:
    """Call a tool that must fail with a tool error and leave the state untouched."""
    state = gw.instance().state
    before, records = state.hash(), state.to_dict()
    result = await gw.call(who, tool, args)
    assert not result.ok, f"{tool} should have failed: {result.text}"
    assert result.error is not None
    assert state.hash() == before == result.state_hash
    assert state.to_dict() == records
    return result


def desk_seed_hash(gw: Gateway) -> str:
    return gw.env.seed.hash()


def inbox(gw: Gateway) -> list[dict[str, Any]]:
    return gw.instance().state.list("inbox")


# -- support desk: loading ------------------------------------------------------------------


def test_support_desk_loads(desk_env: Environment) -> None:
    assert desk_env.name == "support-desk"
    assert desk_env.roles == ("agent", "supervisor", "customer")
    assert desk_env.default_role == "agent"
    seed = desk_env.seed.to_dict()
    assert set(seed) == {"customers", "orders", "tickets", "outbox", "inbox", "refunds"}
    assert 8 <= len(seed["tickets"]) <= 12
    assert seed["outbox"] == []
    assert any(t["status"] == "closed" for t in seed["tickets"])


def test_tool_kinds_and_durations(desk_env: Environment) -> None:
    tools = desk_env.tools
    expected = {
        "list_tickets": ("read", 4),
        "read_ticket": ("read", 6),
        "read_inbox": ("read", 5),
        "send_email": ("write", 60),
        "issue_refund": ("write", 20),
        "close_ticket": ("write", 10),
        "get_customer": ("read", 3),
        "search_customers": ("read", 5),
    }
    for name, (kind, seconds) in expected.items():
        assert tools[name].kind == kind, name
        assert tools[name].duration == timedelta(seconds=seconds), name
    assert "ticket_id" in tools["read_ticket"].input_schema["required"]
    assert tools["read_ticket"].input_schema["properties"]["ticket_id"]["description"]


# -- support desk: the T-1042 story ---------------------------------------------------------


async def test_list_and_read_t1042(desk: Gateway) -> None:
    listed = await ok(desk, AGENT, "list_tickets", status="open")
    ids = {t["id"] for t in listed["tickets"]}
    assert "T-1042" in ids
    assert all(t["status"] == "open" for t in listed["tickets"])
    closed = await ok(desk, AGENT, "list_tickets", status="closed")
    assert "T-1042" not in {t["id"] for t in closed["tickets"]}

    ticket = await ok(desk, AGENT, "read_ticket", ticket_id="T-1042")
    assert ticket["category"] == "billing"
    assert ticket["customer"]["email"] == DANA
    order = await ok(desk, AGENT, "get_order", id=ticket["order_id"])
    assert order["charges"] == [98.0, 98.0]

    # read tools move the stepped clock by their duration: 4 + 4 + 6 + 3 seconds
    assert desk.clock_time() == datetime(2026, 3, 2, 9, 0, 17, tzinfo=UTC)


async def test_search_finds_the_decoy_too(desk: Gateway) -> None:
    found = await ok(desk, AGENT, "search_customers", query="dana whit")
    assert {c["name"] for c in found["customers"]} == {"Dana Whitfield", "Dana Whitford"}
    customer = await ok(desk, AGENT, "get_customer", id="C-003")
    assert customer["email"] == DANA


async def test_agent_refunds_98(desk: Gateway) -> None:
    refund = await ok(
        desk,
        AGENT,
        "issue_refund",
        ticket_id="T-1042",
        customer_id="C-003",
        amount=98,
        reason="Duplicate charge on O-5531",
        order_id="O-5531",
    )
    assert refund["amount"] == 98.0
    assert refund["issued_by"] == "agent"
    listed = await ok(desk, AGENT, "list_refunds", ticket_id="T-1042")
    assert [r["id"] for r in listed["refunds"]] == [refund["id"]]


async def test_agent_cannot_refund_150(desk: Gateway) -> None:
    result = await fails(
        desk,
        AGENT,
        "issue_refund",
        ticket_id="T-1042",
        customer_id="C-003",
        amount=150,
        reason="Goodwill",
    )
    assert result.error is not None
    assert result.error.kind == "tool_error"
    assert "supervisor" in result.error.message
    # the failure is recorded, with the unchanged hash
    record = desk.instance().trajectory.calls()[-1]
    assert record.tool == "issue_refund"
    assert record.error is not None
    assert record.state_hash == desk_seed_hash(desk)


async def test_supervisor_can_refund_150(desk: Gateway) -> None:
    refund = await ok(
        desk,
        SUPERVISOR,
        "issue_refund",
        ticket_id="T-1042",
        customer_id="C-003",
        amount=150,
        reason="Duplicate charge plus goodwill",
    )
    assert refund["amount"] == 150.0
    assert refund["issued_by"] == "supervisor"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"amount": 0}, "positive"),
        ({"amount": -5}, "positive"),
        ({"ticket_id": "T-9999"}, "no ticket"),
        ({"customer_id": "C-999"}, "no customer"),
        ({"customer_id": "C-006"}, "belongs to customer C-003"),  # the decoy Dana
        ({"order_id": "O-5512"}, "not an order of customer C-003"),
        ({"ticket_id": "T-1039", "customer_id": "C-006"}, "closed"),
    ],
)
async def test_refund_rules(desk: Gateway, args: dict[str, Any], message: str) -> None:
    full = {
        "ticket_id": "T-1042",
        "customer_id": "C-003",
        "amount": 98,
        "reason": "Duplicate charge",
        **args,
    }
    result = await fails(desk, SUPERVISOR, "issue_refund", **full)
    assert result.error is not None
    assert message in result.error.message


async def test_refunds_cannot_exceed_what_the_order_was_charged(desk: Gateway) -> None:
    base = {"ticket_id": "T-1042", "customer_id": "C-003", "order_id": "O-5531"}
    await ok(desk, SUPERVISOR, "issue_refund", amount=150, reason="part", **base)
    await fails(desk, SUPERVISOR, "issue_refund", amount=50, reason="more", **base)
    await ok(desk, SUPERVISOR, "issue_refund", amount=46, reason="rest", **base)


async def test_close_ticket_needs_a_note(desk: Gateway) -> None:
    for note in ("", "   "):
        result = await fails(desk, AGENT, "close_ticket", ticket_id="T-1042", resolution=note)
        assert result.error is not None
        assert "resolution" in result.error.message
    missing = await fails(desk, AGENT, "close_ticket", ticket_id="T-1042")
    assert missing.error is not None
    assert missing.error.kind == "invalid_arguments"

    closed = await ok(
        desk, AGENT, "close_ticket", ticket_id="T-1042", resolution="Refunded duplicate $98"
    )
    assert closed["status"] == "closed"
    await fails(desk, AGENT, "close_ticket", ticket_id="T-1042", resolution="again")


async def test_reply_to_customer_marks_pending(desk: Gateway) -> None:
    await ok(desk, AGENT, "reply_to_customer", ticket_id="T-1042", message="Refund is on its way.")
    ticket = await ok(desk, AGENT, "read_ticket", ticket_id="T-1042")
    assert ticket["status"] == "pending"
    assert ticket["messages"][-1] == {
        "from": "support",
        "at": "2026-03-02T09:00:00Z",
        "body": "Refund is on its way.",
    }
    seen = await ok(desk, CUSTOMER, "check_ticket_status", ticket_id="T-1042", email=DANA)
    assert seen["messages"][-1]["body"] == "Refund is on its way."


# -- support desk: roles --------------------------------------------------------------------


async def test_customer_sees_only_portal_tools(desk: Gateway) -> None:
    assert {t.name for t in desk.list_tools(CUSTOMER)} == CUSTOMER_TOOLS
    for tool, args in [
        ("read_ticket", {"ticket_id": "T-1042"}),
        (
            "issue_refund",
            {"ticket_id": "T-1042", "customer_id": "C-003", "amount": 1, "reason": "x"},
        ),
        ("deliver_email", {"from_addr": DANA, "subject": "hi", "body": "x"}),
    ]:
        result = await fails(desk, CUSTOMER, tool, **args)
        assert result.denied, tool


async def test_agents_see_agent_tools_and_not_the_plumbing(desk: Gateway) -> None:
    for who in (AGENT, SUPERVISOR):
        assert {t.name for t in desk.list_tools(who)} == AGENT_TOOLS
        result = await fails(desk, who, "deliver_email", from_addr=DANA, subject="x", body="x")
        assert result.denied
    result = await fails(
        desk, AGENT, "open_ticket", email=DANA, subject="x", message="x", category="billing"
    )
    assert result.denied


async def test_customer_portal(desk: Gateway) -> None:
    opened = await ok(
        desk,
        CUSTOMER,
        "open_ticket",
        email=DANA,
        subject="Where is my refund?",
        message="Still waiting.",
        category="billing",
    )
    assert opened["customer_id"] == "C-003"
    assert opened["status"] == "open"
    await ok(desk, CUSTOMER, "check_ticket_status", ticket_id=opened["id"], email=DANA)
    # someone else's ticket, or the decoy's email, reveals nothing
    await fails(desk, CUSTOMER, "check_ticket_status", ticket_id="T-1045", email=DANA)
    await fails(
        desk, CUSTOMER, "check_ticket_status", ticket_id="T-1042", email="dana.whitford@example.org"
    )
    listed = await ok(desk, AGENT, "list_tickets", customer_id="C-003")
    assert opened["id"] in {t["id"] for t in listed["tickets"]}


# -- support desk: the trigger --------------------------------------------------------------


async def test_emailed_customer_answers_after_30_minutes(desk: Gateway) -> None:
    before = len(inbox(desk))
    sent = await ok(
        desk,
        AGENT,
        "send_email",
        to=DANA,
        subject="Your double charge",
        body="We are refunding the duplicate $98.",
        ticket_id="T-1042",
    )
    assert sent["id"] == "OUT-0001"
    assert desk.instance().state.get("outbox", "OUT-0001") is not None

    await desk.advance_clock(SYSTEM, timedelta(minutes=29))
    assert len(inbox(desk)) == before  # not before 30 minutes

    await desk.advance_clock(SYSTEM, timedelta(minutes=2))
    emails = (await ok(desk, AGENT, "read_inbox", from_addr=DANA))["emails"]
    reply = emails[0]
    assert len(inbox(desk)) == before + 1
    assert reply["subject"] == "Re: Your double charge"
    assert reply["in_reply_to"] == "OUT-0001"
    assert reply["ticket_id"] == "T-1042"
    assert reply["customer_id"] == "C-003"
    # 30 minutes after send_email finished (it takes 60 s of virtual time)
    assert reply["received_at"] == "2026-03-02T09:31:00Z"
    ticket = await ok(desk, AGENT, "read_ticket", ticket_id="T-1042")
    assert ticket["messages"][-1]["from"] == "customer"

    state = desk.triggers_state()
    assert [t.fired for t in state.triggers] == [1]
    assert state.triggers[0].status == "armed"  # repeat: ready for the next email


async def test_every_email_gets_an_answer_that_reflects_the_state(desk: Gateway) -> None:
    await ok(desk, AGENT, "send_email", to=DANA, subject="First", body="Looking into it.")
    await ok(
        desk,
        AGENT,
        "issue_refund",
        ticket_id="T-1042",
        customer_id="C-003",
        amount=98,
        reason="Duplicate charge",
    )
    await ok(desk, AGENT, "send_email", to=DANA, subject="Second", body="Refunded.")
    await desk.advance_clock(SYSTEM, timedelta(hours=1))
    replies = [e for e in inbox(desk) if e["in_reply_to"]]
    assert [e["subject"] for e in replies] == ["Re: First", "Re: Second"]
    assert "$98.00" in replies[1]["body"]
    assert desk.triggers_state().triggers[0].fired == 2


async def test_waiting_lets_the_answer_arrive(desk: Gateway) -> None:
    await ok(desk, AGENT, "send_email", to=DANA, subject="Hello", body="Any news?")
    await ok(desk, AGENT, "wait")
    assert not any(e["in_reply_to"] for e in inbox(desk))
    await ok(desk, AGENT, "wait")
    assert any(e["in_reply_to"] == "OUT-0001" for e in inbox(desk))


async def test_a_failed_email_provokes_nothing(desk: Gateway) -> None:
    await fails(desk, AGENT, "send_email", to="not-an-address", subject="x", body="y")
    await desk.advance_clock(SYSTEM, timedelta(hours=1))
    assert desk.triggers_state().triggers[0].fired == 0


async def test_instances_are_isolated(desk: Gateway) -> None:
    desk.create_instance("other")
    await ok(
        desk,
        AGENT,
        "close_ticket",
        ticket_id="T-1042",
        resolution="done",
    )
    other = await desk.call(AGENT, "read_ticket", {"ticket_id": "T-1042"}, instance="other")
    assert other.value["status"] == "open"


# -- bookshop -------------------------------------------------------------------------------


def test_bookshop_loads(shop_env: Environment) -> None:
    assert shop_env.name == "bookshop"
    assert shop_env.roles == ("customer", "staff")
    assert {
        "search_books",
        "get_book",
        "get_customer",
        "list_orders",
        "place_order",
        "cancel_order",
        "restock_book",
    } <= set(shop_env.tools)
    seed = shop_env.seed.to_dict()
    assert {"books", "customers", "orders"} <= set(seed)
    assert shop_env.tools["place_order"].input_schema["required"] == ["customer_id", "book_id"]


async def test_bookshop_order_and_cancel(shop: Gateway) -> None:
    customer = Principal("customer")
    found = await ok(shop, customer, "search_books", query="le guin", in_stock_only=True)
    assert [b["book_id"] for b in found["data"]] == ["B-001"]

    placed = await ok(
        shop, customer, "place_order", customer_id="U-001", book_id="B-001", quantity=2
    )
    order_id = placed["data"]["order_id"]
    assert order_id == "ORD-0002"
    assert placed["data"]["total"] == 29.0
    state = shop.instance().state
    assert state.get("books", "B-001")["stock"] == 1
    assert state.get("customers", "U-001")["credit"] == 21.0

    cancelled = await ok(shop, customer, "cancel_order", order_id=order_id)
    assert cancelled["data"]["status"] == "cancelled"
    assert state.get("books", "B-001")["stock"] == 3
    assert state.get("customers", "U-001")["credit"] == 50.0
    await fails(shop, customer, "cancel_order", order_id=order_id)


async def test_bookshop_failures_leave_state_unchanged(shop: Gateway) -> None:
    customer = Principal("customer")
    # place_order takes the stock before it finds the shortage: the gateway undoes it
    result = await fails(
        shop, customer, "place_order", customer_id="U-001", book_id="B-003", quantity=2
    )
    assert result.error is not None
    assert "in stock" in result.error.message
    # not enough credit, after stock was taken
    result = await fails(shop, customer, "place_order", customer_id="U-002", book_id="B-003")
    assert result.error is not None
    assert "credit" in result.error.message
    await fails(shop, customer, "get_book", book_id="B-999")
    assert shop.instance().state.get("books", "B-003")["stock"] == 1


async def test_bookshop_restock_is_for_staff(shop: Gateway) -> None:
    customer, staff = Principal("customer"), Principal("staff")
    assert "restock_book" not in {t.name for t in shop.list_tools(customer)}
    denied = await fails(shop, customer, "restock_book", book_id="B-004", quantity=2)
    assert denied.denied
    restocked = await ok(shop, staff, "restock_book", book_id="B-004", quantity=2)
    assert restocked["data"]["stock"] == 2
    await ok(shop, customer, "place_order", customer_id="U-003", book_id="B-004")
