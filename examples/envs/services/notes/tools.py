"""Tools of the notes service: notes plus a private, day-by-day journal.

The journal tools share the prefix `journal_`, so a composing environment hides the whole
journal from a role with a single access rule (`notes__journal_*`).
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from agentenv import ToolContext, ToolError, tool

Mood = Literal["great", "good", "okay", "low", "bad"]


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _tags(tags: list[str] | None) -> list[str]:
    out: list[str] = []
    for tag in tags or []:
        clean = tag.strip().lower().lstrip("#").replace(" ", "-")
        if not clean or not all(ch.isalnum() or ch == "-" for ch in clean):
            raise ToolError(f"tag {tag!r}: use letters, digits and dashes")
        if clean not in out:
            out.append(clean)
    return out


def _note(ctx: ToolContext, note_id: str) -> dict[str, Any]:
    found = ctx.state.get("notes", note_id)
    if found is None:
        raise ToolError(f"no note {note_id!r} (ids look like N-001)")
    return found


@tool(kind="read", duration=2)
def list_notes(
    ctx: ToolContext, tag: str | None = None, query: str | None = None
) -> dict[str, Any]:
    """List notes (id, title, tags, pinned, updated_at), pinned first then newest first.

    Args:
        tag: Only notes with this tag, e.g. work or personal.
        query: Only notes whose title or body contains this text (case-insensitive).
    """
    rows = ctx.state.list("notes")
    if tag:
        rows = [n for n in rows if tag.strip().lower().lstrip("#") in n["tags"]]
    if query:
        needle = query.lower()
        rows = [n for n in rows if needle in n["title"].lower() or needle in n["body"].lower()]
    rows.sort(key=lambda n: n["updated_at"], reverse=True)
    rows.sort(key=lambda n: not n["pinned"])
    keys = ("id", "title", "tags", "pinned", "updated_at")
    return {"notes": [{k: n[k] for k in keys} for n in rows], "total": len(rows)}


@tool(kind="write", duration=5)
def create_note(
    ctx: ToolContext,
    title: str,
    body: str,
    tags: list[str] | None = None,
    pinned: bool = False,
) -> dict[str, Any]:
    """Write a new note. Titles are unique (case-insensitive).

    Args:
        title: The note's title (1-200 characters).
        body: The text (Markdown is fine).
        tags: Tags such as work, personal, travel.
        pinned: Keep it at the top of the list.
    """
    title = title.strip()
    if not title:
        raise ToolError("a note needs a title")
    clash = ctx.state.find("notes", where=lambda n: n["title"].lower() == title.lower())
    if clash:
        raise ToolError(f"a note titled {title!r} exists already ({clash[0]['id']}); append to it")
    numbers = [int(k[2:]) for k in ctx.state.keys("notes") if k[2:].isdigit()]
    note = {
        "id": f"N-{max(numbers, default=0) + 1:03d}",
        "title": title,
        "body": body,
        "tags": _tags(tags),
        "pinned": pinned,
        "created_at": _stamp(ctx.now),
        "updated_at": _stamp(ctx.now),
    }
    return ctx.state.insert("notes", note)


@tool(kind="write", duration=4)
def append_to_note(ctx: ToolContext, note_id: str, text: str) -> dict[str, Any]:
    """Add text at the end of a note (on a new line).

    Args:
        note_id: The note, e.g. N-003.
        text: What to add.
    """
    note = _note(ctx, note_id)
    if not text.strip():
        raise ToolError("nothing to append")
    body = f"{note['body'].rstrip()}\n{text}" if note["body"].strip() else text
    return ctx.state.update("notes", note_id, {"body": body, "updated_at": _stamp(ctx.now)})


@tool(kind="read", duration=2)
def journal_read(ctx: ToolContext, day: str | None = None) -> dict[str, Any]:
    """Read the private journal page of one day.

    Args:
        day: YYYY-MM-DD; today (virtual time) if unset.
    """
    try:
        key = date.fromisoformat(day).isoformat() if day else ctx.now.date().isoformat()
    except ValueError:
        raise ToolError(f"day {day!r} is not a date; use YYYY-MM-DD") from None
    page = ctx.state.get("journal", key)
    if page is None:
        days = ", ".join(sorted(ctx.state.keys("journal"))[-5:]) or "none"
        raise ToolError(f"no journal page for {key} (latest pages: {days})")
    return page


@tool(kind="write", duration=4)
def journal_write(ctx: ToolContext, text: str, mood: Mood | None = None) -> dict[str, Any]:
    """Add an entry to today's private journal page (and set the day's mood).

    Args:
        text: The entry.
        mood: great, good, okay, low or bad.
    """
    if not text.strip():
        raise ToolError("the entry is empty")
    key = ctx.now.date().isoformat()
    page = ctx.state.get("journal", key) or {"date": key, "mood": None, "entries": []}
    page["entries"].append({"at": _stamp(ctx.now), "text": text.strip()})
    if mood is not None:
        page["mood"] = mood
    return ctx.state.put("journal", page)
