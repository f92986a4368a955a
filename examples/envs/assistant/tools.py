"""Tools of the assistant example environment: Sam Park's calendar and mailbox.

Contacts are simulated: a trigger answers every email 25 virtual minutes after it is sent
(`contact_reply`, hidden from every role). A contact reads the first time in the email
written as YYYY-MM-DD HH:MM and checks it against their own calendar (the `busy`
collection, which no tool of the assistant can read): free, they accept; busy, they
decline and suggest their next free time that day. Creating or moving an event logs which
attendees had accepted that very time by then (`accepted_by`), so a verifier can tell an
event booked after the yes from one booked before it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

from agentenv import ToolContext, ToolError, tool

OWNER = "sam.park@lumen.example"
WAIT = timedelta(minutes=15)
DAY_START, DAY_END = 9, 18  # working hours, UTC
PROPOSED = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}):(\d{2})")
LENGTH = re.compile(r"(?i)\bfor (\d{1,3}) ?min")


def _stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse(text: str, what: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(
            f"{what}: expected a time like 2026-03-05T15:00:00Z, got {text!r}"
        ) from None
    if moment.tzinfo is None:
        raise ToolError(f"{what}: give the time in UTC, e.g. 2026-03-05T15:00:00Z (got {text!r})")
    return moment


def _day(text: str) -> datetime:
    try:
        return datetime.fromisoformat(f"{text.strip()}T00:00:00+00:00")
    except ValueError:
        raise ToolError(f"day: expected YYYY-MM-DD, got {text!r}") from None


def _next_id(ctx: ToolContext, collection: str, prefix: str) -> str:
    numbers = [int(k[len(prefix) :]) for k in ctx.state.keys(collection) if k.startswith(prefix)]
    return f"{prefix}{max(numbers, default=0) + 1:04d}"


def _overlaps(spans: list[tuple[datetime, datetime]], start: datetime, end: datetime) -> bool:
    return any(s < end and start < e for s, e in spans)


def _own_spans(ctx: ToolContext, skip: str | None = None) -> list[tuple[datetime, datetime]]:
    return [
        (_parse(e["start"], "start"), _parse(e["end"], "end"))
        for e in ctx.state.find("events", status="confirmed")
        if e["id"] != skip
    ]


def _accepted_by(ctx: ToolContext, attendees: list[str], start: datetime) -> list[str]:
    """The attendees whose answer in the inbox accepts exactly this start."""
    wanted = _stamp(start)
    accepted = {
        m["from_addr"].lower()
        for m in ctx.state.find("inbox", answer="accepted")
        if m.get("accepted_start") == wanted
    }
    return [a for a in attendees if a.lower() in accepted]


@tool(kind="read", duration=4)
def list_events(ctx: ToolContext, day: str) -> dict[str, Any]:
    """Sam's calendar for one day (UTC), in time order; cancelled events are left out.

    Args:
        day: The day, YYYY-MM-DD, e.g. 2026-03-05.
    """
    _day(day)
    events = [e for e in ctx.state.find("events", status="confirmed") if e["start"].startswith(day)]
    events.sort(key=lambda e: e["start"])
    return {"events": events, "total": len(events)}


@tool(kind="read", duration=6)
def find_free_slots(ctx: ToolContext, day: str, duration_minutes: int = 30) -> dict[str, Any]:
    """Start times on Sam's calendar (every half hour, 09:00-18:00 UTC) with nothing booked
    for the whole duration.

    Args:
        day: The day, YYYY-MM-DD, e.g. 2026-03-05.
        duration_minutes: How long the meeting is, 15 to 240 minutes.
    """
    if not 15 <= duration_minutes <= 240:
        raise ToolError("duration_minutes must be between 15 and 240")
    first = _day(day) + timedelta(hours=DAY_START)
    length, spans, free = timedelta(minutes=duration_minutes), _own_spans(ctx), []
    start = first
    while start + length <= first + timedelta(hours=DAY_END - DAY_START):
        if not _overlaps(spans, start, start + length):
            free.append(_stamp(start))
        start += timedelta(minutes=30)
    return {"day": day, "duration_minutes": duration_minutes, "free_starts": free}


@tool(kind="write", duration=20)
def create_event(
    ctx: ToolContext, title: str, start: str, duration_minutes: int, attendees: list[str]
) -> dict[str, Any]:
    """Put an event on Sam's calendar. Attendees are not notified: email them.

    Args:
        title: What the event is, e.g. "Call with Priya".
        start: When it starts, in UTC, e.g. 2026-03-05T15:00:00Z.
        duration_minutes: How long it lasts, 5 to 480 minutes.
        attendees: The email addresses of the other people invited (may be empty).
    """
    if not title.strip():
        raise ToolError("an event needs a title")
    if not 5 <= duration_minutes <= 480:
        raise ToolError("duration_minutes must be between 5 and 480")
    begins = _parse(start, "start")
    event = {
        "id": _next_id(ctx, "events", "E-"),
        "title": title.strip(),
        "start": _stamp(begins),
        "end": _stamp(begins + timedelta(minutes=duration_minutes)),
        "attendees": [a.strip() for a in attendees],
        "status": "confirmed",
        "accepted_by": _accepted_by(ctx, attendees, begins),
    }
    return ctx.state.insert("events", event)


@tool(kind="write", duration=15)
def reschedule_event(ctx: ToolContext, event_id: str, start: str) -> dict[str, Any]:
    """Move an event to a new start time; it keeps its length and attendees.

    Args:
        event_id: The event's id, e.g. E-0004.
        start: The new start, in UTC, e.g. 2026-03-06T16:00:00Z.
    """
    event = ctx.state.get("events", event_id)
    if event is None or event["status"] != "confirmed":
        raise ToolError(f"no event {event_id!r} on the calendar")
    old_start, old_end = _parse(event["start"], "start"), _parse(event["end"], "end")
    begins = _parse(start, "start")
    changes = {
        "start": _stamp(begins),
        "end": _stamp(begins + (old_end - old_start)),
        "accepted_by": _accepted_by(ctx, event["attendees"], begins),
    }
    return ctx.state.update("events", event_id, changes)


@tool(kind="write", duration=10)
def cancel_event(ctx: ToolContext, event_id: str) -> dict[str, Any]:
    """Cancel an event (it stays in the records as cancelled).

    Args:
        event_id: The event's id, e.g. E-0004.
    """
    event = ctx.state.get("events", event_id)
    if event is None or event["status"] != "confirmed":
        raise ToolError(f"no event {event_id!r} on the calendar")
    return ctx.state.update("events", event_id, {"status": "cancelled"})


@tool(kind="read", duration=5)
def list_inbox(ctx: ToolContext, from_addr: str | None = None) -> dict[str, Any]:
    """Emails Sam received, newest first.

    Args:
        from_addr: Only emails from this address (case-insensitive).
    """
    emails = ctx.state.list("inbox")
    if from_addr:
        emails = [e for e in emails if e["from_addr"].lower() == from_addr.strip().lower()]
    emails.sort(key=lambda e: (e["received_at"], e["id"]), reverse=True)
    return {"emails": emails, "total": len(emails)}


@tool(kind="write", duration=45)
def send_email(
    ctx: ToolContext, to: list[str], subject: str, body: str, in_reply_to: str | None = None
) -> dict[str, Any]:
    """Send an email as Sam. Contacts answer about 25 minutes later; write a time you
    propose as YYYY-MM-DD HH:MM (UTC) so they can check their calendar.

    Args:
        to: The recipients' email addresses, e.g. ["priya.nair@orbit.example"].
        subject: The subject line.
        body: The text of the email.
        in_reply_to: The id of the received email this answers, e.g. IN-0002, if any.
    """
    if not to or any("@" not in a for a in to):
        raise ToolError(f"every recipient must be an email address (got {to!r})")
    if not subject.strip() or not body.strip():
        raise ToolError("an email needs a subject and a body")
    if in_reply_to is not None and ctx.state.get("inbox", in_reply_to) is None:
        raise ToolError(f"no received email {in_reply_to!r}")
    email = {
        "id": _next_id(ctx, "outbox", "OUT-"),
        "to": [a.strip() for a in to],
        "subject": subject.strip(),
        "body": body.strip(),
        "in_reply_to": in_reply_to,
        "sent_at": _stamp(ctx.now),
    }
    return ctx.state.insert("outbox", email)


@tool(kind="read", duration=WAIT)
def wait(ctx: ToolContext) -> dict[str, Any]:
    """Do nothing for 15 minutes of virtual time, e.g. while waiting for an answer."""
    return {"waited_minutes": 15, "now": _stamp(ctx.now + WAIT)}


# -- internal: hidden from every role by env.yaml's access rules; the trigger calls it ------


@tool(kind="write", duration=0)
def contact_reply(ctx: ToolContext, outbox_id: str) -> dict[str, Any]:
    """Every contact an email went to answers it (called by a trigger).

    Args:
        outbox_id: The id of the email being answered.
    """
    sent = ctx.state.get("outbox", outbox_id)
    if sent is None:
        raise ToolError(f"no sent email {outbox_id!r}")
    text = f"{sent['subject']}\n{sent['body']}"
    found = PROPOSED.search(text)
    length = LENGTH.search(text)
    minutes = int(length.group(1)) if length else 30
    answers = []
    for address in sent["to"]:
        contact = ctx.state.find("contacts", where=lambda c, a=address: c["email"] == a.lower())
        if not contact:
            continue  # nobody by that address: no answer
        first = contact[0]["name"].split()[0]
        answer: dict[str, Any] = {"answer": "none"}
        if found is None:
            body = f"Thanks, Sam! {first}"
        else:
            start = _parse(f"{found.group(1)}T{found.group(2)}:{found.group(3)}:00Z", "time")
            busy = [
                (_parse(b["start"], "start"), _parse(b["end"], "end"))
                for b in ctx.state.find("busy", email=address.lower())
            ]
            end = start + timedelta(minutes=minutes)
            if not _overlaps(busy, start, end):
                body = f"Yes, {start:%Y-%m-%d %H:%M} works for me. See you then! {first}"
                answer = {"answer": "accepted", "accepted_start": _stamp(start)}
            else:
                other = start
                last = start.replace(hour=DAY_END) - timedelta(minutes=minutes)
                while other <= last and _overlaps(busy, other, other + timedelta(minutes=minutes)):
                    other += timedelta(minutes=30)
                offer = f" Could we do {other:%Y-%m-%d %H:%M} instead?" if other <= last else ""
                body = f"Sorry, I'm busy at {start:%Y-%m-%d %H:%M}.{offer} {first}"
                answer = {"answer": "declined"}
        email = {
            "id": _next_id(ctx, "inbox", "IN-"),
            "from_addr": address,
            "subject": f"Re: {sent['subject']}",
            "body": body,
            "received_at": _stamp(ctx.now),
            "in_reply_to": outbox_id,
            **answer,
        }
        answers.append(ctx.state.insert("inbox", email))
    return {"answers": answers}
