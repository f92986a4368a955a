"""The thread pool that runs `blocking=True` tools, shared by every gateway of the process.

A blocking call that times out cannot be stopped: its thread runs on. Such threads are
counted until they end, so that once every thread is stuck a new blocking call is refused
with a clear tool error instead of queueing behind them and timing out too.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from agentenv.gateway.errors import ToolRaised

BLOCKING_THREADS = 32
"""Threads for `blocking=True` tools, shared by every gateway of the process."""

_POOL: ThreadPoolExecutor | None = None
_lock = threading.Lock()
_stuck = 0


def stuck_count() -> int:
    """How many pool threads still run calls that already timed out (any thread, any loop)."""
    return _stuck


class StuckWatch:
    """Runs one blocking call; once abandoned (timed out), it counts as stuck until it ends."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.finished = False
        self.abandoned = False

    def run(self) -> Any:
        """Run the call (in a pool thread). What the call raises that is not an Exception
        (KeyboardInterrupt, SystemExit, CancelledError...) comes back as ToolRaised: it is
        the tool's, not a signal to the thread or to the loop awaiting it."""
        global _stuck
        try:
            return self.fn()
        except Exception:
            raise
        except BaseException as exc:
            raise ToolRaised(exc) from None
        finally:
            with _lock:
                self.finished = True
                if self.abandoned:
                    _stuck -= 1

    def abandon(self) -> None:
        """The caller gave up waiting: count the thread as stuck until the call ends."""
        global _stuck
        with _lock:
            if not self.finished and not self.abandoned:
                self.abandoned = True
                _stuck += 1


def pool() -> ThreadPoolExecutor:
    """The process's pool for blocking tools, made on first use."""
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(BLOCKING_THREADS, thread_name_prefix="agentenv-tool")
    return _POOL
