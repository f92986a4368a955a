"""Tools of the calendar service: Alex Rivera's calendar (times in UTC).

Every confirmed event blocks its slot: `create_event` and `reschedule_event` refuse a time
that overlaps another confirmed event and name the clash, so an agent can pick another
slot (`find_free_slots`). `import_invite` turns an invitation subject line into an event;
composed environments call it from a trigger on sent mail.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from agentenv import ToolContext, ToolError, tool

OWNER = "alex.rivera@northwind.example"
MIN_MINUTES, MAX_MINUTES = 5, 12 * 60
_INVITE = re.compile(
    r"^Invite:\s*(?P<title>.+?)\s+@\s+(?P<day>\d{4}-\d{2}-\d{2})[ T](?P<time>\d{2}:\d{2})Z?"
    r"(?:\s+for\s+(?P<minutes>\d+)\s*min(?:utes)?)?\s*$"
)


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str, field: str) -> datetime:
    """An RFC 3339 time ('2026-03-03T15:00:00Z') or 'YYYY-MM-DD HH:MM' (UTC)."""
    try:
        moment = datetime.fromisoformat(text.strip().replace(" ", "T").replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(f"{field}: {text!r} is not a time; use e.g. 2026-03-03T15:00:00Z") from None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _parse_day(text: str, field: str) -> date:
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise ToolError(f"{field}: {text!r} is not a date; use YYYY-MM-DD") from None


def _next_id(ctx: ToolContext) -> str:
    numbers = [int(k[2:]) for k in ctx.state.keys("events") if k[2:].isdigit()]
    return f"E-{max(numbers, default=0) + 1:04d}"


def _event(ctx: ToolContext, event_id: str) -> dict[str, Any]:
    found = ctx.state.get("events", event_id)
    if found is None:
        raise ToolError(f"no event {event_id!r} (ids look like E-0001)")
    return found


def _span(event: dict[str, Any]) -> tuple[datetime, datetime]:
    return _parse_time(event["start"], "start"), _parse_time(event["end"], "end")


def _check_slot(
    ctx: ToolContext, start: datetime, end: datetime, ignore: str | None = None
) -> None:
    """Refuse a slot that overlaps a confirmed event (back-to-back is fine)."""
    for other in ctx.state.find("events", status="confirmed"):
        if other["id"] == ignore:
            continue
        other_start, other_end = _span(other)
        if start < other_end and other_start < end:
            raise ToolError(
                f"double booking: {_stamp(start)}-{_stamp(end)} overlaps {other['id']} "
                f"{other['title']!r} ({other['start']} to {other['end']}); "
                "use find_free_slots to pick another time"
            )


def _checked_minutes(minutes: int) -> timedelta:
    if not MIN_MINUTES <= minutes <= MAX_MINUTES:
        raise ToolError(
            f"duration_minutes must be between {MIN_MINUTES} and {MAX_MINUTES} (got {minutes})"
        )
    return timedelta(minutes=minutes)


def _new_event(
    ctx: ToolContext,
    title: str,
    start: datetime,
    minutes: int,
    attendees: list[str],
    location: str | None,
    source: str,
    notes: str | None = None,
) -> dict[str, Any]:
    if not title.strip():
        raise ToolError("an event needs a title")
    end = start + _checked_minutes(minutes)
    if end <= ctx.now:
        raise ToolError(f"{_stamp(start)} is in the past (it is now {_stamp(ctx.now)})")
    _check_slot(ctx, start, end)
    event = {
        "id": _next_id(ctx),
        "title": title.strip(),
        "start": _stamp(start),
        "end": _stamp(end),
        "location": location,
        "attendees": sorted({a.strip().lower() for a in attendees if a.strip()}),
        "organizer": OWNER,
        "status": "confirmed",
        "source": source,
        "notes": notes,
    }
    return ctx.state.insert("events", event)


@tool(kind="read", duration=3)
def list_events(
    ctx: ToolContext, day: str | None = None, days: int = 1, include_cancelled: bool = False
) -> dict[str, Any]:
    """List the events of one day (or several), in start order.

    Args:
        day: The first day, YYYY-MM-DD; today (virtual time) if unset.
        days: How many days from `day` (1-14).
        include_cancelled: Also list cancelled events.
    """
    if not 1 <= days <= 14:
        raise ToolError(f"days must be between 1 and 14 (got {days})")
    first = _parse_day(day, "day") if day else ctx.now.date()
    lo = datetime.combine(first, datetime.min.time(), UTC)
    hi = lo + timedelta(days=days)
    rows = []
    for event in ctx.state.list("events"):
        if event["status"] == "cancelled" and not include_cancelled:
            continue
        start, end = _span(event)
        if start < hi and end > lo:
            rows.append(event)
    rows.sort(key=lambda e: (e["start"], e["id"]))
    return {"from": _stamp(lo), "to": _stamp(hi), "events": rows, "total": len(rows)}


@tool(kind="read", duration=4)
def find_free_slots(
    ctx: ToolContext,
    day: str,
    duration_minutes: int = 30,
    day_start: str = "09:00",
    day_end: str = "18:00",
) -> dict[str, Any]:
    """Find the free gaps of at least `duration_minutes` in one day's working hours.

    Args:
        day: The day, YYYY-MM-DD.
        duration_minutes: The length the slot must have (5-720).
        day_start: Earliest start, HH:MM (UTC).
        day_end: Latest end, HH:MM (UTC).
    """
    need = _checked_minutes(duration_minutes)
    the_day = _parse_day(day, "day")
    lo = _parse_time(f"{the_day.isoformat()}T{day_start}", "day_start")
    hi = _parse_time(f"{the_day.isoformat()}T{day_end}", "day_end")
    if hi <= lo:
        raise ToolError("day_end must be after day_start")
    busy = sorted(
        _span(e) for e in ctx.state.find("events", status="confirmed") if _span(e)[0] < hi
    )
    slots, cursor = [], max(lo, ctx.now) if the_day == ctx.now.date() else lo
    for start, end in busy:
        if end <= cursor:
            continue
        if start - cursor >= need:
            slots.append({"start": _stamp(cursor), "end": _stamp(start)})
        cursor = max(cursor, end)
    if hi - cursor >= need:
        slots.append({"start": _stamp(cursor), "end": _stamp(hi)})
    return {"day": the_day.isoformat(), "duration_minutes": duration_minutes, "free": slots}


@tool(kind="write", duration=10)
def create_event(
    ctx: ToolContext,
    title: str,
    start: str,
    duration_minutes: int = 30,
    attendees: list[str] | None = None,
    location: str | None = None,
    notes: str | None = None,
) -> dict[str, Any]:
    """Put a new event on the calendar. Refused if it overlaps a confirmed event.

    Args:
        title: What the event is, e.g. "Coffee with Priya".
        start: When it starts, e.g. 2026-03-03T15:00:00Z (UTC).
        duration_minutes: How long it lasts, 5-720 minutes.
        attendees: Email addresses of the other people invited.
        location: Where it happens (a room, an address, a video link).
        notes: Anything else worth keeping with the event.
    """
    moment = _parse_time(start, "start")
    return _new_event(
        ctx, title, moment, duration_minutes, attendees or [], location, "manual", notes
    )


@tool(kind="write", duration=8)
def reschedule_event(
    ctx: ToolContext, event_id: str, start: str, duration_minutes: int | None = None
) -> dict[str, Any]:
    """Move an event to a new start time (and optionally change its length).

    Args:
        event_id: The event to move, e.g. E-0008.
        start: The new start, e.g. 2026-03-04T14:00:00Z (UTC).
        duration_minutes: The new length in minutes; the old length if unset.
    """
    event = _event(ctx, event_id)
    if event["status"] == "cancelled":
        raise ToolError(f"event {event_id} is cancelled; create a new one instead")
    old_start, old_end = _span(event)
    new_start = _parse_time(start, "start")
    length = (
        _checked_minutes(duration_minutes) if duration_minutes is not None else old_end - old_start
    )
    new_end = new_start + length
    if new_start < ctx.now:
        raise ToolError(f"{_stamp(new_start)} is in the past (it is now {_stamp(ctx.now)})")
    _check_slot(ctx, new_start, new_end, ignore=event_id)
    return ctx.state.update(
        "events", event_id, {"start": _stamp(new_start), "end": _stamp(new_end)}
    )


@tool(kind="write", duration=5)
def cancel_event(ctx: ToolContext, event_id: str, reason: str | None = None) -> dict[str, Any]:
    """Cancel an event; its slot becomes free. The event stays listed as cancelled.

    Args:
        event_id: The event to cancel, e.g. E-0010.
        reason: Why, kept in the event's notes.
    """
    event = _event(ctx, event_id)
    if event["status"] == "cancelled":
        raise ToolError(f"event {event_id} is already cancelled")
    notes = event.get("notes")
    if reason:
        notes = f"{notes}\n" if notes else ""
        notes += f"Cancelled: {reason}"
    return ctx.state.update("events", event_id, {"status": "cancelled", "notes": notes})


@tool(kind="write", duration=0)
def import_invite(
    ctx: ToolContext, subject: str, attendees: list[str], source: str = "invite"
) -> dict[str, Any]:
    """Create an event from an invitation subject, "Invite: <title> @ YYYY-MM-DD HH:MM [for N min]".

    Args:
        subject: The invitation's subject line; 30 minutes unless it says "for N min".
        attendees: The people invited.
        source: Where the invitation came from, e.g. "email:M-0010".
    """
    match = _INVITE.match(subject.strip())
    if match is None:
        raise ToolError(
            f"{subject!r} is not an invitation; expected 'Invite: <title> @ YYYY-MM-DD HH:MM'"
        )
    start = _parse_time(f"{match['day']}T{match['time']}", "subject")
    minutes = int(match["minutes"] or 30)
    return _new_event(ctx, match["title"], start, minutes, attendees, None, source)
