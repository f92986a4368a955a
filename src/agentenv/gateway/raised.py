"""Telling what a tool raised from the end of the call itself.

Whatever a tool's code raises is the tool's failure, a `tool_error`: exceptions, and what
is not an `Exception` too (KeyboardInterrupt, SystemExit, GeneratorExit, CancelledError).
Only the call's own end is let through: its task being cancelled (its caller gave up, or
the server is shutting down), or its coroutine being closed from outside the task it ran
in. Where a tool runs in a task or thread of its own, what it raises is carried out as
`ToolRaised`, since letting it go would stop the event loop (or look like a cancellation).

The agent reads only `crash`'s one line; `crash_trace` is the traceback the trajectory
record of the call keeps (its `detail`), for whoever debugs the tool.
"""

from __future__ import annotations

import asyncio
import traceback
from pathlib import Path
from typing import Any

from agentenv.gateway.errors import ToolRaised
from agentenv.gateway.results import safe_text


def current_task() -> asyncio.Task[Any] | None:
    """The running task, or None where there is none (or no running loop)."""
    try:
        return asyncio.current_task()
    except RuntimeError:  # no running loop: a coroutine closed by the garbage collector
        return None


def stopping(exc: BaseException, owner: asyncio.Task[Any] | None) -> bool:
    """Whether what reached the call is not the tool's but the call's own end: its task is
    being cancelled (its caller gave up, or the server is shutting down), or, for a call
    that awaited (`owner`: the task it ran in), its coroutine is being closed
    (GeneratorExit thrown in from outside that task)."""
    current = current_task()
    if current is not None and current.cancelling():
        return True
    return isinstance(exc, GeneratorExit) and owner is not None and current is not owner


def crash(exc: BaseException) -> str:
    """The message of a tool error for what a tool raised (any BaseException)."""
    name = type(exc).__name__
    if isinstance(exc, asyncio.CancelledError):
        return f"{name} (raised by the tool; the call was not cancelled)"
    return safe_text(f"{name}: {exc}") if str(exc) else name


TRACE_LIMIT = 4000
"""At most this many characters of a crashed tool's traceback are recorded: its head, and
as much of its tail (where the error was raised) as fits."""
_OURS = str(Path(__file__).resolve().parents[1])
"""Frames in files under this folder are agentenv's own (the gateway calling the tool)."""


def crash_trace(exc: BaseException, limit: int = TRACE_LIMIT) -> str:
    """The traceback of what a tool raised, for the call's record: the gateway's own
    frames above the tool's are left out, and a long one is cut in its middle to `limit`
    characters (a note says how much was cut)."""
    try:
        shown = traceback.TracebackException.from_exception(exc)
        frames = list(shown.stack)
        ours = 0
        while ours < len(frames) - 1 and frames[ours].filename.startswith(_OURS):
            ours += 1
        shown.stack = traceback.StackSummary.from_list(frames[ours:])
        text = "".join(shown.format()).rstrip("\n")
    except Exception as failed:  # a traceback that cannot be formatted must not fail the call
        text = f"(no traceback: formatting it raised {type(failed).__name__})"
    if len(text) > limit:
        head = limit // 5
        cut = len(text) - limit
        note = f"\n... ({cut} characters cut) ...\n"
        text = text[:head] + note + text[len(text) - (limit - head - len(note)) :]
    return safe_text(text)


async def contained(pending: Any) -> Any:
    """Await a tool in a task of its own (`wait_for`): what it raises that would stop the
    event loop (KeyboardInterrupt, SystemExit) or look like the task closing comes out as
    ToolRaised."""
    owner = current_task()
    try:
        return await pending
    except (KeyboardInterrupt, SystemExit) as exc:
        raise ToolRaised(exc) from None
    except GeneratorExit as exc:
        if current_task() is not owner:
            raise  # the task is being closed, not the tool failing
        raise ToolRaised(exc) from None
