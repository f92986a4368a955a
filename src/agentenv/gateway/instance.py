"""One isolated instance of an environment: its own state, clock, triggers, rules, record."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agentenv.env.environment import Environment
from agentenv.gateway.access import AccessControl
from agentenv.gateway.clock import VirtualClock
from agentenv.gateway.trajectory import Trajectory
from agentenv.gateway.triggers import TriggerEngine
from agentenv.spec.environment import GatewayMode
from agentenv.spec.wire import Part
from agentenv.state import Snapshot, State


class SharedLock:
    """A lock that tool calls may hold together and everything else holds alone.

    The instance lock of a gateway in `performance` mode. `async with lock` (and
    `acquire`/`release`/`locked`, as on `asyncio.Lock`) is exclusive: control operations
    and trigger firings take it, and it waits until the calls in flight are done.
    `async with lock.shared()` is what a tool call takes: any number at once, none while
    the lock is held exclusively. An exclusive waiter goes first: calls that arrive after
    it wait behind it, so a control operation is never starved by a stream of calls.
    """

    def __init__(self) -> None:
        self._held = False
        self._sharers = 0
        self._exclusive: deque[asyncio.Future[None]] = deque()  # waiting to hold it alone
        self._shared: list[asyncio.Future[None]] = []  # calls waiting behind them

    def locked(self) -> bool:
        """Whether the lock is held exclusively."""
        return self._held

    @property
    def sharers(self) -> int:
        """How many calls hold the lock together now."""
        return self._sharers

    async def acquire(self) -> bool:
        """Take the lock alone, once no call holds it."""
        if not self._held and not self._sharers and not self._exclusive:
            self._held = True
            return True
        ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._exclusive.append(ticket)
        try:
            await ticket
        except asyncio.CancelledError:
            if ticket.done() and not ticket.cancelled():
                self.release()  # granted just as we were cancelled: pass it on
            raise
        finally:
            with contextlib.suppress(ValueError):
                self._exclusive.remove(ticket)
        return True

    def release(self) -> None:
        """Give up the exclusive hold."""
        if not self._held:
            raise RuntimeError("SharedLock.release: the lock is not held")
        self._held = False
        self._wake()

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    @contextlib.asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        """Hold the lock together with other calls."""
        if self._held or self._exclusive:
            ticket: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._shared.append(ticket)
            try:
                await ticket
            except asyncio.CancelledError:
                if ticket.done() and not ticket.cancelled():
                    self._leave()
                else:
                    self._shared.remove(ticket)
                raise
        else:
            self._sharers += 1
        try:
            yield
        finally:
            self._leave()

    def _leave(self) -> None:
        self._sharers -= 1
        if not self._sharers:
            self._wake()

    def _wake(self) -> None:
        if self._held:
            return
        while self._exclusive:
            ticket = self._exclusive[0]
            if ticket.done():  # cancelled while waiting
                self._exclusive.popleft()
                continue
            if not self._sharers:
                self._held = True
                ticket.set_result(None)
            return  # calls keep waiting behind an exclusive waiter
        waiting, self._shared = self._shared, []
        for ticket in waiting:
            if not ticket.done():
                self._sharers += 1
                ticket.set_result(None)


@dataclass(slots=True, weakref_slot=True)
class Instance:
    """Everything that belongs to one episode's copy of an environment.

    In `consistent` mode calls on one instance are serialised by `lock` (an
    `asyncio.Lock`), so a transaction never interleaves with another call's writes; in
    `performance` mode `lock` is a `SharedLock` that calls hold together. Different
    instances always run concurrently.
    """

    id: str
    state: State
    clock: VirtualClock
    access: AccessControl
    triggers: TriggerEngine
    trajectory: Trajectory = field(default_factory=Trajectory)
    parts: list[Part] = field(default_factory=list)
    lock: asyncio.Lock | SharedLock = field(default_factory=asyncio.Lock)
    metadata: dict[str, Any] = field(default_factory=dict)
    resources: dict[str, Any] = field(default_factory=dict)
    """What tools keep per instance between calls (`ToolContext.resources`)."""

    def close_resources(self) -> None:
        """Close what tools kept for this instance (each that has a `close`), once."""
        held, self.resources = self.resources, {}
        for resource in held.values():
            close = getattr(resource, "close", None)
            if callable(close):
                close()

    @classmethod
    def create(
        cls,
        instance_id: str,
        env: Environment,
        snapshot: Snapshot | None = None,
        *,
        mode: GatewayMode = "consistent",
        hide: bool = True,
    ) -> Instance:
        """A fresh instance forked from the environment's seeded snapshot (triggers are
        registered by the gateway, which checks them against the tools)."""
        state = snapshot.fork() if snapshot is not None else env.new_state()
        state.keep_changelog()  # what GET /changes serves (seeding is not in it)
        return cls(
            id=instance_id,
            state=state,
            clock=VirtualClock.from_spec(env.clock),
            access=AccessControl(env.access, default_role=env.default_role, hide=hide),
            triggers=TriggerEngine(),
            lock=SharedLock() if mode == "performance" else asyncio.Lock(),
        )
