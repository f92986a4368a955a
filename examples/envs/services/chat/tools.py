"""Tools of the chat service.

Who is posting comes from the caller's role, not from an argument: role `user` is Alex
(`alex`), role `assistant` is Alex's assistant (`assistant`). A caller sees and posts only
in channels it is a member of: `dm-maya`, Alex's private conversation with Maya, is closed
to the assistant. Other people's messages arrive through `receive_message`, which only
triggers call.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agentenv import ToolContext, ToolError, tool

HANDLES = {"user": "alex", "assistant": "assistant"}
MAX_TEXT = 4000


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _me(ctx: ToolContext) -> str | None:
    """The caller's handle; None for the system principal (which may act anywhere)."""
    role = ctx.principal.role
    if role == "system":
        return None
    if role not in HANDLES:
        raise ToolError(f"role {role!r} has no chat account")
    return HANDLES[role]


def _channel(ctx: ToolContext, channel_id: str, me: str | None) -> dict[str, Any]:
    channel = ctx.state.get("channels", channel_id)
    if channel is None or (me is not None and me not in channel["members"]):
        known = ", ".join(c["id"] for c in _visible(ctx, me))
        raise ToolError(f"no channel {channel_id!r} that you are a member of (yours: {known})")
    return channel


def _visible(ctx: ToolContext, me: str | None) -> list[dict[str, Any]]:
    return [c for c in ctx.state.list("channels") if me is None or me in c["members"]]


def _post(ctx: ToolContext, channel: str, sender: str, text: str) -> dict[str, Any]:
    if not text.strip():
        raise ToolError("the message is empty")
    if len(text) > MAX_TEXT:
        raise ToolError(f"the message is {len(text)} characters long; the limit is {MAX_TEXT}")
    numbers = [int(k[3:]) for k in ctx.state.keys("messages") if k[3:].isdigit()]
    message = {
        "id": f"CM-{max(numbers, default=0) + 1:04d}",
        "channel": channel,
        "sender": sender,
        "text": text,
        "sent_at": _stamp(ctx.now),
    }
    return ctx.state.insert("messages", message)


@tool(kind="read", duration=2)
def list_channels(ctx: ToolContext) -> dict[str, Any]:
    """List the channels and direct messages you are a member of, with their last message time."""
    me = _me(ctx)
    out = []
    for channel in _visible(ctx, me):
        posts = ctx.state.find("messages", channel=channel["id"])
        last = max((m["sent_at"] for m in posts), default=None)
        out.append({**channel, "messages": len(posts), "last_message_at": last})
    return {"you": me, "channels": out}


@tool(kind="read", duration=3)
def read_channel(ctx: ToolContext, channel: str, limit: int = 20) -> dict[str, Any]:
    """Read the latest messages of a channel, oldest first.

    Args:
        channel: The channel's id, e.g. general or dm-jordan.
        limit: How many of the latest messages (1-200).
    """
    if not 1 <= limit <= 200:
        raise ToolError(f"limit must be between 1 and 200 (got {limit})")
    found = _channel(ctx, channel, _me(ctx))
    posts = sorted(
        ctx.state.find("messages", channel=channel), key=lambda m: (m["sent_at"], m["id"])
    )
    return {"channel": found, "messages": posts[-limit:], "total": len(posts)}


@tool(kind="write", duration=5)
def post_message(ctx: ToolContext, channel: str, text: str) -> dict[str, Any]:
    """Post a message in a channel you are a member of.

    Args:
        channel: The channel's id, e.g. general or alex-assistant.
        text: The message (1-4000 characters).
    """
    me = _me(ctx)
    _channel(ctx, channel, me)
    return _post(ctx, channel, me or "system", text)


@tool(kind="write", duration=5)
def direct_message(ctx: ToolContext, member: str, text: str) -> dict[str, Any]:
    """Send a direct message to one person (opens the conversation `dm-<member>` if needed).

    Args:
        member: The person's handle, e.g. jordan, priya or sam.
        text: The message (1-4000 characters).
    """
    me = _me(ctx) or "system"
    person = ctx.state.get("members", member)
    if person is None:
        handles = ", ".join(ctx.state.keys("members"))
        raise ToolError(f"no chat member {member!r} (members: {handles})")
    if member in ("alex", "assistant"):
        raise ToolError(f"{member!r} is on your side; use post_message in alex-assistant")
    channel_id = f"dm-{member}"
    channel = ctx.state.get("channels", channel_id)
    if channel is None:
        channel = ctx.state.insert(
            "channels",
            {"id": channel_id, "kind": "dm", "topic": "", "members": ["alex", "assistant", member]},
        )
    elif me not in channel["members"] and me != "system":
        raise ToolError(f"the conversation with {member} is private to Alex")
    return _post(ctx, channel_id, me, text)


@tool(kind="write", duration=0)
def receive_message(ctx: ToolContext, channel: str, sender: str, text: str) -> dict[str, Any]:
    """Deliver someone else's message into a channel (used by triggers).

    Args:
        channel: The channel's id.
        sender: The sender's handle; must be a member of the channel.
        text: The message.
    """
    found = _channel(ctx, channel, None)
    if sender not in found["members"]:
        raise ToolError(f"{sender!r} is not a member of {channel}")
    return _post(ctx, channel, sender, text)
