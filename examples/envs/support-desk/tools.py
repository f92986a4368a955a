"""Tools of the support-desk example environment.

Every function marked with `@tool` becomes a tool (env.yaml loads the whole module). A tool
takes a `ToolContext` first (the state, the virtual time and the caller) and its arguments
after; the argument schema agents see comes from the type hints and the `Args:` section of
the docstring. Raising `ToolError` fails the call with that message and rolls back every
write the tool made, so business rules are plain `if ...: raise ToolError(...)`.

Who may call what is decided by the gateway, not here: the customer tools declare
`roles=["customer"]`, and env.yaml's `access:` rules hide the agent tools from customers and
`deliver_email` from everyone. Only `issue_refund` looks at the caller's role itself, because
its rule depends on the amount.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from agentenv import ToolContext, ToolError, tool

REFUND_LIMIT = 100.00
"""Refunds above this amount (in dollars) need the supervisor role."""

UNLIMITED_REFUND_ROLES = ("supervisor", "system")
WAIT = timedelta(minutes=15)

TicketStatus = Literal["open", "pending", "closed"]
Category = Literal["billing", "shipping", "account", "technical"]


# -- helpers (not tools: no @tool) ----------------------------------------------------------


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _next_id(ctx: ToolContext, collection: str, prefix: str, width: int = 4) -> str:
    """The next free id of the form PREFIX0042: one more than the highest taken."""
    numbers = [
        int(key[len(prefix) :])
        for key in ctx.state.keys(collection)
        if key.startswith(prefix) and key[len(prefix) :].isdigit()
    ]
    return f"{prefix}{max(numbers, default=0) + 1:0{width}d}"


def _ticket(ctx: ToolContext, ticket_id: str) -> dict[str, Any]:
    ticket = ctx.state.get("tickets", ticket_id)
    if ticket is None:
        raise ToolError(f"no ticket {ticket_id!r}")
    return ticket


def _customer_by_email(ctx: ToolContext, email: str) -> dict[str, Any] | None:
    wanted = email.strip().lower()
    found = ctx.state.find("customers", where=lambda c: c["email"].lower() == wanted)
    return found[0] if found else None


def _summary(ticket: dict[str, Any]) -> dict[str, Any]:
    return {k: ticket.get(k) for k in ("id", "customer_id", "subject", "category", "status")}


# -- agent and supervisor tools -------------------------------------------------------------


@tool(kind="read", duration=4)
def list_tickets(
    ctx: ToolContext, status: TicketStatus | None = None, customer_id: str | None = None
) -> dict[str, Any]:
    """List support tickets (id, customer, subject, category, status), oldest first.

    Args:
        status: Only tickets with this status: open, pending (waiting on the customer) or closed.
        customer_id: Only tickets of this customer, e.g. C-003.
    """
    equals = {k: v for k, v in (("status", status), ("customer_id", customer_id)) if v}
    tickets = [_summary(t) for t in ctx.state.find("tickets", **equals)]
    return {"tickets": tickets, "total": len(tickets)}


@tool(kind="read", duration=6)
def read_ticket(ctx: ToolContext, ticket_id: str) -> dict[str, Any]:
    """Read one ticket in full: its thread of messages, the customer and the order it is about.

    Args:
        ticket_id: The ticket's id, e.g. T-1042.
    """
    ticket = _ticket(ctx, ticket_id)
    customer = ctx.state.get("customers", ticket["customer_id"])
    ticket["customer"] = (
        {k: customer[k] for k in ("id", "name", "email", "tier")} if customer else None
    )
    return ticket


@tool(kind="read", duration=5)
def read_inbox(ctx: ToolContext, from_addr: str | None = None, limit: int = 20) -> dict[str, Any]:
    """Read emails received by the support desk, newest first.

    Args:
        from_addr: Only emails from this address (case-insensitive).
        limit: At most this many emails.
    """
    emails = ctx.state.list("inbox")
    if from_addr:
        emails = [e for e in emails if e["from_addr"].lower() == from_addr.strip().lower()]
    emails.sort(key=lambda e: (e["received_at"], e["id"]), reverse=True)
    return {"emails": emails[: max(limit, 0)], "total": len(emails)}


@tool(kind="write", duration=60)
def send_email(
    ctx: ToolContext, to: str, subject: str, body: str, ticket_id: str | None = None
) -> dict[str, Any]:
    """Send an email from the support desk. A customer who is emailed answers about 30 minutes later.

    Args:
        to: The recipient's email address.
        subject: The subject line.
        body: The text of the email.
        ticket_id: The ticket this email is about, if any; the customer's answer is added to it.
    """
    if "@" not in to:
        raise ToolError(f"{to!r} is not an email address")
    if not subject.strip() or not body.strip():
        raise ToolError("an email needs a subject and a body")
    if ticket_id is not None:
        _ticket(ctx, ticket_id)
    email = {
        "id": _next_id(ctx, "outbox", "OUT-"),
        "to": to.strip(),
        "subject": subject,
        "body": body,
        "ticket_id": ticket_id,
        "sent_at": _stamp(ctx.now),
        "sent_by": ctx.principal.role,
    }
    return ctx.state.insert("outbox", email)


@tool(kind="write", duration=30)
def reply_to_customer(ctx: ToolContext, ticket_id: str, message: str) -> dict[str, Any]:
    """Post a reply on a ticket's thread (the customer sees it in the help portal) and mark the
    ticket pending, i.e. waiting on the customer. This does not send an email: use send_email.

    Args:
        ticket_id: The ticket to answer, e.g. T-1042.
        message: The reply the customer will read.
    """
    ticket = _ticket(ctx, ticket_id)
    if ticket["status"] == "closed":
        raise ToolError(f"ticket {ticket_id} is closed")
    if not message.strip():
        raise ToolError("the reply is empty")
    ticket["messages"].append({"from": "support", "at": _stamp(ctx.now), "body": message})
    ticket["status"] = "pending"
    updated = ctx.state.put("tickets", ticket)
    return {"ticket": _summary(updated), "messages": len(updated["messages"])}


@tool(kind="write", duration=20)
def issue_refund(
    ctx: ToolContext,
    ticket_id: str,
    customer_id: str,
    amount: float,
    reason: str,
    order_id: str | None = None,
) -> dict[str, Any]:
    """Refund money to a customer, against one of their tickets.

    Refunds above $100.00 need the supervisor role. A refund against an order cannot exceed
    what was charged on that order, less earlier refunds.

    Args:
        ticket_id: The ticket the refund resolves, e.g. T-1042.
        customer_id: The customer to refund, e.g. C-003; must be the ticket's customer.
        amount: The amount in dollars, e.g. 98.00; must be positive.
        reason: Why the refund is given (shown to the customer and to auditors).
        order_id: The order refunded, if the refund is for an order.
    """
    amount = round(amount, 2)
    if amount <= 0:
        raise ToolError(f"the amount must be positive (got {amount:.2f})")
    ticket = _ticket(ctx, ticket_id)
    customer = ctx.state.get("customers", customer_id)
    if customer is None:
        raise ToolError(f"no customer {customer_id!r}")
    if ticket["customer_id"] != customer_id:
        raise ToolError(
            f"ticket {ticket_id} belongs to customer {ticket['customer_id']}, not {customer_id}"
        )
    if ticket["status"] == "closed":
        raise ToolError(f"ticket {ticket_id} is closed; refunds go against open tickets")
    if not reason.strip():
        raise ToolError("a refund needs a reason")
    role = ctx.principal.role
    if amount > REFUND_LIMIT and role not in UNLIMITED_REFUND_ROLES:
        raise ToolError(
            f"refunds above ${REFUND_LIMIT:.2f} need the supervisor role "
            f"(asked ${amount:.2f} as {role!r}); escalate to a supervisor"
        )
    if order_id is not None:
        order = ctx.state.get("orders", order_id)
        if order is None:
            raise ToolError(f"no order {order_id!r}")
        if order["customer_id"] != customer_id:
            raise ToolError(f"order {order_id} is not an order of customer {customer_id}")
        charged = sum(order["charges"])
        refunded = sum(r["amount"] for r in ctx.state.find("refunds", order_id=order_id))
        if amount > round(charged - refunded, 2) + 1e-9:
            raise ToolError(
                f"order {order_id} was charged ${charged:.2f} and ${refunded:.2f} is already "
                f"refunded; at most ${charged - refunded:.2f} can still be refunded"
            )
    refund = {
        "id": _next_id(ctx, "refunds", "R-"),
        "ticket_id": ticket_id,
        "customer_id": customer_id,
        "order_id": order_id,
        "amount": amount,
        "reason": reason,
        "issued_by": role,
        "issued_at": _stamp(ctx.now),
    }
    return ctx.state.insert("refunds", refund)


@tool(kind="write", duration=10)
def close_ticket(ctx: ToolContext, ticket_id: str, resolution: str) -> dict[str, Any]:
    """Close a ticket with a note saying how it was resolved.

    Args:
        ticket_id: The ticket to close, e.g. T-1042.
        resolution: How the issue was resolved (required, cannot be blank).
    """
    ticket = _ticket(ctx, ticket_id)
    if ticket["status"] == "closed":
        raise ToolError(f"ticket {ticket_id} is already closed")
    if not resolution.strip():
        raise ToolError("closing a ticket needs a resolution note")
    ticket.update(status="closed", resolution=resolution.strip(), closed_at=_stamp(ctx.now))
    return _summary(ctx.state.put("tickets", ticket))


@tool(kind="read", duration=WAIT)
def wait(ctx: ToolContext) -> dict[str, Any]:
    """Do nothing for 15 minutes of virtual time, e.g. while waiting for a customer to answer."""
    return {"waited_minutes": 15, "now": _stamp(ctx.now + WAIT)}


# -- customer tools (roles=["customer"]: agents do not see them) ----------------------------


@tool(kind="write", duration=30, roles=["customer"])
def open_ticket(
    ctx: ToolContext, email: str, subject: str, message: str, category: Category = "technical"
) -> dict[str, Any]:
    """Ask the support desk for help: opens a new ticket.

    Args:
        email: Your email address, as registered with the shop.
        subject: What the problem is about, in a few words.
        message: The problem, in your own words.
        category: billing, shipping, account or technical.
    """
    customer = _customer_by_email(ctx, email)
    if customer is None:
        raise ToolError(f"no customer is registered with {email!r}")
    if not subject.strip() or not message.strip():
        raise ToolError("a ticket needs a subject and a message")
    ticket = {
        "id": _next_id(ctx, "tickets", "T-"),
        "customer_id": customer["id"],
        "subject": subject,
        "category": category,
        "status": "open",
        "priority": "normal",
        "order_id": None,
        "created_at": _stamp(ctx.now),
        "messages": [{"from": "customer", "at": _stamp(ctx.now), "body": message}],
    }
    return _summary(ctx.state.insert("tickets", ticket))


@tool(kind="read", duration=3, roles=["customer"])
def check_ticket_status(ctx: ToolContext, ticket_id: str, email: str) -> dict[str, Any]:
    """See the status and the replies of one of your tickets.

    Args:
        ticket_id: The ticket's id, e.g. T-1042.
        email: Your email address; it must be the ticket owner's.
    """
    ticket = ctx.state.get("tickets", ticket_id)
    customer = _customer_by_email(ctx, email)
    if ticket is None or customer is None or ticket["customer_id"] != customer["id"]:
        raise ToolError(f"no ticket {ticket_id!r} for {email!r}")
    return {
        **_summary(ticket),
        "messages": ticket["messages"],
        "resolution": ticket.get("resolution"),
    }


# -- internal (hidden from every role by env.yaml's access rules; triggers call it) ---------


@tool(kind="write", duration=0)
def deliver_email(
    ctx: ToolContext,
    from_addr: str,
    subject: str,
    in_reply_to: str | None = None,
    ticket_id: str | None = None,
    body: str | None = None,
) -> dict[str, Any]:
    """Put an email into the support inbox (the simulated customer's answer).

    Args:
        from_addr: The sender's address.
        subject: The subject line.
        in_reply_to: The id of the outbox email this answers, if any.
        ticket_id: The ticket it is about, if any; the email is also added to its thread.
        body: The text; if unset, the simulated customer writes one from the current state.
    """
    customer = _customer_by_email(ctx, from_addr)
    if body is None:
        body = _customer_answer(ctx, customer, ticket_id)
    email = {
        "id": _next_id(ctx, "inbox", "IN-"),
        "from_addr": from_addr,
        "customer_id": customer["id"] if customer else None,
        "subject": subject,
        "body": body,
        "in_reply_to": in_reply_to,
        "ticket_id": ticket_id,
        "received_at": _stamp(ctx.now),
    }
    stored = ctx.state.insert("inbox", email)
    ticket = ctx.state.get("tickets", ticket_id) if ticket_id else None
    if ticket is not None:
        ticket["messages"].append({"from": "customer", "at": _stamp(ctx.now), "body": body})
        if ticket["status"] == "pending":
            ticket["status"] = "open"
        ctx.state.put("tickets", ticket)
    return stored


def _customer_answer(
    ctx: ToolContext, customer: dict[str, Any] | None, ticket_id: str | None
) -> str:
    """A deterministic answer: thanks for a refund already issued, else asks for one."""
    if customer is None:
        return "Thanks for your message. (automatic reply)"
    name = customer["name"].split()[0]
    refunds = ctx.state.find("refunds", customer_id=customer["id"])
    if ticket_id:
        refunds = [r for r in refunds if r["ticket_id"] == ticket_id]
    if refunds:
        total = sum(r["amount"] for r in refunds)
        return (
            f"Thank you, I can see the refund of ${total:.2f}. "
            f"That settles it for me, you can close the ticket.\n\n{name}"
        )
    return (
        "Thanks for getting back to me. When will I see the money back on my card? "
        f"I would like this sorted out this week.\n\n{name}"
    )
