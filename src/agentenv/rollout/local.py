"""The local runner: a plan's episodes on this machine, in one asyncio event loop.

Each episode is one run of its task (`run_task`) in a fresh TaskContext: its `deploy_env`
steps build fresh Gateways, whose instances fork the environment's seeded snapshot, so no
episode sees another's state. Environments are loaded once per plan and shared (an
Environment is immutable). At most `concurrency` episodes run at once; each has a
timeout; an episode that raises, hangs or times out is recorded (status `error` or
`timeout`, with the reason) and the run goes on; so is one whose record cannot be built or
serialised (an `error` naming what failed and where). Tool code declared `blocking` runs in
worker threads (the gateway does that), so the event loop keeps serving other episodes.
Ctrl-C (or SIGTERM, or `stop()`) stops cleanly: in-flight episodes are cancelled and not
recorded, every finished one is already in the store, and `--resume` runs the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentenv.rollout.episode import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT,
    EnvironmentCache,
    run_episode_lines,
)
from agentenv.rollout.gctune import tuned_gc
from agentenv.rollout.plan import PlannedEpisode, RolloutPlan
from agentenv.rollout.progress import Progress, make_progress
from agentenv.rollout.store import EpisodeRecord, RolloutStore

# -- the runner ---------------------------------------------------------------------------


@dataclass
class RolloutSummary:
    """How a rollout went (this invocation; `skipped` were already in the store)."""

    planned: int
    skipped: int = 0
    ran: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    timeouts: int = 0
    interrupted: bool = False
    elapsed_s: float = 0.0

    def add(self, status: str) -> None:
        """Count one finished episode."""
        self.ran += 1
        if status == "passed":
            self.passed += 1
        elif status == "failed":
            self.failed += 1
        elif status == "timeout":
            self.timeouts += 1
        else:
            self.errors += 1

    @property
    def remaining(self) -> int:
        """Episodes of the plan not in the store yet."""
        return max(self.planned - self.skipped - self.ran, 0)

    @property
    def episodes_per_s(self) -> float:
        """Throughput of this invocation."""
        return self.ran / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON data."""
        return {
            "planned": self.planned,
            "skipped": self.skipped,
            "ran": self.ran,
            "passed": self.passed,
            "failed": self.failed,
            "errors": self.errors,
            "timeouts": self.timeouts,
            "remaining": self.remaining,
            "interrupted": self.interrupted,
            "elapsed_s": round(self.elapsed_s, 3),
            "episodes_per_s": round(self.episodes_per_s, 2),
        }


class BaseRunner:
    """What the local and Ray runners share: the store, resume, signals, progress."""

    def __init__(
        self,
        plan: RolloutPlan,
        store: RolloutStore | str | Path,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        retry_errors: bool = False,
        record_tools: bool = True,
        progress: Progress | bool | None = None,
        handle_signals: bool = True,
        gc_tuning: bool = True,
    ) -> None:
        self.plan = plan
        self.store = store if isinstance(store, RolloutStore) else RolloutStore(store)
        self.timeout = timeout or None
        self.retry_errors = retry_errors
        self.record_tools = record_tools
        self.progress = make_progress(progress)
        self.handle_signals = handle_signals
        self.gc_tuning = gc_tuning
        """Freeze the loaded environments and raise the GC thresholds while running
        (`rollout.gctune`)."""
        self._stop = threading.Event()
        self.summary = RolloutSummary(planned=len(plan))

    def stop(self) -> None:
        """Stop soon: cancel the episodes in flight, keep what finished. Thread-safe."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        """Whether `stop()` was called (or Ctrl-C pressed)."""
        return self._stop.is_set()

    def _todo(self) -> tuple[int, Iterator[PlannedEpisode]]:
        """How many episodes are left, and (lazily) which: the plan's ids not done."""
        done = self.store.done_ids(retry_errors=self.retry_errors)
        skipped = sum(1 for e in self.plan.episodes() if e.id in done) if done else 0
        self.summary = RolloutSummary(planned=len(self.plan), skipped=skipped)
        return len(self.plan) - skipped, (e for e in self.plan.episodes() if e.id not in done)

    def _record(self, record: EpisodeRecord) -> None:
        # A record that cannot be serialised is written as its error stand-in (and counted
        # as one); only the store itself failing (a full disk) stops the run.
        written = self.store.append(record)
        self._count(written.status)

    def _write(self, status: str, line: str) -> None:
        """Write a record already serialised (`run_episode_lines`) and count it."""
        self.store.append_line(line)
        self._count(status)

    def _count(self, status: str) -> None:
        self.summary.add(status)
        self.progress.advance(status)

    @contextlib.contextmanager
    def _session(self) -> Any:
        """Open the store, write plan.json, install signal handlers; undo it all after."""
        opened = not self.store.is_open
        self.store.open()
        self._stop.clear()
        previous: dict[int, Any] = {}
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.getsignal(sig)
                signal.signal(sig, self._on_signal)
        t0 = time.perf_counter()
        try:
            self.store.write_plan(self.plan.describe())
            yield
        finally:
            self.summary.elapsed_s = time.perf_counter() - t0
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.progress.stop()
            if opened:
                self.store.close()

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.stopping:  # a second Ctrl-C while stopping: stop now
            raise KeyboardInterrupt
        self.stop()


class LocalRunner(BaseRunner):
    """Runs a plan in this process. `await runner.run()` or `runner.run_sync()`."""

    def __init__(
        self,
        plan: RolloutPlan,
        store: RolloutStore | str | Path,
        *,
        concurrency: int = DEFAULT_CONCURRENCY,
        keep_states: bool = False,
        **options: Any,
    ) -> None:
        super().__init__(plan, store, **options)
        self.keep_states = keep_states
        """Keep each episode's final state in the run folder's `states.jsonl`
        (`RolloutStore.write_state`, `read_state`)."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
        self.concurrency = concurrency
        self.envs = EnvironmentCache()

    async def run(self) -> RolloutSummary:
        """Run every episode of the plan not yet in the store."""
        with self._session():
            count, todo = self._todo()
            self.progress.start(len(self.plan), self.summary.skipped)
            if not count:
                return self.summary
            for task in self.plan.tasks.values():
                self.envs.preload(task, self.plan.seeds)
            with tuned_gc(self.gc_tuning):
                await self._run_all(count, todo)
        return self.summary

    async def _run_all(self, count: int, todo: Iterator[PlannedEpisode]) -> None:
        """Run the episodes to do until they finish or `stop()` is called."""
        work = ((self.plan.tasks[e.task], self.plan.agents[e.agent], e) for e in todo)
        main = asyncio.create_task(
            run_episode_lines(
                work,
                self._write,
                concurrency=min(self.concurrency, count),
                timeout=self.timeout,
                envs=self.envs,
                record_tools=self.record_tools,
                keep_state=self.store.write_state if self.keep_states else None,
            )
        )
        try:
            while not main.done():
                await asyncio.wait({main}, timeout=0.05)
                if self.stopping and not main.done():
                    self.summary.interrupted = True
                    main.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await main
                    break
            if not self.summary.interrupted:
                main.result()
        except asyncio.CancelledError:
            main.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await main
            raise

    def run_sync(self) -> RolloutSummary:
        """`run()` in a new event loop."""
        return asyncio.run(self.run())
