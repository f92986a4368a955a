"""Telling what a tool raised from the end of the call itself.

Whatever a tool's code raises is the tool's failure, a `tool_error`: exceptions, and what
is not an `Exception` too (KeyboardInterrupt, SystemExit, GeneratorExit, CancelledError).
Only the call's own end is let through: its task being cancelled (its caller gave up, or
the server is shutting down), or its coroutine being closed from outside the task it ran
in. Where a tool runs in a task or thread of its own, what it raises is carried out as
`ToolRaised`, since letting it go would stop the event loop (or look like a cancellation).
"""

from __future__ import annotations

import asyncio
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
