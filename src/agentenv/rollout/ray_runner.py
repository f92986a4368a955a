"""The Ray runner: the same plan over a Ray cluster (the optional `ray` extra).

Each Ray worker is an actor holding the plan's tasks and agents and its own cache of
loaded environments; the driver sends it batches of episodes, and each batch runs in the
worker exactly as the local runner runs episodes (asyncio, bounded concurrency, per-episode
timeouts). Finished batches stream back to the driver as they complete, and the driver
alone writes the run folder's store, so resume, crash safety and exports are the same as
for local runs. Two batches per worker are kept in flight so no worker waits on the driver.

Workers must be able to import agentenv and read the task and environment files at the
same paths as the driver (a shared file system or the same image), or be given them with
a Ray `runtime_env`, passed through `init_kwargs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentenv.rollout.episode import WORKER, EnvironmentCache, run_episodes
from agentenv.rollout.local import DEFAULT_TIMEOUT, BaseRunner, RolloutSummary
from agentenv.rollout.plan import PlanAgent, PlannedEpisode, RolloutPlan
from agentenv.rollout.store import EpisodeRecord, RolloutStore
from agentenv.tasks.bundle import Task

DEFAULT_BATCH_SIZE = 32
DEFAULT_WORKER_CONCURRENCY = 32
IN_FLIGHT_PER_WORKER = 2


class RayUnavailable(ImportError):
    """Ray is not installed, or the cluster named by --address cannot be reached."""


def import_ray() -> Any:
    """The `ray` module, or RayUnavailable saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            "the Ray backend needs Ray: pip install 'agentenv-framework[ray]' (or 'ray>=2.9')"
        ) from None
    return ray


class EpisodeWorker:
    """One Ray actor: runs batches of a plan's episodes (also usable without Ray)."""

    def __init__(
        self,
        tasks: dict[str, Task],
        agents: dict[str, PlanAgent],
        seeds: list[dict[str, Any]],
        *,
        concurrency: int = DEFAULT_WORKER_CONCURRENCY,
        timeout: float | None = DEFAULT_TIMEOUT,
        record_tools: bool = True,
    ) -> None:
        self.tasks = tasks
        self.agents = agents
        self.concurrency = concurrency
        self.timeout = timeout
        self.record_tools = record_tools
        self.envs = EnvironmentCache()
        for task in tasks.values():
            self.envs.preload(task, seeds)
        # One loop for the worker's life: a batch does not wait at its end for the thread
        # of a blocking tool that outlived its episode's timeout.
        self._loop = asyncio.new_event_loop()

    def run_batch(self, episodes: list[PlannedEpisode]) -> list[tuple[str, str]]:
        """Run the episodes; (status, record as a JSON line) for each."""
        out: list[tuple[str, str]] = []

        def keep(record: EpisodeRecord) -> None:
            out.append((record.status, record.model_dump_json()))

        work = ((self.tasks[e.task], self.agents[e.agent], e) for e in episodes)
        self._loop.run_until_complete(
            run_episodes(
                work,
                keep,
                concurrency=max(1, min(self.concurrency, len(episodes))),
                timeout=self.timeout,
                envs=self.envs,
                record_tools=self.record_tools,
            )
        )
        return out

    def ping(self) -> str:
        """Where this worker runs (host:pid)."""
        return WORKER


def _batches(episodes: Iterator[PlannedEpisode], size: int) -> Iterator[list[PlannedEpisode]]:
    it = iter(episodes)
    while batch := list(itertools.islice(it, size)):
        yield batch


def failed_record(episode: PlannedEpisode, reason: str) -> EpisodeRecord:
    """The record of an episode lost with its worker (status `error`)."""
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    return EpisodeRecord(
        episode_id=episode.id,
        status="error",
        task=episode.task,
        agent=episode.agent,
        seed=episode.seed,
        repeat=episode.repeat,
        error=reason,
        started_at=now,
        ended_at=now,
        duration_s=0.0,
        worker=WORKER,
    )


