"""The process runner: a plan on every core of this machine, without Ray.

One worker process per core (`workers`, default `os.cpu_count()`), each holding the plan's
tasks and agents and its own cache of loaded environments, each running episodes exactly
as the local runner does (asyncio, `concurrency` at once, per-episode timeouts). The
parent shards the episodes among them, keeping each worker `concurrency` episodes ahead,
and alone writes the run folder's store: a worker sends each record back, as the JSON line
the store writes, the moment its episode finishes, over its own pipe. So resume,
`retry_errors`, crash safety and exports are those of the local runner, and so is Ctrl-C:
the workers are stopped, the records they had already sent are written, the episodes in
flight are not, and `--resume` runs them.

Workers are started with multiprocessing's `spawn` method (a fresh interpreter that
imports agentenv), not `fork`: the parent may have threads (a progress bar's refresher,
a server's, Ray's) whose locks a forked child would inherit held, and the loaded heap a
fork would share is touched by reference counting and the GC at once anyway. `forkserver`
is accepted too. The plan must therefore be picklable, as for Ray: agents and steps
defined at the top level of an importable module.

A worker that dies (killed, out of memory, a tool that exits the process) is replaced by a
fresh one. The records it sent before dying are kept; each episode it still held counts
one death and runs again, alone on a worker with nothing else in flight (an episode that
kills its worker takes no other episode with it twice), and after `worker_retries` more
deaths it is recorded as an error saying so, as the Ray runner does. A worker that cannot
start (the plan does not unpickle there, an import fails) stops the rollout with
`WorkerStartError` naming why: every fresh worker would fail the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import multiprocessing
import os
import pickle
import signal
import threading
import time
import traceback
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

from agentenv.rollout.episode import (
    WORKER,
    EnvironmentCache,
    error_record,
    run_episode_line,
)
from agentenv.rollout.gctune import THRESHOLD, freeze_loaded
from agentenv.rollout.local import BaseRunner, RolloutSummary
from agentenv.rollout.plan import PlannedEpisode, RolloutPlan
from agentenv.rollout.store import RolloutStore

DEFAULT_PROCESS_CONCURRENCY = 64
"""Episodes at once in each worker process."""
DEFAULT_WORKER_RETRIES = 2
START_METHODS = ("spawn", "forkserver")
START_TIMEOUT_S = 300.0
"""How long a worker may take to start (import agentenv, load the plan) before the rollout
stops with WorkerStartError."""
STOP_WAIT_S = 10.0
"""How long a worker asked to stop may take before it is killed."""
_POLL_S = 0.1


class WorkerStartError(RuntimeError):
    """A worker process could not start (so none would): the reason is in the message."""


# -- the worker process -------------------------------------------------------------------


def _worker_main(conn: Connection, payload: bytes, options: dict[str, Any]) -> None:
    """A worker process: load the plan, say ready, run what the parent sends."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        tasks, agents, seeds = pickle.loads(payload)
        envs = EnvironmentCache()
        for task in tasks.values():
            envs.preload(task, seeds)
    except BaseException as exc:
        last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        where = f" ({last[0].filename}:{last[0].lineno})" if last else ""
        with contextlib.suppress(Exception):
            conn.send(("failed", f"{type(exc).__name__}: {exc}{where}"))
        return
    if options.get("gc_tuning", True):  # as the local runner does (rollout.gctune)
        freeze_loaded()  # the plan and environments stay for the worker's life
        gc.set_threshold(*THRESHOLD)
    conn.send(("ready", WORKER))
    asyncio.run(_serve(conn, tasks, agents, envs, options))


async def _serve(
    conn: Connection,
    tasks: dict[str, Any],
    agents: dict[str, Any],
    envs: EnvironmentCache,
    options: dict[str, Any],
) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[PlannedEpisode | None] = asyncio.Queue()
    concurrency = int(options["concurrency"])

    def readable() -> None:
        while True:
            try:
                if not conn.poll():
                    return
                message = conn.recv()
            except (EOFError, OSError):  # the parent is gone: stop
                message = ("stop",)
            if message[0] == "run":
                for episode in message[1]:
                    queue.put_nowait(episode)
            else:
                loop.remove_reader(conn.fileno())
                for _ in range(concurrency):
                    queue.put_nowait(None)
                return

    async def runner() -> None:
        while (episode := await queue.get()) is not None:
            status, line = await run_episode_line(
                tasks[episode.task],
                agents[episode.agent],
                episode,
                envs=envs,
                timeout=options["timeout"],
                record_tools=options["record_tools"],
            )
            conn.send(("record", episode.id, status, line))

    loop.add_reader(conn.fileno(), readable)
    await asyncio.gather(*(runner() for _ in range(concurrency)))


