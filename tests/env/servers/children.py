"""The child-session tasks a test started on the children's loop, for tests that check
nothing they started outlives them.

Children another test left in a pool (an environment object keeps its idle children until
the interpreter exits) are not this test's: `mark()` (run before each test by conftest.py)
notes the tasks running then, and `child_tasks()` leaves them out.
"""

from __future__ import annotations

import asyncio

from agentenv.env.servers import loop

_before: set[int] = set()


async def _running() -> list[asyncio.Task[object]]:
    return [
        t for t in asyncio.all_tasks() if t.get_name().startswith("agentenv-child") and not t.done()
    ]


def mark() -> None:
    """Note the child tasks running now; `child_tasks()` ignores them."""
    _before.clear()
    _before.update(id(t) for t in loop.run(_running()))


def child_tasks() -> list[str]:
    """The names of child-session tasks still running that were not running at `mark()`."""
    return [t.get_name() for t in loop.run(_running()) if id(t) not in _before]
