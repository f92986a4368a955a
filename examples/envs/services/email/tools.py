"""Tools of the email service: Alex Rivera's mailbox.

The mailbox owner is fixed (`OWNER`); whoever calls, mail goes out from Alex's address.
Sending never delivers anything anywhere else: it files the message in `sent`. Composed
environments watch `send_email` with triggers (see examples/envs/personal).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from agentenv import ToolContext, ToolError, tool

OWNER = "alex.rivera@northwind.example"
MAX_RECIPIENTS = 20
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")

Folder = Literal["inbox", "sent", "archive", "trash"]


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _next_id(ctx: ToolContext) -> str:
    numbers = [int(k[2:]) for k in ctx.state.keys("messages") if k[2:].isdigit()]
    return f"M-{max(numbers, default=0) + 1:04d}"


def _message(ctx: ToolContext, message_id: str) -> dict[str, Any]:
    found = ctx.state.get("messages", message_id)
    if found is None:
        raise ToolError(f"no message {message_id!r} (ids look like M-0001)")
    return found


def _addresses(values: list[str], field: str) -> list[str]:
    out = []
    for value in values:
        address = value.strip()
        if not _ADDRESS.match(address):
            raise ToolError(f"{field}: {value!r} is not an email address")
        if address.lower() not in (a.lower() for a in out):
            out.append(address)
    return out


def _summary(message: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "folder", "from_addr", "to", "subject", "date", "read")
    return {k: message[k] for k in keys}


@tool(kind="read", duration=3)
def list_messages(
    ctx: ToolContext, folder: Folder = "inbox", unread_only: bool = False, limit: int = 20
) -> dict[str, Any]:
    """List the messages of a folder, newest first (id, sender, recipients, subject, date, read).

    Args:
        folder: inbox, sent, archive or trash.
        unread_only: Only messages not read yet.
        limit: At most this many messages (1-100).
    """
    if not 1 <= limit <= 100:
        raise ToolError(f"limit must be between 1 and 100 (got {limit})")
    rows = ctx.state.find("messages", folder=folder)
    if unread_only:
        rows = [m for m in rows if not m["read"]]
    rows.sort(key=lambda m: (m["date"], m["id"]), reverse=True)
    return {
        "folder": folder,
        "messages": [_summary(m) for m in rows[:limit]],
        "total": len(rows),
        "unread": sum(1 for m in rows if not m["read"]),
    }


@tool(kind="write", duration=5)
def read_message(ctx: ToolContext, message_id: str) -> dict[str, Any]:
    """Open one message in full (body included) and mark it as read.

    Args:
        message_id: The message's id, e.g. M-0004.
    """
    message = _message(ctx, message_id)
    if not message["read"]:
        message = ctx.state.update("messages", message_id, {"read": True})
    return message


@tool(kind="write", duration=30)
def send_email(
    ctx: ToolContext,
    to: list[str],
    subject: str,
    body: str,
    cc: list[str] | None = None,
    in_reply_to: str | None = None,
) -> dict[str, Any]:
    """Send an email from Alex's address; it is filed in the `sent` folder.

    A subject of the form "Invite: <title> @ YYYY-MM-DD HH:MM [for N min]" is a meeting
    invitation (environments that compose a calendar turn it into an event).

    Args:
        to: Recipient addresses, at least one.
        subject: The subject line (not blank).
        body: The text of the email (not blank).
        cc: Addresses to copy.
        in_reply_to: The id of the message this answers, e.g. M-0004.
    """
    recipients = _addresses(to, "to")
    copied = _addresses(cc or [], "cc")
    if not recipients:
        raise ToolError("an email needs at least one recipient in 'to'")
    if len(recipients) + len(copied) > MAX_RECIPIENTS:
        raise ToolError(f"at most {MAX_RECIPIENTS} recipients per email")
    if not subject.strip():
        raise ToolError("the subject is blank")
    if not body.strip():
        raise ToolError("the body is blank")
    if in_reply_to is not None:
        _message(ctx, in_reply_to)
    message = {
        "id": _next_id(ctx),
        "folder": "sent",
        "from_addr": OWNER,
        "to": recipients,
        "cc": copied,
        "subject": subject.strip(),
        "body": body,
        "date": _stamp(ctx.now),
        "read": True,
        "in_reply_to": in_reply_to,
    }
    return ctx.state.insert("messages", message)


@tool(kind="write", duration=2)
def move_message(ctx: ToolContext, message_id: str, folder: Folder) -> dict[str, Any]:
    """File a message in another folder: archive it, trash it, or bring it back to the inbox.

    Args:
        message_id: The message's id, e.g. M-0006.
        folder: inbox, archive or trash (sent mail stays in sent unless trashed).
    """
    message = _message(ctx, message_id)
    if message["folder"] == folder:
        raise ToolError(f"message {message_id} is already in {folder}")
    if folder == "sent" or (message["folder"] == "sent" and folder != "trash"):
        raise ToolError("only mail Alex sent lives in 'sent'; sent mail can only be trashed")
    return _summary(ctx.state.update("messages", message_id, {"folder": folder}))
