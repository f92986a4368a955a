"""The children's event loop: one background thread that owns every server session.

MCP sessions (anyio streams, subprocess pipes) belong to the loop that opened them. Our
callers run on many loops (uvicorn's, a rollout's, a test's, none at all while a document
loads), so every child lives on this one loop, in a daemon thread started on first use, and
callers reach it with `run` (from sync code) or `call` (from any other loop). The hop
between threads costs about 0.2 ms a call when idle and up to 0.7 ms against a busy stdio
child (measured by benchmarks/bench_process.py), so a program whose main work is calling
children runs its main coroutine *on* this loop with `run_main` (`agent-env serve` does),
and its calls need no hop at all. Children are closed when the interpreter exits
(`atexit`), so no server process outlives us.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_closers: list[Callable[[], Awaitable[None]]] = []


def children_loop() -> asyncio.AbstractEventLoop:
    """The loop children live on (started on first use)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            _thread = threading.Thread(target=serve, name="agentenv-children", daemon=True)
            _thread.start()
            ready.wait()
            _loop = loop
        return _loop


def on_children_loop() -> bool:
    """Whether the caller runs on the children's loop."""
    try:
        return asyncio.get_running_loop() is _loop
    except RuntimeError:
        return False


def submit(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Schedule a coroutine on the children's loop; a concurrent Future of its result."""
    return asyncio.run_coroutine_threadsafe(coro, children_loop())


def run(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """Run a coroutine on the children's loop and wait for it (from sync code, or from a
    loop that may block meanwhile). Never call it from the children's loop itself."""
    if on_children_loop():
        coro.close()
        raise RuntimeError("loop.run called on the children's loop: await the coroutine")
    return submit(coro).result(timeout)


async def call(coro: Coroutine[Any, Any, T]) -> T:
    """Await a coroutine that runs on the children's loop, from any loop; cancelling the
    caller cancels it there too."""
    if on_children_loop():
        return await coro
    return await asyncio.wrap_future(submit(coro))


def run_main(coro: Coroutine[Any, Any, T], *, on_interrupt: Callable[[], None] | None = None) -> T:
    """Run a program's main coroutine on the children's loop and wait for it, from the
    main thread (what `asyncio.run` is to an ordinary program). Ctrl-C calls
    `on_interrupt` (a graceful stop: a server's `should_exit`) and goes on waiting; without
    one, or at a second Ctrl-C, the coroutine is cancelled and KeyboardInterrupt raised
    once it has ended. Signal handlers belong to the main thread, so the coroutine must not
    install any."""
    finished = threading.Event()

    async def main() -> T:
        try:
            return await coro
        finally:
            finished.set()

    future = submit(main())
    while True:
        try:
            return future.result()
        except KeyboardInterrupt:
            if on_interrupt is not None:
                on_interrupt()
                on_interrupt = None
                continue
            future.cancel()
            finished.wait(30)
            raise


def at_exit(closer: Callable[[], Awaitable[None]]) -> None:
    """Run `closer` on the children's loop when the interpreter exits (stop processes)."""
    _closers.append(closer)


def _shutdown() -> None:
    if _loop is None or _loop.is_closed() or not _closers:
        return

    async def close_all() -> None:
        await asyncio.gather(*(c() for c in reversed(_closers)), return_exceptions=True)

    with contextlib.suppress(Exception):  # exiting: nothing left to report to
        asyncio.run_coroutine_threadsafe(close_all(), _loop).result(10)


atexit.register(_shutdown)
