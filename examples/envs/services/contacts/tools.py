"""Tools of the contacts service: Alex Rivera's address book.

`lookup_contact` answers with exactly one person or says why it cannot (nobody matches, or
several do, listing them), which is what an agent needs before it emails or pays someone.
`delete_contact` declares `roles=["user"]`: only Alex may delete a contact.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Any, Literal

from agentenv import ToolContext, ToolError, tool

Relationship = Literal["colleague", "family", "friend", "vendor", "service"]
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")


def _contact(ctx: ToolContext, contact_id: str) -> dict[str, Any]:
    found = ctx.state.get("contacts", contact_id)
    if found is None:
        raise ToolError(f"unknown contact {contact_id!r} (ids look like C-001)")
    return found


def _email(value: str) -> str:
    address = value.strip()
    if not _ADDRESS.match(address):
        raise ToolError(f"{value!r} is not an email address")
    return address


def _birthday(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value).isoformat()
    except ValueError:
        raise ToolError(f"birthday {value!r} is not a date; use YYYY-MM-DD") from None


def _taken(ctx: ToolContext, email: str, other_than: str | None = None) -> dict[str, Any] | None:
    wanted = email.lower()
    found = ctx.state.find(
        "contacts", where=lambda c: c["email"].lower() == wanted and c["id"] != other_than
    )
    return found[0] if found else None


@tool(kind="read", duration=2)
def lookup_contact(ctx: ToolContext, name_or_email: str) -> dict[str, Any]:
    """Find exactly one contact by email address, full name or part of a name.

    Args:
        name_or_email: An email address ("maya.chen@fastmail.example") or a name ("Maya").
    """
    needle = name_or_email.strip().lower()
    if not needle:
        raise ToolError("give a name or an email address")
    people = ctx.state.list("contacts")
    exact = [c for c in people if needle in (c["email"].lower(), c["name"].lower())]
    found = exact or [c for c in people if needle in c["name"].lower()]
    if not found:
        raise ToolError(f"unknown contact {name_or_email!r}; try search_contacts or add_contact")
    if len(found) > 1:
        names = "; ".join(f"{c['id']} {c['name']} <{c['email']}>" for c in found)
        raise ToolError(f"{name_or_email!r} matches {len(found)} contacts: {names}")
    return found[0]


@tool(kind="write", duration=5)
def add_contact(
    ctx: ToolContext,
    name: str,
    email: str,
    relationship: Relationship = "colleague",
    phone: str | None = None,
    company: str | None = None,
    birthday: str | None = None,
    notes: str | None = None,
) -> dict[str, Any]:
    """Add a person to the address book. Emails are unique.

    Args:
        name: Full name.
        email: Email address.
        relationship: colleague, family, friend, vendor or service.
        phone: Phone number.
        company: Where they work.
        birthday: YYYY-MM-DD.
        notes: Anything worth remembering about them.
    """
    if not name.strip():
        raise ToolError("a contact needs a name")
    address = _email(email)
    clash = _taken(ctx, address)
    if clash is not None:
        raise ToolError(f"{address} already belongs to {clash['id']} {clash['name']}")
    numbers = [int(k[2:]) for k in ctx.state.keys("contacts") if k[2:].isdigit()]
    record = {
        "id": f"C-{max(numbers, default=0) + 1:03d}",
        "name": name.strip(),
        "email": address,
        "phone": phone,
        "company": company,
        "relationship": relationship,
        "birthday": _birthday(birthday),
        "chat_handle": None,
        "notes": notes,
    }
    return ctx.state.insert("contacts", record)


@tool(kind="write", duration=4)
def update_contact(
    ctx: ToolContext,
    contact_id: str,
    email: str | None = None,
    phone: str | None = None,
    company: str | None = None,
    birthday: str | None = None,
    notes: str | None = None,
) -> dict[str, Any]:
    """Change some details of a contact; fields left out stay as they are.

    Args:
        contact_id: The contact, e.g. C-004.
        email: New email address (must not belong to someone else).
        phone: New phone number.
        company: New company.
        birthday: New birthday, YYYY-MM-DD.
        notes: New notes (replaces the old ones).
    """
    _contact(ctx, contact_id)
    changes: dict[str, Any] = {}
    if email is not None:
        address = _email(email)
        clash = _taken(ctx, address, other_than=contact_id)
        if clash is not None:
            raise ToolError(f"{address} already belongs to {clash['id']} {clash['name']}")
        changes["email"] = address
    if birthday is not None:
        changes["birthday"] = _birthday(birthday)
    for field, value in (("phone", phone), ("company", company), ("notes", notes)):
        if value is not None:
            changes[field] = value
    if not changes:
        raise ToolError("nothing to change: give at least one field")
    return ctx.state.update("contacts", contact_id, changes)


@tool(kind="write", duration=3, roles=["user"])
def delete_contact(ctx: ToolContext, contact_id: str) -> dict[str, Any]:
    """Delete a contact for good (Alex only).

    Args:
        contact_id: The contact, e.g. C-009.
    """
    removed = ctx.state.delete("contacts", _contact(ctx, contact_id)["id"])
    return {"deleted": removed["id"], "name": removed["name"]}
