"""The Ray runner: the same plan over a Ray cluster (the optional `ray` extra).

Each Ray worker is an actor holding the plan's tasks and agents and its own cache of
loaded environments; the driver sends it batches of episodes, and each batch runs in the
worker exactly as the local runner runs episodes (asyncio, bounded concurrency, per-episode
timeouts). Finished batches stream back to the driver as they complete, and the driver
alone writes the run folder's store, so resume, crash safety and exports are the same as
for local runs. Two batches per worker are kept in flight so no worker waits on the driver.

A worker that dies (killed, out of memory, its node lost, a tool that exits the process)
is replaced by a fresh one and its batches run again. A batch's records travel back as the
one return value of its call, so a batch lost with its worker has reported nothing, and
running it again records each of its episodes once. Only the batch the worker was running
counts against its episodes; the batches queued behind it run again as they were. The
episodes of that batch run again one per batch, so an episode that kills its worker takes
no other episode down with it twice, and after `worker_retries` more deaths it is recorded
as an error saying so. A worker whose `__init__` fails stops the rollout (RayUnavailable):
every fresh worker would fail the same way.

`address` is checked before `ray.init`, which waits for minutes on an address where no
cluster listens: the host and port must accept a TCP connection within a few seconds. (A
port that accepts connections but is not a Ray cluster is left to Ray's own timeouts.)

Workers must be able to import agentenv and read the task and environment files at the
same paths as the driver (a shared file system or the same image), or be given them with
a Ray `runtime_env`, passed through `init_kwargs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import socket
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv.rollout.episode import WORKER, EnvironmentCache, error_record, run_episode_lines
from agentenv.rollout.local import DEFAULT_TIMEOUT, BaseRunner, RolloutSummary
from agentenv.rollout.plan import PlanAgent, PlannedEpisode, RolloutPlan
from agentenv.rollout.store import RolloutStore
from agentenv.tasks.bundle import Task

DEFAULT_BATCH_SIZE = 32
DEFAULT_WORKER_CONCURRENCY = 32
DEFAULT_WORKER_RETRIES = 2
IN_FLIGHT_PER_WORKER = 2
PROBE_TIMEOUT_S = 3.0
RAY_CLIENT_PORT = 10001
# How long to wait for the other results of a worker known dead (killed by then, so its
# pending calls fail at once; a result it finished before dying is already stored).
DEAD_WORKER_WAIT_S = 30.0


class RayUnavailable(ImportError):
    """Ray is not installed, the cluster named by --address cannot be reached, or the Ray
    workers cannot start there."""


def import_ray() -> Any:
    """The `ray` module, or RayUnavailable saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(
            "the Ray backend needs Ray: pip install 'agentenv-kit[ray]' (or 'ray>=2.9')"
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

        def keep(status: str, line: str) -> None:
            out.append((status, line))

        work = ((self.tasks[e.task], self.agents[e.agent], e) for e in episodes)
        self._loop.run_until_complete(
            run_episode_lines(
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


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_ERROR_LINE = re.compile(r"^[\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def _first_line(exc: BaseException) -> str:
    """The first line of a Ray error, without its terminal colours."""
    text = _ANSI.sub("", str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _root_cause(exc: BaseException) -> str:
    """The last `SomeError: message` line of a Ray error's tracebacks (what went wrong in
    the worker), else its first line."""
    lines = [line.strip() for line in _ANSI.sub("", str(exc)).splitlines()]
    found = [line for line in lines if _ERROR_LINE.match(line)]
    return found[-1] if found else _first_line(exc)


# -- reaching the cluster -----------------------------------------------------------------


def cluster_address(address: str | None, temp_dir: str | None = None) -> tuple[str, str] | None:
    """(the address `ray.init(address=...)` will connect to, where it came from), or None
    when it starts a local Ray. RAY_ADDRESS counts, as in Ray, when `address` is None or
    "auto"."""
    source = ""
    env = os.environ.get("RAY_ADDRESS")
    if env and address in (None, "auto"):
        address, source = env, " (from RAY_ADDRESS)"
    if address in (None, "local"):
        return None
    if address == "auto":
        # The cluster `ray start` recorded last, or a running one: Ray's own lookup (not a
        # public API, hence the guard); when it finds none, ray.init says so at once.
        try:
            from ray._private.services import canonicalize_bootstrap_address

            found = canonicalize_bootstrap_address("auto", temp_dir)
        except Exception:
            return None
        return (str(found), " (found by address 'auto')") if found else None
    assert address is not None
    return address, source


def probe_cluster(address: str, *, timeout: float = PROBE_TIMEOUT_S, source: str = "") -> None:
    """Raise RayUnavailable unless the host:port of a Ray address accepts a TCP connection
    within `timeout` seconds (`ray.init` would wait for minutes). `source` says where the
    address came from, for the message."""
    scheme, _, rest = address.rpartition("://")
    if rest.startswith("["):  # [IPv6]:port
        host, _, tail = rest[1:].partition("]")
        port_text = tail[1:] if tail.startswith(":") else ""
    else:
        host, sep, port_text = rest.rpartition(":")
        if not sep:
            host, port_text = rest, ""
    if not port_text:
        if not scheme:
            return  # not HOST:PORT: ray.init reports the format itself
        port_text = str(RAY_CLIENT_PORT)
    try:
        port = int(port_text)
    except ValueError:
        raise RayUnavailable(
            f"bad Ray address {address!r}{source}: {port_text!r} is not a port number "
            "(expected HOST:PORT, e.g. 10.0.0.5:6379, or ray://HOST:10001)"
        ) from None
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        if isinstance(exc, TimeoutError):
            why = f"no answer within {timeout:g} s"
        elif isinstance(exc, ConnectionRefusedError):
            why = "connection refused"
        elif isinstance(exc, socket.gaierror):
            why = f"unknown host {host!r}"
        else:
            why = exc.strerror or str(exc)
        raise RayUnavailable(
            f"no Ray cluster at {address}{source}: cannot connect to {where} ({why}). "
            f"Check that the cluster is up (`ray status --address {where}`; "
            f"`ray start --head --port {port}` starts one), that the address is its head "
            "node's GCS address HOST:PORT (port 6379 by default; ray://HOST:10001 for Ray "
            "Client) and that no firewall blocks the port; or leave out --address to run on "
            "a local Ray"
        ) from None


# -- the runner ---------------------------------------------------------------------------


@dataclass
class _Slot:
    """A worker's place: the actor in it now, and its calls in flight, oldest first."""

    actor: Any
    refs: list[Any] = field(default_factory=list)


class RayRunner(BaseRunner):
    """Runs a plan on Ray: `ray.init(address=...)` unless Ray is already initialised (then
    the running session is used and left running). `runner.run()` blocks.

    `worker_retries`: how many times an episode runs again after its worker died running
    it; past that it is recorded as an error."""

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
        worker_retries: int = DEFAULT_WORKER_RETRIES,
        **options: Any,
    ) -> None:
        super().__init__(plan, store, **options)
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1 (got {batch_size})")
        if num_workers is not None and num_workers < 1:
            raise ValueError(f"num_workers must be at least 1 (got {num_workers})")
        if worker_retries < 0:
            raise ValueError(f"worker_retries must be at least 0 (got {worker_retries})")
        self.address = address
        self.num_workers = num_workers
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.init_kwargs = dict(init_kwargs or {})
        self.worker_cpus = worker_cpus
        self.worker_retries = worker_retries
        self.ray = import_ray()

    def _init(self) -> bool:
        ray = self.ray
        if ray.is_initialized():
            return False
        kwargs: dict[str, Any] = {"log_to_driver": False, **self.init_kwargs}
        if self.address is None:
            kwargs.setdefault("include_dashboard", False)
        target = cluster_address(self.address, kwargs.get("_temp_dir"))
        if target is not None:
            probe_cluster(target[0], source=target[1])
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
                slots: list[_Slot] = []
                try:
                    cpus = int(ray.cluster_resources().get("CPU", 1))
                    workers = self.num_workers or max(1, cpus)
                    workers = min(workers, -(-count // self.batch_size))
                    # Ray itself neither restarts a dead worker nor reruns its calls: the
                    # driver does, so it alone decides what runs again and counts the tries.
                    remote_cls = ray.remote(
                        num_cpus=self.worker_cpus, max_restarts=0, max_task_retries=0
                    )(EpisodeWorker)
                    slots = [_Slot(self._spawn(remote_cls)) for _ in range(workers)]
                    self._drive(slots, remote_cls, _batches(todo, self.batch_size))
                finally:
                    for slot in slots:
                        with contextlib.suppress(Exception):
                            ray.kill(slot.actor)
        finally:
            if started_here:
                ray.shutdown()
        return self.summary

    def _drive(self, slots: list[_Slot], remote_cls: Any, batches: Iterator[Any]) -> None:
        ray = self.ray
        in_flight: dict[Any, tuple[_Slot, list[PlannedEpisode]]] = {}
        again: deque[list[PlannedEpisode]] = deque()  # batches to run again, before new ones
        deaths: dict[str, int] = {}  # episode id -> times its worker died running it

        def fill(slot: _Slot) -> None:
            while len(slot.refs) < IN_FLIGHT_PER_WORKER:
                batch = again.popleft() if again else next(batches, None)
                if batch is None:
                    return
                ref = slot.actor.run_batch.remote(batch)
                in_flight[ref] = (slot, batch)
                slot.refs.append(ref)

        def write(results: list[tuple[str, str]]) -> None:
            for status, line in results:
                self.store.append_line(line)
                self._count(status)

        def lost(batch: list[PlannedEpisode], reason: str) -> None:
            for episode in batch:
                self._record(error_record(episode, reason))

        def died(slot: _Slot, exc: Exception) -> None:
            """Settle every call of the dead worker, oldest first; put a fresh one in."""
            if getattr(exc, "actor_init_failed", False):
                raise RayUnavailable(
                    f"a Ray worker could not start ({_root_cause(exc)}): the workers must be able to "
                    "import agentenv and read the plan's task and environment files (a "
                    "shared file system, the same image, or a runtime_env in init_kwargs)"
                ) from exc
            line = _first_line(exc)
            with contextlib.suppress(Exception):
                ray.kill(slot.actor)  # a worker only unreachable for now must not go on
            running = True  # the oldest call that did not finish was the one running
            for ref in slot.refs:
                _, batch = in_flight.pop(ref)
                try:
                    results = ray.get(ref, timeout=DEAD_WORKER_WAIT_S)
                except Exception:
                    pass
                else:  # finished before the worker died
                    write(results)
                    continue
                if not running:
                    again.append(batch)  # queued behind it: never started
                    continue
                running = False
                for episode in batch:
                    n = deaths[episode.id] = deaths.get(episode.id, 0) + 1
                    if n > self.worker_retries:
                        times = "once" if n == 1 else f"{n} times"
                        lost(
                            [episode],
                            f"the Ray worker running this episode died, {times} "
                            f"(worker_retries={self.worker_retries}): {line}",
                        )
                    else:
                        again.append([episode])  # alone: a killer takes no one else down
            slot.refs = []
            slot.actor = self._spawn(remote_cls)

        for slot in slots:
            fill(slot)
        while in_flight:
            if self.stopping:
                self.summary.interrupted = True
                for ref in in_flight:
                    with contextlib.suppress(Exception):
                        ray.cancel(ref)
                return
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=0.1)
            for ref in ready:
                if ref not in in_flight:
                    continue  # settled with its dead worker
                slot, batch = in_flight[ref]
                try:
                    results = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    died(slot, exc)
                    for other in slots:  # the batches to run again may go to any worker
                        fill(other)
                    continue
                except Exception as exc:
                    del in_flight[ref]
                    slot.refs.remove(ref)
                    lost(batch, f"the Ray batch failed: {type(exc).__name__}: {exc}")
                else:
                    del in_flight[ref]
                    slot.refs.remove(ref)
                    write(results)
                fill(slot)
