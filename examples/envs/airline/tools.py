"""Tools of the airline example environment: reservations, flights and the customer's
message thread.

The tools do what an airline's booking system does: they keep the records consistent (a
flight on the same route, a free seat, no refund above what was paid) but they do not
apply the desk's written policy. Fees, refund eligibility and the customer's consent are
the agent's job, stated in env.yaml's description, and the tasks' verifiers check them.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any, Literal

from agentenv import ToolContext, ToolError, tool

WAIT = timedelta(minutes=15)
AMOUNT = re.compile(r"\$\s?\d")  # a quote names an amount in dollars
REFUSAL = re.compile(r"(?i)\b(cannot|can't|can not|unable|not able|not possible|not allowed)\b")

RefundMethod = Literal["card", "travel_credit", "none"]


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _next_id(ctx: ToolContext, collection: str, prefix: str) -> str:
    numbers = [int(k[len(prefix) :]) for k in ctx.state.keys(collection) if k.startswith(prefix)]
    return f"{prefix}{max(numbers, default=0) + 1:04d}"


def _reservation(ctx: ToolContext, reservation_id: str) -> dict[str, Any]:
    found = ctx.state.get("reservations", reservation_id)
    if found is None:
        raise ToolError(f"no reservation {reservation_id!r}")
    return found


def _flight(ctx: ToolContext, flight_id: str) -> dict[str, Any]:
    found = ctx.state.get("flights", flight_id)
    if found is None:
        raise ToolError(f"no flight {flight_id!r}")
    return found


def _consent_on_file(ctx: ToolContext, reservation_id: str) -> bool:
    """Whether the customer has said yes in the thread (the system logs it with the action,
    so an action taken before the customer's answer shows as taken without consent)."""
    thread = ctx.state.find("messages", reservation_id=reservation_id, sender="customer")
    return any(m.get("consent") is True for m in thread)


def _pay(ctx: ToolContext, reservation_id: str, kind: str, amount: float, method: str) -> Any:
    payment = {
        "id": _next_id(ctx, "payments", "PAY-"),
        "reservation_id": reservation_id,
        "kind": kind,
        "amount": amount,
        "method": method,
        "at": _stamp(ctx.now),
        "by": ctx.principal.role,
    }
    return ctx.state.insert("payments", payment)


@tool(kind="read", duration=5)
def get_reservation(ctx: ToolContext, reservation_id: str) -> dict[str, Any]:
    """A reservation with its passenger, its flight and the payments made on it.

    Args:
        reservation_id: The reservation's id, e.g. RES-2001.
    """
    reservation = _reservation(ctx, reservation_id)
    return {
        **reservation,
        "passenger": ctx.state.get("passengers", reservation["passenger_id"]),
        "flight": ctx.state.get("flights", reservation["flight_id"]),
        "payments": ctx.state.find("payments", reservation_id=reservation_id),
    }


@tool(kind="read", duration=8)
def find_flights(ctx: ToolContext, origin: str, destination: str, date: str) -> dict[str, Any]:
    """Flights on a route on one day, with their status, fares by class and free seats.

    Args:
        origin: The airport code flown from, e.g. BOS.
        destination: The airport code flown to, e.g. ORD.
        date: The day of departure, YYYY-MM-DD (UTC), e.g. 2026-03-10.
    """
    flights = ctx.state.find(
        "flights",
        where=lambda f: (
            f["origin"] == origin.upper()
            and f["destination"] == destination.upper()
            and f["departs"].startswith(date)
        ),
    )
    flights.sort(key=lambda f: f["departs"])
    return {"flights": flights, "total": len(flights)}


@tool(kind="read", duration=4)
def read_messages(ctx: ToolContext, reservation_id: str) -> dict[str, Any]:
    """The message thread between the desk and the customer of a reservation, oldest first.

    Args:
        reservation_id: The reservation's id, e.g. RES-2001.
    """
    _reservation(ctx, reservation_id)
    thread = ctx.state.find("messages", reservation_id=reservation_id)
    thread.sort(key=lambda m: (m["at"], m["id"]))
    return {"messages": thread, "total": len(thread)}


@tool(kind="write", duration=60)
def send_message(ctx: ToolContext, reservation_id: str, body: str) -> dict[str, Any]:
    """Message the customer of a reservation. Customers answer about 20 minutes later.

    Args:
        reservation_id: The reservation the message is about, e.g. RES-2001.
        body: The text the customer reads.
    """
    _reservation(ctx, reservation_id)
    if not body.strip():
        raise ToolError("the message is empty")
    message = {
        "id": _next_id(ctx, "messages", "MSG-"),
        "reservation_id": reservation_id,
        "sender": "agent",
        "body": body.strip(),
        "at": _stamp(ctx.now),
    }
    return ctx.state.insert("messages", message)


@tool(kind="read", duration=WAIT)
def wait(ctx: ToolContext) -> dict[str, Any]:
    """Do nothing for 15 minutes of virtual time, e.g. while a customer answers."""
    return {"waited_minutes": 15, "now": _stamp(ctx.now + WAIT)}


@tool(kind="write", duration=30)
def change_flight(
    ctx: ToolContext, reservation_id: str, new_flight_id: str, amount_charged: float
) -> dict[str, Any]:
    """Move a reservation to another flight on the same route, charging the customer's card.

    Args:
        reservation_id: The reservation to change, e.g. RES-2001.
        new_flight_id: The flight to move it to, e.g. F-314; same origin and destination.
        amount_charged: What the card is charged for the change in dollars (fees and fare
            difference together); 0 charges nothing.
    """
    reservation = _reservation(ctx, reservation_id)
    if reservation["status"] != "confirmed":
        raise ToolError(f"reservation {reservation_id} is {reservation['status']}")
    old, new = _flight(ctx, reservation["flight_id"]), _flight(ctx, new_flight_id)
    if new["id"] == old["id"]:
        raise ToolError(f"reservation {reservation_id} is already on {new_flight_id}")
    if (new["origin"], new["destination"]) != (old["origin"], old["destination"]):
        raise ToolError(
            f"{new_flight_id} flies {new['origin']}-{new['destination']}, not the "
            f"reservation's route {old['origin']}-{old['destination']}"
        )
    if new["status"] != "scheduled" or new["seats_left"] < 1:
        raise ToolError(f"{new_flight_id} has no seat to sell ({new['status']})")
    amount = round(amount_charged, 2)
    if amount < 0:
        raise ToolError("amount_charged cannot be negative")
    ctx.state.update("flights", old["id"], {"seats_left": old["seats_left"] + 1})
    ctx.state.update("flights", new["id"], {"seats_left": new["seats_left"] - 1})
    changed = ctx.state.update(
        "reservations",
        reservation_id,
        {
            "flight_id": new_flight_id,
            "changes": reservation["changes"] + 1,
            "consent_on_file": _consent_on_file(ctx, reservation_id),
        },
    )
    payment = _pay(ctx, reservation_id, "change", amount, "card") if amount else None
    return {"reservation": changed, "payment": payment}


@tool(kind="write", duration=30)
def cancel_reservation(
    ctx: ToolContext, reservation_id: str, refund_amount: float, refund_method: RefundMethod
) -> dict[str, Any]:
    """Cancel a reservation and give money back: to the card, as travel credit, or none.

    Args:
        reservation_id: The reservation to cancel, e.g. RES-2002.
        refund_amount: How much to give back in dollars; at most what was paid on it.
        refund_method: card (money back), travel_credit (for a later booking) or none.
    """
    reservation = _reservation(ctx, reservation_id)
    if reservation["status"] != "confirmed":
        raise ToolError(f"reservation {reservation_id} is already {reservation['status']}")
    amount = round(refund_amount, 2)
    paid = reservation["paid"] + sum(
        p["amount"]
        for p in ctx.state.find("payments", reservation_id=reservation_id, kind="change")
    )
    if amount < 0 or amount > paid + 1e-9:
        raise ToolError(f"the refund must be between $0 and the ${paid:.2f} paid")
    if (refund_method == "none") != (amount == 0):
        raise ToolError("refund_method 'none' goes with refund_amount 0, and only with it")
    flight = _flight(ctx, reservation["flight_id"])
    ctx.state.update("flights", flight["id"], {"seats_left": flight["seats_left"] + 1})
    cancelled = ctx.state.update(
        "reservations",
        reservation_id,
        {"status": "cancelled", "consent_on_file": _consent_on_file(ctx, reservation_id)},
    )
    payment = _pay(ctx, reservation_id, "refund", amount, refund_method) if amount else None
    return {"reservation": cancelled, "refund": payment}


# -- internal: hidden from every role by env.yaml's access rules; the trigger calls it ------


@tool(kind="write", duration=0)
def customer_reply(ctx: ToolContext, reservation_id: str, in_reply_to: str) -> dict[str, Any]:
    """The simulated customer answers a message of the desk (called by a trigger).

    Args:
        reservation_id: The reservation whose thread the answer goes on.
        in_reply_to: The id of the desk's message being answered.
    """
    asked = ctx.state.get("messages", in_reply_to)
    passenger = ctx.state.get("passengers", _reservation(ctx, reservation_id)["passenger_id"])
    first = passenger["name"].split()[0] if passenger else "the customer"
    consent = False
    if asked is not None and REFUSAL.search(asked["body"]) and not AMOUNT.search(asked["body"]):
        body = f"I see. That's a pity, but thanks for telling me. {first}"
    elif asked is not None and AMOUNT.search(asked["body"]):
        body, consent = f"Yes, please go ahead. Thank you! {first}", True
    else:
        body = (
            f"Before I agree: what exactly will this cost me, or give me back, in dollars? {first}"
        )
    message = {
        "id": _next_id(ctx, "messages", "MSG-"),
        "reservation_id": reservation_id,
        "sender": "customer",
        "body": body,
        "at": _stamp(ctx.now),
        "in_reply_to": in_reply_to,
        "consent": consent,
    }
    return ctx.state.insert("messages", message)