# -- the parent ---------------------------------------------------------------------------


@dataclass
class _Worker:
    """A worker's place: its process now, its pipe, the episodes it holds."""

    process: Any
    conn: Connection
    ready: bool = False
    held: dict[str, PlannedEpisode] = field(default_factory=dict)
    solo: bool = False
    """Running one episode whose worker died, alone."""
    started: float = field(default_factory=time.monotonic)


class ProcessRunner(BaseRunner):
    """Runs a plan in `workers` processes of this machine; `runner.run()` blocks.

    `concurrency`: episodes at once in each worker. `worker_retries`: how many times an
    episode runs again after its worker died running it; past that it is recorded as an
    error. `start_method`: `spawn` (default) or `forkserver`."""

    def __init__(
        self,
        plan: RolloutPlan,
        store: RolloutStore | str | Path,
        *,
        workers: int | None = None,
        concurrency: int = DEFAULT_PROCESS_CONCURRENCY,
        worker_retries: int = DEFAULT_WORKER_RETRIES,
        start_method: str = "spawn",
        **options: Any,
    ) -> None:
        super().__init__(plan, store, **options)
        if workers is not None and workers < 1:
            raise ValueError(f"workers must be at least 1 (got {workers})")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
        if worker_retries < 0:
            raise ValueError(f"worker_retries must be at least 0 (got {worker_retries})")
        if start_method not in START_METHODS:
            raise ValueError(f"start_method must be one of {', '.join(START_METHODS)}")
        self.workers = workers or os.cpu_count() or 1
        self.concurrency = concurrency
        self.worker_retries = worker_retries
        self.context = multiprocessing.get_context(start_method)
        self._payload = b""
        self._t0 = 0.0
        self._first = self._readied = 0
        self.pids: list[int] = []
        """The pids of the worker processes started so far (the running ones last)."""
        self.ready_after_s: float | None = None
        """Seconds from the start of `run()` until every first worker was ready (loaded
        the plan): the start-up cost, for benchmarks."""

    def _options(self) -> dict[str, Any]:
        return {
            "concurrency": self.concurrency,
            "timeout": self.timeout,
            "record_tools": self.record_tools,
            "gc_tuning": self.gc_tuning,
        }

    def _spawn(self) -> _Worker:
        parent, child = self.context.Pipe(duplex=True)
        process = self.context.Process(
            target=_worker_main,
            args=(child, self._payload, self._options()),
            name="agentenv-rollout-worker",
            daemon=True,
        )
        # Started with SIGINT ignored, so the child inherits that from its first instruction:
        # a Ctrl-C while it is still importing must not print its traceback.
        main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
        try:
            process.start()
        finally:
            if main:
                signal.signal(signal.SIGINT, previous)
        child.close()
        self.pids.append(process.pid)
        return _Worker(process, parent)

    def run(self) -> RolloutSummary:
        """Run every episode of the plan not yet in the store."""
        with self._session():
            count, todo = self._todo()
            self.progress.start(len(self.plan), self.summary.skipped)
            if not count:
                return self.summary
            try:
                self._payload = pickle.dumps(
                    (self.plan.tasks, self.plan.agents, self.plan.seeds),
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
            except Exception as exc:
                raise WorkerStartError(
                    f"the plan cannot be sent to worker processes ({type(exc).__name__}: "
                    f"{exc}): its agents and steps must be picklable, defined at the top "
                    "level of an importable module"
                ) from None
            slots: list[_Worker] = []
            self._t0 = time.perf_counter()
            try:
                self._first, self._readied = min(self.workers, count), 0
                for _ in range(self._first):  # one by one: a failed spawn still shuts the rest
                    slots.append(self._spawn())
                self._drive(slots, todo)
            finally:
                self._shut(slots)
        return self.summary

    def _drive(self, slots: list[_Worker], todo: Iterator[PlannedEpisode]) -> None:
        again: deque[PlannedEpisode] = deque()  # episodes whose worker died, to run alone
        deaths: dict[str, int] = {}
        exhausted = False

        def feed() -> None:
            nonlocal exhausted
            for slot in slots:
                if not slot.ready or slot.solo:
                    continue
                if again:
                    if not slot.held:
                        episode = again.popleft()
                        slot.solo = True
                        self._send(slot, [episode])
                    continue  # let it drain, so a suspect can run alone on it
                batch = []
                while not exhausted and len(slot.held) + len(batch) < self.concurrency:
                    episode = next(todo, None)
                    if episode is None:
                        exhausted = True
                        break
                    batch.append(episode)
                if batch:
                    self._send(slot, batch)

        def died(slot: _Worker) -> None:
            self._drain(slot)
            code = slot.process.exitcode
            why = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
            for episode in slot.held.values():
                n = deaths[episode.id] = deaths.get(episode.id, 0) + 1
                if n > self.worker_retries:
                    times = "once" if n == 1 else f"{n} times"
                    reason = (
                        f"the worker process running this episode died ({why}), {times} "
                        f"(worker_retries={self.worker_retries})"
                    )
                    self._record(error_record(episode, reason))
                else:
                    again.append(episode)
            with contextlib.suppress(Exception):
                slot.conn.close()
            fresh = self._spawn()
            slot.process, slot.conn, slot.ready = fresh.process, fresh.conn, False
            slot.held, slot.solo, slot.started = {}, False, fresh.started

        while True:
            if self.stopping:
                self.summary.interrupted = True
                return
            feed()
            if exhausted and not again and not any(s.held for s in slots):
                return
            waiting: dict[Any, _Worker] = {}
            for slot in slots:
                waiting[slot.conn] = slot
                waiting[slot.process.sentinel] = slot
            for handle in wait(list(waiting), timeout=_POLL_S):
                slot = waiting[handle]
                if handle is slot.conn:
                    self._drain(slot)
            for slot in slots:
                if not slot.ready and time.monotonic() - slot.started > START_TIMEOUT_S:
                    raise WorkerStartError(
                        f"a worker process did not start within {START_TIMEOUT_S:g} s"
                    )
                if not slot.process.is_alive():
                    if not slot.ready:
                        self._drain(slot)  # a worker that failed to start says why
                        if not slot.ready:
                            code = slot.process.exitcode
                            raise WorkerStartError(
                                f"a worker process exited while starting (exit code {code})"
                            )
                    died(slot)

    def _send(self, slot: _Worker, episodes: list[PlannedEpisode]) -> None:
        for episode in episodes:
            slot.held[episode.id] = episode
        with contextlib.suppress(OSError):  # a dead worker: its sentinel says so next
            slot.conn.send(("run", episodes))

    def _drain(self, slot: _Worker) -> None:
        """Take every message the worker has sent (records are written at once)."""
        while True:
            try:
                if not slot.conn.poll():
                    return
                message = slot.conn.recv()
            except (EOFError, OSError):
                return
            kind = message[0]
            if kind == "record":
                _, episode_id, status, line = message
                if slot.held.pop(episode_id, None) is None:
                    continue  # not ours to write (cannot happen; never write one twice)
                self.store.append_line(line)
                self._count(status)
                if not slot.held:
                    slot.solo = False
            elif kind == "ready":
                slot.ready = True
                self._readied += 1
                if self._readied == self._first and self.ready_after_s is None:
                    self.ready_after_s = time.perf_counter() - self._t0
            elif kind == "failed":
                raise WorkerStartError(
                    f"a worker process could not start ({message[1]}): worker processes must "
                    "be able to import agentenv and the plan's agents and steps, and read its "
                    "task and environment files"
                )

    def _shut(self, slots: list[_Worker]) -> None:
        """Stop every worker: at once when interrupted (writing what they had sent), else
        asking them to finish."""
        for slot in slots:
            if self.summary.interrupted or self.stopping:
                with contextlib.suppress(Exception):
                    slot.process.kill()
            else:
                with contextlib.suppress(Exception):
                    slot.conn.send(("stop",))
        for slot in slots:
            slot.process.join(STOP_WAIT_S)
            if slot.process.is_alive():
                slot.process.kill()
                slot.process.join(STOP_WAIT_S)
            with contextlib.suppress(Exception):
                self._drain(slot)
            with contextlib.suppress(Exception):
                slot.conn.close()
