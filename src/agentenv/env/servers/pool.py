"""`ChildPool`: which child serves which instance, and how children are started and stopped.

Design:

- `process`: every instance gets a child of its own, and a released child is stopped, never
  handed to another instance. A server's state is whatever its process holds (memory, files
  in its workspace, open handles); nothing outside can prove it clean again, so reuse would
  leak one episode into the next. Isolation is bought with a fresh process, and the warm pool
  makes it cheap: `size` children are started ahead, so `acquire` only takes one that is
  already initialised (milliseconds) and starts a replacement in the background. The one
  exception: a child that was sent nothing that could change it (no tool call, data
  request or clock sync: `Child.used`) is as clean as a fresh one, and goes back idle (an
  instance whose every call was refused by the gateway costs no process).
- `reset`: children are reused one instance after another; on release the child's data
  plane is emptied (`data/reset`) and seeded (`data/add` of `seed_parts`) before it goes back
  idle. A child without a data plane cannot be reset, so it is refused at its first start.
  A backend that does not start processes (a `url`) has one child, and instances wait their
  turn for it.
- `shared`: one child for every instance; release does nothing, close stops it.

Replenishing is bounded: the background top-up starts only the deficit (`size` minus the idle
children minus the starts already in flight that no acquire has claimed), an acquire that
finds no idle child claims such an in-flight start before starting one of its own, every start
(background or not) passes one semaphore (`parallel` at once), and a failed background start
is counted and not retried until the next acquire, so a server that cannot start does not spin.

Health: an idle child is checked before it is handed out (`alive`, then a ping where the child
has an MCP session); a dead one is discarded and counted under `failed`. `replace` stops an
instance's broken child and gives it a new one. Every start in flight is a task the pool
holds, so `close` cancels them (a start cancelled midway stops its process) and stops the
idle and in-use children too. Everything runs on the children's loop (`loop.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from pathlib import Path
from typing import Any

from agentenv.env.servers.base import Child, ServerBackend, ServerError
from agentenv.spec.server import Isolation

log = logging.getLogger(__name__)

PING_TIMEOUT = 5.0
"""Seconds an idle child may take to answer the ping that checks it before it is handed out."""

_ISOLATIONS: tuple[Isolation, ...] = ("process", "reset", "shared")


class ChildPool:
    """The children of one process environment, per isolation mode (see the module doc)."""

    def __init__(
        self,
        backend: ServerBackend,
        isolation: Isolation,
        size: int,
        log_dir: Path,
        seed_parts: list[dict[str, Any]] | None = None,
        parallel: int = 4,
    ) -> None:
        if isolation not in _ISOLATIONS:
            raise ServerError(f"isolation {isolation!r}: expected one of {', '.join(_ISOLATIONS)}")
        if isolation == "process" and not backend.starts_processes:
            raise ServerError(
                f"{backend.describe()}: isolation 'process' needs a server we start "
                "('command' or 'folder'); use 'shared', or 'reset' through its data plane"
            )
        if size < 0 or parallel < 1:
            raise ServerError(f"pool size {size} and parallel starts {parallel}: out of range")
        self.backend = backend
        self.isolation: Isolation = isolation
        self.size = size if isolation != "shared" else 0
        """Children kept started and idle (none under `shared`)."""
        self.log_dir = log_dir
        self.seed_parts = list(seed_parts or [])
        self._limit: int | None = None
        if isolation == "reset" and not backend.starts_processes:
            self._limit = 1
            self.size = min(self.size, 1)
        self._gate = asyncio.Semaphore(parallel)
        self._idle: deque[Child] = deque()
        self._owned: dict[str, Child] = {}
        self._unclaimed: deque[asyncio.Task[Child]] = deque()
        self._starting: set[asyncio.Task[Child]] = set()
        self._closing: set[asyncio.Task[None]] = set()
        self._shared: Child | None = None
        self._shared_lock = asyncio.Lock()
        self._freed = asyncio.Event()
        self._closed = False
        self._started = 0
        self._restarted = 0
        self._failed = 0
        self.last_error: str | None = None
        """The last background failure (a start or a reset), for diagnostics."""

    # -- the interface the runtime uses --------------------------------------------------

    async def acquire(self, instance_id: str) -> Child:
        """The instance's child: the one it holds if still healthy, else a new one (an idle
        child, a start in flight, or a start of its own). ServerError if a start fails."""
        self._check_open()
        held = self._owned.get(instance_id)
        if held is not None:
            if held.alive:
                return held
            return await self.replace(instance_id)
        if self.isolation == "shared":
            child = await self._shared_child()
        else:
            self._top_up()
            child = await self._take()
        if self._closed:
            self._discard(child)
            self._check_open()
        self._owned[instance_id] = child
        self._top_up()
        return child

    async def release(self, instance_id: str) -> None:
        """The instance is done: `process` stops its child, `reset` resets it and puts it
        back idle (or stops it if the reset fails), `shared` does nothing."""
        child = self._owned.pop(instance_id, None)
        if child is None or self.isolation == "shared":
            return
        unused = self.isolation == "process" and not (child.used or self._closed)
        if unused and child.alive and len(self._idle) < self.size:
            self._idle.append(child)
            self._freed.set()
            return
        if self.isolation == "process" or self._closed or not child.alive:
            await child.close()
        else:
            try:
                await self._reset(child)
            except ServerError as exc:
                self._failed += 1
                self.last_error = str(exc)
                log.warning("%s", exc)
                await child.close()
            else:
                if self._closed:
                    await child.close()
                else:
                    self._idle.append(child)
        self._freed.set()

    async def replace(self, instance_id: str) -> Child:
        """After a crash: stop the instance's child and give it a new one (under `shared`,
        the one child every instance uses is restarted)."""
        self._check_open()
        old = self._owned.pop(instance_id, None)
        if old is not None:
            self._restarted += 1
            if self.isolation == "shared":
                async with self._shared_lock:
                    if self._shared is old:
                        self._shared = None
                        await old.close()
            else:
                await old.close()
                self._freed.set()
        return await self.acquire(instance_id)

    def adopt(self, instance_id: str, child: Child) -> None:
        """Hand the pool a child started elsewhere (the one that listed the tools at load)
        to serve `instance_id`. ServerError under `reset` if it has no data plane (the
        caller still owns it then). Starts the warm-up when called on a running loop."""
        self._check_open()
        if self.isolation == "reset":
            self._need_data_plane(child)
        if self.isolation == "shared":
            if self._shared is not None and self._shared is not child:
                raise ServerError(f"{self.backend.describe()}: the shared child is already set")
            self._shared = child
        self._owned[instance_id] = child
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            self._top_up()

    async def warm(self) -> None:
        """Start children until `size` are idle and wait for them (what `acquire` does in the
        background); ServerError if a start fails."""
        self._check_open()
        self._top_up()
        pending = list(self._unclaimed)
        if pending:
            await asyncio.gather(*(asyncio.shield(t) for t in pending))

    async def close(self) -> None:
        """Stop everything: starts in flight (cancelled), idle children, in-use children."""
        self._closed = True
        starting = list(self._starting)
        for task in starting:
            task.cancel()
        children = {id(c): c for c in [*self._idle, *self._owned.values()]}
        if self._shared is not None:
            children[id(self._shared)] = self._shared
        self._idle.clear()
        self._owned.clear()
        self._unclaimed.clear()
        self._shared = None
        self._freed.set()
        await asyncio.gather(*starting, return_exceptions=True)
        await asyncio.gather(*(c.close() for c in children.values()), return_exceptions=True)
        await asyncio.gather(*list(self._closing), return_exceptions=True)

    def stats(self) -> dict[str, int]:
        """live (children started and not stopped), idle, in_use, starting, started (every
        successful start), restarted (replace calls), failed (failed starts, dead children
        found, failed resets)."""
        in_use = len({id(c) for c in self._owned.values()})
        idle = len(self._idle)
        return {
            "live": idle + in_use,
            "idle": idle,
            "in_use": in_use,
            "starting": len(self._starting),
            "started": self._started,
            "restarted": self._restarted,
            "failed": self._failed,
        }

    # -- inside ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ServerError(f"{self.backend.describe()}: the server pool is closed")

    async def _take(self) -> Child:
        """An idle healthy child, a claimed start in flight, or a start of our own."""
        while True:
            while self._idle:
                child = self._idle.popleft()
                if await self._healthy(child):
                    return child
                self._failed += 1
                self.last_error = f"{child.label}: found dead while idle; discarded"
                log.warning("%s", self.last_error)
                self._discard(child)
            if self._unclaimed:
                claimed = self._unclaimed.popleft()
                self._top_up()
                return await claimed
            if self._limit is None or self._live_or_starting() < self._limit:
                return await self._start_task()
            self._freed.clear()
            await self._freed.wait()
            self._check_open()

    def _live_or_starting(self) -> int:
        return len(self._idle) + len({id(c) for c in self._owned.values()}) + len(self._starting)

    async def _shared_child(self) -> Child:
        async with self._shared_lock:
            if self._shared is not None and self._shared.alive:
                return self._shared
            if self._shared is not None:
                self._failed += 1
                self._discard(self._shared)
                self._shared = None
            child = await self._start_task()
            if self._closed:
                self._discard(child)
                self._check_open()
            self._shared = child
            return child

    def _start_task(self) -> asyncio.Task[Child]:
        task = asyncio.get_running_loop().create_task(self._start(), name="agentenv-pool-start")
        self._starting.add(task)
        task.add_done_callback(self._landed)
        return task

    async def _start(self) -> Child:
        """One start, through the gate; a `reset` child must have a data plane."""
        async with self._gate:
            self._check_open()
            try:
                child = await self.backend.start(self.log_dir)
            except ServerError:
                self._failed += 1
                raise
            except (OSError, ValueError) as exc:
                self._failed += 1
                raise ServerError(f"{self.backend.describe()}: could not start: {exc}") from None
        self._started += 1
        try:
            if self.isolation == "reset":
                self._need_data_plane(child)
            self._check_open()
        except BaseException:
            await child.close()
            raise
        return child

    def _landed(self, task: asyncio.Task[Child]) -> None:
        """A start ended: a background one nobody claimed puts its child idle."""
        self._starting.discard(task)
        if task not in self._unclaimed:
            return
        self._unclaimed.remove(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is not None:
            self.last_error = str(exc)
            log.warning("a pooled server did not start: %s", exc)
            return
        child = task.result()
        if self._closed:
            self._discard(child)
        else:
            self._idle.append(child)
            self._freed.set()

    def _top_up(self) -> None:
        """Start, in the background, the children missing from the warm pool."""
        if self._closed or self.isolation == "shared":
            return
        deficit = self.size - len(self._idle) - len(self._unclaimed)
        if self._limit is not None:
            deficit = min(deficit, self._limit - self._live_or_starting())
        for _ in range(max(0, deficit)):
            task = self._start_task()
            self._unclaimed.append(task)

    async def _healthy(self, child: Child) -> bool:
        """`alive`, and (where the child has an MCP session) an answered ping: a process
        that died while idle may not yet show in `alive`."""
        if not child.alive:
            return False
        session = getattr(child, "session", None)
        ping = getattr(session, "send_ping", None)
        if ping is None:
            return True
        try:
            await asyncio.wait_for(ping(), PING_TIMEOUT)
        except asyncio.CancelledError:
            self._idle.appendleft(child)
            raise
        except Exception:  # any failure to answer is a dead child
            return False
        return child.alive

    def _need_data_plane(self, child: Child) -> None:
        if not child.has_data_plane:
            raise ServerError(
                f"{child.label}: isolation 'reset' needs a data plane (an AgentEnv server whose "
                "card names a data-plane url) to empty and seed between instances; this server "
                "has none: use isolation 'process' or 'shared'"
            )

    async def _reset(self, child: Child) -> None:
        """`data/reset`, then `data/add` of the seed (if any)."""
        try:
            await child.data("data/reset", {})
            if self.seed_parts:
                await child.data("data/add", {"parts": self.seed_parts})
        except ServerError as exc:
            where = f" (its log: {child.log_path})" if child.log_path else ""
            raise ServerError(
                f"{child.label}: reset between instances failed: {exc}{where}"
            ) from None

    def _discard(self, child: Child) -> None:
        """Stop a child in the background (close is awaited by `close()`)."""
        task = asyncio.get_running_loop().create_task(child.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)
