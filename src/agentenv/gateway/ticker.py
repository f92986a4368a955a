"""The background ticker: fires the time triggers that come due with nobody calling, and
visits only the instances that have something due, so an idle gateway costs nothing per
live instance.

Only a clock that moves by itself (armed, `wall` mode, a rate above 0) brings a trigger due
with no call: a stepped or frozen clock moves only on calls and control operations, and
those fire what comes due on their own path (`Firer.fire_due`, before and after each call,
after `set-time`, `advance` and a registration). So the Firer keeps one schedule:

- a heap of `(real due time, generation, instance id, engine)`: the reading of the clocks'
  real-time source (`time.monotonic`) at which an instance's earliest queued firing or time
  mark (`TriggerEngine.next_mark`) comes due (`VirtualClock.real_at`, exact to one float
  step, so a visit is never a step early);
- `schedule(inst)` works that out again after anything that can move it: a registration or
  removal, every `fire_due` (so every call with triggers, clock set / advance / rate change,
  and every visit, which is a `fire_due`). An unchanged (mark, clock epoch) costs no push.
  A stepped or frozen clock gets an entry only when its mark has already passed, which
  happens when one clock jump brings more than `MAX_CATCH_UP` occurrences due: they are
  drained one tick at a time, as the sweep that visited every instance did;
- each push has a new generation, and the engine holds the generation of its live entry:
  an entry whose instance was dropped (the engine is only weakly held, and the id must
  still name the same instance), whose triggers were removed or whose due time changed is
  stale, skipped at a glance when it surfaces. When stale entries pile up (a run that
  re-schedules often with nobody ticking), the heap is compacted, at amortised O(1) a push;
- `tick` pops what is due by now and visits those instances: under the instance's lock,
  `fire_due`, which schedules the next visit. An instance busy with a call or a control op
  is passed over and tried again a `period` later (its call fires what is due anyway).
  While an `nl` action waits for its executor with the lock released, the instance is
  scheduled too, so what comes due meanwhile fires then;
- `run_ticker` sleeps until the earliest due time, but no sooner than `period` after the
  last visit (many instances coming due close together are visited in one tick, and a
  clock at 86400x with an every-minute trigger is not visited 1440 times a second): a
  firing is at most `period` late, as with the sweep. Pushing a due time earlier than the
  one it sleeps for wakes it. With nothing due it sleeps (an hour at a time) and visits
  nothing.

The firings and their virtual times are those of the old sweep (`sweep`, kept as the
reference the tests compare against): a firing is stamped with its mark, not with the
moment it ran, and whatever is due fires before a call on its instance anyway.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING

from agentenv.gateway.instance import SharedLock

if TYPE_CHECKING:
    from agentenv.gateway.instance import Instance
    from agentenv.gateway.triggers import TriggerEngine

_MAX_SLEEP = 3600.0  # with nothing due the ticker still wakes hourly (one look at the heap)
_MIN_COMPACT = 1024  # heap entries before stale ones are worth sweeping out

_Entry = tuple[float, int, str, "weakref.ref[TriggerEngine]"]


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _busy(inst: Instance) -> bool:
    lock = inst.lock
    return lock.locked() or (isinstance(lock, SharedLock) and lock.sharers > 0)


class Ticker:
    """The due-time schedule of a gateway's instances and the loop that fires it."""

    def __init__(
        self,
        visit: Callable[[Instance], Awaitable[None]],
        time_source: Callable[[], float] = time.monotonic,
    ) -> None:
        """`visit` fires what is due on an instance (the Firer's `fire_due`; it must end by
        calling `schedule`). `time_source` is the real-time source of the instances' clocks
        (a test may give both a fake one; `run_ticker` sleeps by it, so needs a real one)."""
        self._visit = visit
        self.time_source = time_source
        self.period = 0.25
        self._heap: list[_Entry] = []
        self._generations = itertools.count(1)
        self._compact_at = _MIN_COMPACT
        # A sleeping ticker: the time it sleeps until, the soonest it may tick, its loop.
        self._sleepers: dict[
            asyncio.Future[None], tuple[float, float, asyncio.AbstractEventLoop]
        ] = {}
        self.visits = 0
        """Instances visited by `tick` (and `sweep`) so far: what an idle gateway keeps at 0."""

    @property
    def entries(self) -> int:
        """Heap entries, stale ones included (for tests and benchmarks)."""
        return len(self._heap)

    # -- the schedule -----------------------------------------------------------------------

    def schedule(self, inst: Instance) -> None:
        """Work out when `inst` next has something due and keep one live entry for it."""
        self.settle(inst, inst.triggers.next_mark(), inst.clock.now())

    def settle(self, inst: Instance, mark: datetime | None, now: datetime | None) -> None:
        """`schedule`, given the instance's `next_mark` and its clock's `now()` (what
        `fire_due` has just read): an unchanged due time costs a comparison."""
        engine = inst.triggers
        if mark is None or now is None:  # nothing waits for the clock, or it is unarmed
            if engine.tick_gen:
                engine.tick_gen, engine.tick_key = 0, None
            return
        clock = inst.clock
        if clock.mode == "wall" and clock.rate > 0:  # armed: it moves by itself
            key = (mark, clock.epoch)
            if engine.tick_gen and engine.tick_key == key:
                return  # the live entry already says when
            real = clock.real_at(mark)
            if real is None:
                engine.tick_gen, engine.tick_key = 0, None
                return
            if clock.real_time is not self.time_source:  # another source: same pace, offset
                real += self.time_source() - clock.real_time()
            self._push(engine, inst.id, real, key)
        elif mark > now:  # only a call or a control op moves this clock: they fire it
            if engine.tick_gen:
                engine.tick_gen, engine.tick_key = 0, None
        elif not (engine.tick_gen and engine.tick_key is None):  # not yet waiting for a visit
            self._push(engine, inst.id, self.time_source(), None)

    def _push(
        self, engine: TriggerEngine, instance_id: str, at: float, key: tuple[datetime, int] | None
    ) -> None:
        generation = next(self._generations)
        engine.tick_gen, engine.tick_key = generation, key
        if len(self._heap) >= self._compact_at:
            self._compact()
        heapq.heappush(self._heap, (at, generation, instance_id, weakref.ref(engine)))
        if self._sleepers:
            self._wake_for(at)

    def _compact(self) -> None:
        live = []
        for entry in self._heap:
            engine = entry[3]()
            if engine is not None and engine.tick_gen == entry[1]:
                live.append(entry)
        heapq.heapify(live)
        self._heap[:] = live
        self._compact_at = max(_MIN_COMPACT, 2 * len(live))

    def _wake_for(self, at: float) -> None:
        """Wake each sleeping ticker that would tick later than it may for `at`."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for future, (until, soonest, loop) in list(self._sleepers.items()):
            if future.done() or max(at, soonest) >= until:
                continue
            if loop is running:
                future.set_result(None)
            else:  # pushed from another thread's loop (a test driving a served gateway)
                loop.call_soon_threadsafe(_resolve, future)

    # -- visiting ---------------------------------------------------------------------------

    async def tick(self, instances: Mapping[str, Instance]) -> int:
        """Visit each live instance whose due time has come (of `instances`, the gateway's
        live ones); returns how many were visited."""
        now = self.time_source()
        heap = self._heap
        batch: list[Instance] = []
        while heap and heap[0][0] <= now:
            _, generation, instance_id, ref = heapq.heappop(heap)
            engine = ref()
            if engine is None or engine.tick_gen != generation:
                continue  # stale: dropped, re-scheduled or nothing due any more
            engine.tick_gen, engine.tick_key = 0, None
            inst = instances.get(instance_id)
            if inst is not None and inst.triggers is engine:
                batch.append(inst)
        visited = done = 0
        try:
            for inst in batch:
                if instances.get(inst.id) is not inst or not inst.clock.armed:
                    pass  # dropped or disarmed while an earlier one fired
                elif _busy(inst):  # its call fires what is due; look again a period later
                    if not inst.triggers.tick_gen:
                        self._push(inst.triggers, inst.id, now + self.period, None)
                else:
                    async with inst.lock:
                        await self._visit(inst)
                    visited += 1
                done += 1
        finally:
            for inst in batch[done:]:  # cancelled, or a firing raised: the rest stay due
                if not inst.triggers.tick_gen and instances.get(inst.id) is inst:
                    self._push(inst.triggers, inst.id, now, None)
            self.visits += visited
        return visited

    async def sweep(self, instances: Mapping[str, Instance]) -> int:
        """The old tick: visit every armed instance that is not busy, due or not. Kept as
        the reference the ticker is tested against (and for benchmarks to compare with)."""
        visited = 0
        for inst in list(instances.values()):
            if inst.clock.armed and not _busy(inst):
                async with inst.lock:
                    await self._visit(inst)
                visited += 1
        self.visits += visited
        return visited

    async def run_ticker(self, instances: Mapping[str, Instance], period: float) -> None:
        """Fire due time triggers until cancelled, visiting only instances with something
        due, at most `period` seconds after it came due."""
        self.period = period
        loop = asyncio.get_running_loop()
        last = -math.inf  # when the last tick visited an instance
        while True:
            now = self.time_source()
            soonest = last + period
            at = max(self._heap[0][0], soonest) if self._heap else math.inf
            if at > now:
                await self._sleep(loop, at, soonest, min(at - now, _MAX_SLEEP))
                continue
            if await self.tick(instances):
                last = now
            await asyncio.sleep(0)  # a zero period never keeps the loop to itself

    async def _sleep(
        self, loop: asyncio.AbstractEventLoop, until: float, soonest: float, delay: float
    ) -> None:
        future: asyncio.Future[None] = loop.create_future()
        timer = loop.call_later(delay, _resolve, future)
        self._sleepers[future] = (until, soonest, loop)
        try:
            await future
        finally:
            timer.cancel()
            del self._sleepers[future]
