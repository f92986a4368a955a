"""Tools of the travel service: flights, hotels and Alex's bookings (times in UTC).

Booking takes a seat or a room, and cancelling gives it back, in the same call as the
booking record. A flight booking carries `start`, `end` and `duration_minutes`, so a
composed calendar can block the time (see examples/envs/personal).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

from agentenv import ToolContext, ToolError, tool

TRAVELER = "Alex Rivera"
CANCEL_CUTOFF = timedelta(hours=24)
MAX_NIGHTS = 14


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _day(text: str, field: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(f"{field}: {text!r} is not a date; use YYYY-MM-DD") from None


def _airport(code: str, field: str) -> str:
    clean = code.strip().upper()
    if len(clean) != 3 or not clean.isalpha():
        raise ToolError(f"{field}: {code!r} is not an airport code like BOS or DEN")
    return clean


def _next_id(ctx: ToolContext) -> str:
    numbers = [int(k[3:]) for k in ctx.state.keys("bookings") if k[3:].isdigit()]
    return f"BK-{max(numbers, default=0) + 1:04d}"


@tool(kind="read", duration=5)
def search_flights(
    ctx: ToolContext,
    origin: str,
    destination: str,
    date: str | None = None,
    max_price: float | None = None,
) -> dict[str, Any]:
    """Find flights between two airports, earliest first (sold-out flights show seats_left 0).

    Args:
        origin: Airport code, e.g. BOS.
        destination: Airport code, e.g. DEN.
        date: Only flights departing on this day (UTC), YYYY-MM-DD.
        max_price: Only fares at or under this price (USD, one way).
    """
    src, dst = _airport(origin, "origin"), _airport(destination, "destination")
    if src == dst:
        raise ToolError("origin and destination are the same airport")
    day = _day(date, "date").isoformat() if date else None
    rows = [
        f
        for f in ctx.state.find("flights", origin=src, destination=dst)
        if (day is None or f["depart"][:10] == day)
        and (max_price is None or f["price"] <= max_price)
    ]
    rows.sort(key=lambda f: (f["depart"], f["id"]))
    return {"flights": rows, "total": len(rows)}


@tool(kind="write", duration=20)
def book_flight(ctx: ToolContext, flight_id: str, traveler: str = TRAVELER) -> dict[str, Any]:
    """Book a seat on a flight.

    Args:
        flight_id: The flight, e.g. F-102 (from search_flights).
        traveler: The passenger's full name.
    """
    flight = ctx.state.get("flights", flight_id)
    if flight is None:
        raise ToolError(f"no flight {flight_id!r}; search_flights shows what flies")
    depart, arrive = _time(flight["depart"]), _time(flight["arrive"])
    if depart <= ctx.now:
        raise ToolError(f"flight {flight['flight']} departed at {flight['depart']}")
    if flight["seats_left"] == 0:
        raise ToolError(f"flight {flight['flight']} ({flight_id}) is sold out")
    if not traveler.strip():
        raise ToolError("a booking needs the traveler's name")
    same = ctx.state.find(
        "bookings", item_id=flight_id, status="confirmed", traveler=traveler.strip()
    )
    if same:
        raise ToolError(f"{traveler} already has a seat on {flight['flight']} ({same[0]['id']})")
    ctx.state.update("flights", flight_id, {"seats_left": flight["seats_left"] - 1})
    booking = {
        "id": _next_id(ctx),
        "kind": "flight",
        "item_id": flight_id,
        "title": f"Flight {flight['flight']} {flight['origin']}-{flight['destination']}",
        "traveler": traveler.strip(),
        "price": flight["price"],
        "status": "confirmed",
        "booked_at": _stamp(ctx.now),
        "origin": flight["origin"],
        "destination": flight["destination"],
        "start": flight["depart"],
        "end": flight["arrive"],
        "duration_minutes": int((arrive - depart).total_seconds() // 60),
    }
    return ctx.state.insert("bookings", booking)


@tool(kind="read", duration=5)
def search_hotels(
    ctx: ToolContext, city: str, max_price_per_night: float | None = None
) -> dict[str, Any]:
    """Find hotels in a city, cheapest first (full hotels show rooms_left 0).

    Args:
        city: The city, e.g. Denver.
        max_price_per_night: Only hotels at or under this nightly rate (USD).
    """
    wanted = city.strip().lower()
    rows = [
        h
        for h in ctx.state.list("hotels")
        if h["city"].lower() == wanted
        and (max_price_per_night is None or h["price_per_night"] <= max_price_per_night)
    ]
    if not rows and not any(h["city"].lower() == wanted for h in ctx.state.list("hotels")):
        cities = ", ".join(sorted({h["city"] for h in ctx.state.list("hotels")}))
        raise ToolError(f"no hotels in {city!r} (cities: {cities})")
    rows.sort(key=lambda h: (h["price_per_night"], h["id"]))
    return {"hotels": rows, "total": len(rows)}


@tool(kind="write", duration=20)
def book_hotel(
    ctx: ToolContext, hotel_id: str, check_in: str, nights: int = 1, traveler: str = TRAVELER
) -> dict[str, Any]:
    """Book a hotel room.

    Args:
        hotel_id: The hotel, e.g. H-02 (from search_hotels).
        check_in: The arrival day, YYYY-MM-DD.
        nights: How many nights (1-14).
        traveler: The guest's full name.
    """
    hotel = ctx.state.get("hotels", hotel_id)
    if hotel is None:
        raise ToolError(f"no hotel {hotel_id!r}; search_hotels shows what there is")
    arrival = _day(check_in, "check_in")
    if arrival < ctx.now.date():
        raise ToolError(f"check_in {arrival} is in the past")
    if not 1 <= nights <= MAX_NIGHTS:
        raise ToolError(f"nights must be between 1 and {MAX_NIGHTS} (got {nights})")
    if hotel["rooms_left"] == 0:
        raise ToolError(f"{hotel['name']} ({hotel_id}) has no rooms left")
    ctx.state.update("hotels", hotel_id, {"rooms_left": hotel["rooms_left"] - 1})
    booking = {
        "id": _next_id(ctx),
        "kind": "hotel",
        "item_id": hotel_id,
        "title": f"{hotel['name']}, {hotel['city']}",
        "traveler": traveler.strip() or TRAVELER,
        "price": round(hotel["price_per_night"] * nights, 2),
        "status": "confirmed",
        "booked_at": _stamp(ctx.now),
        "check_in": arrival.isoformat(),
        "check_out": (arrival + timedelta(days=nights)).isoformat(),
        "nights": nights,
    }
    return ctx.state.insert("bookings", booking)


@tool(kind="write", duration=10)
def cancel_booking(ctx: ToolContext, booking_id: str) -> dict[str, Any]:
    """Cancel a booking; the seat or room is released. Flights cannot be cancelled within
    24 hours of departure.

    Args:
        booking_id: The booking, e.g. BK-0002.
    """
    booking = ctx.state.get("bookings", booking_id)
    if booking is None:
        raise ToolError(f"no booking {booking_id!r}; list_bookings shows them")
    if booking["status"] == "cancelled":
        raise ToolError(f"booking {booking_id} is already cancelled")
    if booking["kind"] == "flight":
        if _time(booking["start"]) - ctx.now < CANCEL_CUTOFF:
            raise ToolError(f"{booking['title']} departs within 24 hours; it cannot be cancelled")
        flight = ctx.state.get("flights", booking["item_id"])
        if flight is not None:
            ctx.state.update("flights", flight["id"], {"seats_left": flight["seats_left"] + 1})
    else:
        hotel = ctx.state.get("hotels", booking["item_id"])
        if hotel is not None:
            ctx.state.update("hotels", hotel["id"], {"rooms_left": hotel["rooms_left"] + 1})
    return ctx.state.update("bookings", booking_id, {"status": "cancelled"})