class RayRunner(BaseRunner):
    """Runs a plan on Ray: `ray.init(address=...)` unless Ray is already initialised (then
    the running session is used and left running). `runner.run()` blocks."""

    def __init__(
        self,
        plan: RolloutPlan,
        store: RolloutStore | str | Path,
        *,
        address: str | None = None,
        num_workers: int | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        concurrency: int = DEFAULT_WORKER_CONCURRENCY,
        init_kwargs: dict[str, Any] | None = None,
        worker_cpus: float = 1,
        **options: Any,
    ) -> None:
        super().__init__(plan, store, **options)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1 (got {batch_size})")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be at least 1 (got {num_workers})")
        self.address = address
        self.num_workers = num_workers
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.init_kwargs = dict(init_kwargs or {})
        self.worker_cpus = worker_cpus
        self.ray = import_ray()

    def _init(self) -> bool:
        ray = self.ray
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"log_to_driver": False, **self.init_kwargs}
        if self.address is None:
            kwargs.setdefault("include_dashboard", False)
        try:
            ray.init(address=self.address, **kwargs)
        except ConnectionError as exc:
            raise RayUnavailable(
                f"no Ray cluster at address {self.address!r} ({exc}); start one with "
                "`ray start --head`, or leave out --address for a local one"
            ) from None
        return True

    def _spawn(self, remote_cls: Any) -> Any:
        return remote_cls.remote(
            self.plan.tasks,
            self.plan.agents,
            self.plan.seeds,
            concurrency=self.concurrency,
            timeout=self.timeout,
            record_tools=self.record_tools,
        )

    def run(self) -> RolloutSummary:
        """Run every episode of the plan not yet in the store."""
        ray = self.ray
        started_here = self._init()  # before our signal handlers, so Ray keeps none of its own
        try:
            with self._session():
                count, todo = self._todo()
                self.progress.start(len(self.plan), self.summary.skipped)
                if not count:
                    return self.summary
                actors: list[Any] = []
                try:
                    cpus = int(ray.cluster_resources().get("CPU", 1))
                    workers = self.num_workers or max(1, cpus)
                    workers = min(workers, -(-count // self.batch_size))
                    remote_cls = ray.remote(num_cpus=self.worker_cpus)(EpisodeWorker)
                    actors = [self._spawn(remote_cls) for _ in range(workers)]
                    self._drive(actors, remote_cls, _batches(todo, self.batch_size))
                finally:
                    for actor in actors:
                        with contextlib.suppress(Exception):
                            ray.kill(actor)
        finally:
            if started_here:
                ray.shutdown()
        return self.summary

    def _drive(self, actors: list[Any], remote_cls: Any, batches: Iterator[Any]) -> None:
        ray = self.ray
        in_flight: dict[Any, tuple[Any, list[PlannedEpisode]]] = {}

        def submit(actor: Any) -> None:
            batch = next(batches, None)
            if batch is not None:
                in_flight[actor.run_batch.remote(batch)] = (actor, batch)

        for _ in range(IN_FLIGHT_PER_WORKER):
            for actor in actors:
                submit(actor)
        while in_flight:
            if self.stopping:
                self.summary.interrupted = True
                for ref in in_flight:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref)
                return
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.1)
            for ref in ready:
                actor, batch = in_flight.pop(ref)
                try:
                    results = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    reason = f"the Ray worker died: {str(exc).splitlines()[0]}"
                    results = [(r.status, r.model_dump_json()) for r in _lost(batch, reason)]
                    index = actors.index(actor)
                    actor = actors[index] = self._spawn(remote_cls)
                except Exception as exc:
                    reason = f"the Ray batch failed: {type(exc).__name__}: {exc}"
                    results = [(r.status, r.model_dump_json()) for r in _lost(batch, reason)]
                for status, line in results:
                    self.store.append_line(line)
                    self._count(status)
                submit(actor)


def _lost(batch: list[PlannedEpisode], reason: str) -> list[EpisodeRecord]:
    return [failed_record(e, reason) for e in batch]
