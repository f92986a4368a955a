"""The local runner: a plan's episodes on this machine, in one asyncio event loop.

Each episode is one run of its task (`run_task`) in a fresh TaskContext: its `deploy_env`
steps build fresh Gateways, whose instances fork the environment's seeded snapshot, so no
episode sees another's state. Environments are loaded once per plan and shared (an
Environment is immutable). At most `concurrency` episodes run at once; each has a
timeout; an episode that raises, hangs or times out is recorded (status `error` or
`timeout`, with the reason) and the run goes on. Tool code declared `blocking` runs in
worker threads (the gateway does that), so the event loop keeps serving other episodes.
Ctrl-C (or SIGTERM, or `stop()`) stops cleanly: in-flight episodes are cancelled and not
recorded, every finished one is already in the store, and `--resume` runs the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from agentenv.env.environment import Environment
from agentenv.env.tool import Principal
from agentenv.rollout.plan import PlanAgent, PlannedEpisode, RolloutPlan
from agentenv.rollout.store import EpisodeRecord, PromptEntry, RolloutStore
from agentenv.spec.errors import DocumentError
from agentenv.spec.task import fill_placeholders
from agentenv.tasks.bundle import Task
from agentenv.tasks.context import TaskContext
from agentenv.tasks.run_folder import trajectory_rows
from agentenv.tasks.runner import TaskError, TaskRunner, build_steps
from agentenv.tasks.step import StepError

DEFAULT_CONCURRENCY = 64
DEFAULT_TIMEOUT = 600.0
"""Seconds one episode may take (wall clock) before it is recorded as `timeout`."""


# -- environments, loaded once per plan ---------------------------------------------------


class EnvironmentCache:
    """Loaded environments by path, shared by every episode of a plan (and a Ray worker).

    A document that fails to load is remembered too, so every episode that deploys it
    fails with the same message without reading it again.
    """

    def __init__(self) -> None:
        self._loaded: dict[Path, Environment | DocumentError] = {}
        self._refs: dict[tuple[Path | None, Path, str], Environment] = {}

    def load(self, path: Path) -> Environment:
        """The environment at `path` (a document or its folder), loaded once."""
        key = path.resolve()
        found = self._loaded.get(key)
        if found is None:
            try:
                found = Environment.load(key)
            except DocumentError as exc:
                found = exc
            self._loaded[key] = found
        if isinstance(found, DocumentError):
            raise StepError(str(found))
        return found

    def resolver(self, task: Task) -> Callable[[str], Environment | None]:
        """A `TaskContext.env_resolver` for `task`: its bundle's environments by name, then
        paths (relative to the task file); None lets `deploy_env` report what is missing."""
        bundle = task.bundle
        base = task.file.parent if task.file else Path.cwd()
        where = bundle.path if bundle is not None else None

        def resolve(ref: str) -> Environment | None:
            key = (where, base, ref)
            found = self._refs.get(key)
            if found is not None:
                return found
            env: Environment | None = None
            path = bundle.env_path(ref) if bundle is not None else None
            if path is not None:
                env = self.load(path)
            else:
                path = Path(ref)
                if not path.is_absolute():
                    path = base / path
                env = self.load(path) if path.exists() else None
            if env is not None:
                self._refs[key] = env
            return env

        return resolve

    def preload(self, task: Task, seeds: Iterable[dict[str, Any]]) -> None:
        """Load the environments the task's `deploy_env` steps name (errors are kept for
        the episodes to report)."""
        resolve = self.resolver(task)
        for seed in seeds:
            values = {**task.spec.seed, **seed}
            for step in task.spec.steps:
                if step.type != "deploy_env":
                    continue
                ref = fill_placeholders(step.params.get("env"), values)
                if isinstance(ref, str):
                    with contextlib.suppress(StepError, OSError):
                        resolve(ref)

    def __len__(self) -> int:
        return len(self._loaded)


# -- one episode --------------------------------------------------------------------------

WORKER = f"{socket.gethostname()}:{os.getpid()}"


def _now() -> datetime:
    return datetime.now(UTC)


async def run_episode(
    task: Task,
    agent: PlanAgent,
    episode: PlannedEpisode,
    *,
    envs: EnvironmentCache | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    record_tools: bool = True,
) -> EpisodeRecord:
    """Run one episode and return its record; never raises for the episode's own failure
    (an exception, a hang past `timeout`). Cancellation propagates (nothing is recorded)."""
    envs = envs if envs is not None else EnvironmentCache()
    started, t0 = _now(), time.perf_counter()
    ctx = task.context(agent_factory=lambda request: agent.make(), seed=dict(episode.seed))
    ctx.env_resolver = envs.resolver(task)
    runner: TaskRunner | None = None
    result = None
    status: str
    error: str | None = None
    try:
        runner = TaskRunner(task.spec, ctx, build_steps(task.spec, ctx.seed))
        if timeout:
            result = await asyncio.wait_for(runner.run(), timeout)
        else:
            result = await runner.run()
        status = result.status
        error = result.error
    except TimeoutError:
        status, error = "timeout", f"the episode took longer than {timeout:g} s"
        error += _where(runner)
    except TaskError as exc:
        status, error = "error", f"the task cannot run: {exc}"
    except Exception as exc:  # the episode's own bug: recorded, the rollout goes on
        status, error = "error", f"{type(exc).__name__}: {exc}"
    duration = time.perf_counter() - t0
    if result is not None:
        passed, score = result.passed, result.score
        scores = dict(result.scores)
        steps = [s.model_dump(mode="json") for s in result.steps]
    else:
        passed, score, scores = False, None, dict(ctx.scores)
        steps = [r.model_dump(mode="json") for r in runner.records.values()] if runner else []
    trajectory = trajectory_rows(ctx)
    return EpisodeRecord(
        episode_id=episode.id,
        status=status,  # type: ignore[arg-type]
        task=episode.task,
        agent=episode.agent,
        seed=episode.seed,
        repeat=episode.repeat,
        passed=passed,
        score=score,
        scores=scores,
        error=error,
        started_at=started,
        ended_at=_now(),
        duration_s=duration,
        calls=sum(1 for r in trajectory if r["kind"] == "call"),
        usage=_usage(ctx),
        usage_by_prompt=dict(getattr(ctx, "usage", None) or {}),
        steps=steps,
        prompts=_prompts(ctx),
        tools=_tools(ctx) if record_tools else {},
        trajectory=trajectory,
        worker=WORKER,
    )


def _where(runner: TaskRunner | None) -> str:
    if runner is None:
        return ""
    running = [r.id for r in runner.records.values() if r.status == "running"]
    return f" (still running: {', '.join(running)})" if running else ""


def _usage(ctx: TaskContext) -> dict[str, int | float]:
    """Token counters summed over the episode: from what `prompt_agent` recorded per turn
    (`ctx.usage`), else from each agent's own `usage` (a mapping or a dataclass)."""
    total: dict[str, int | float] = {}

    def add(counters: Any) -> None:
        if dataclasses.is_dataclass(counters) and not isinstance(counters, type):
            counters = dataclasses.asdict(counters)
        if not isinstance(counters, dict):
            return
        for key, value in counters.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value

    turns = getattr(ctx, "usage", None) or {}
    if turns:
        for entries in turns.values():
            for entry in entries:
                add(entry.get("usage") if isinstance(entry, dict) else None)
        return total
    seen: set[int] = set()
    for deployed in ctx.agents.values():
        agent = deployed.agent
        if agent is not None and id(agent) not in seen:
            seen.add(id(agent))
            add(getattr(agent, "usage", None))
    return total


def _prompts(ctx: TaskContext) -> list[PromptEntry]:
    if not ctx.prompts:
        return []
    values = {**ctx.task.seed, **ctx.seed}
    params: dict[str, dict[str, Any]] = {}
    for step in ctx.task.steps:
        if step.type == "prompt_agent":
            filled = fill_placeholders(step.params, values)
            params[str(filled.get("prompt_id") or step.id)] = filled
    out = []
    for record in ctx.prompts.values():
        deployed = ctx.agents.get(record.agent_name)
        step = params.get(record.prompt_id, {})
        out.append(
            PromptEntry(
                prompt_id=record.prompt_id,
                agent_name=record.agent_name,
                role=deployed.role if deployed else None,
                env_ids=list(record.start_seq),
                system_prompt=step.get("system_prompt")
                or (deployed.system_prompt if deployed else None),
                prompt=record.prompt,
                response=record.response,
                error=record.error,
                model=step.get("model"),
                started_at=record.started,
                ended_at=record.ended,
                start_seq=record.start_seq,
                end_seq=record.end_seq,
                messages=list(getattr(record, "messages", [])),
            )
        )
    return out


def _tools(ctx: TaskContext) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for deployed in ctx.agents.values():
        try:
            client = ctx.tool_client(
                Principal(role=deployed.role, name=deployed.name), deployed.env_ids
            )
            out[deployed.name] = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True)
                for t in client.list_tools()
            ]
        except Exception:  # a half-deployed episode: no tool list, the record still stands
            continue
    return out


WorkItem = tuple[Task, PlanAgent, PlannedEpisode]


async def run_episodes(
    work: Iterable[WorkItem],
    on_record: Callable[[EpisodeRecord], None],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float | None = DEFAULT_TIMEOUT,
    envs: EnvironmentCache | None = None,
    record_tools: bool = True,
) -> None:
    """Run episodes, at most `concurrency` at once, handing each record to `on_record` as
    it finishes (an error in `on_record`, e.g. a full disk, stops the run)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
    envs = envs if envs is not None else EnvironmentCache()
    items = iter(work)

    async def worker() -> None:
        for task, agent, episode in items:  # one shared iterator: each item runs once
            record = await run_episode(
                task, agent, episode, envs=envs, timeout=timeout, record_tools=record_tools
            )
            on_record(record)
            await asyncio.sleep(0)  # an episode that never awaited must not starve the rest

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)


# -- progress -----------------------------------------------------------------------------


class Progress(Protocol):
    """What a runner reports to while it runs."""

    def start(self, total: int, done: int) -> None:
        """`total` episodes in the plan, `done` already in the store."""

    def advance(self, status: str) -> None:
        """One more episode finished with this status."""

    def stop(self) -> None:
        """The run is over (finished or interrupted)."""


class RichProgress:
    """A rich progress bar: done/total, passed, failed, errors, episodes/s, ETA."""

    def __init__(self, console: Any = None, description: str = "rollout") -> None:
        from rich.console import Console

        self.console = console or Console(stderr=True)
        self.description = description
        self._bar: Any = None
        self._task: Any = None
        self._counts = {"passed": 0, "failed": 0, "errors": 0}
        self._ran = 0
        self._t0 = 0.0

    def start(self, total: int, done: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        from rich.progress import Progress as Bar

        self._bar = Bar(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn(
                "[green]{task.fields[passed]} passed[/] [red]{task.fields[failed]} failed[/] "
                "[yellow]{task.fields[errors]} errors[/]"
            ),
            TextColumn("{task.fields[rate]} ep/s"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            refresh_per_second=4,
        )
        self._task = self._bar.add_task(
            self.description, total=total, completed=done, rate="-", **self._counts
        )
        self._t0 = time.perf_counter()
        self._bar.start()

    def advance(self, status: str) -> None:
        key = "passed" if status == "passed" else "failed" if status == "failed" else "errors"
        self._counts[key] += 1
        self._ran += 1
        elapsed = max(time.perf_counter() - self._t0, 1e-9)
        if self._bar is not None:
            self._bar.update(
                self._task, advance=1, rate=f"{self._ran / elapsed:.1f}", **self._counts
            )

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


class _NoProgress:
    def start(self, total: int, done: int) -> None:
        pass

    def advance(self, status: str) -> None:
        pass

    def stop(self) -> None:
        pass


def make_progress(progress: Progress | bool | None) -> Progress:
    """A Progress from a runner's `progress` argument (True: a rich bar on stderr)."""
    if progress is True:
        return RichProgress()
    if progress is None or progress is False:
        return _NoProgress()
    return progress


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
    ) -> None:
        self.plan = plan
        self.store = store if isinstance(store, RolloutStore) else RolloutStore(store)
        self.timeout = timeout or None
        self.retry_errors = retry_errors
        self.record_tools = record_tools
        self.progress = make_progress(progress)
        self.handle_signals = handle_signals
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
        self.store.append(record)
        self._count(record.status)

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
        **options: Any,
    ) -> None:
        super().__init__(plan, store, **options)
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
            work = ((self.plan.tasks[e.task], self.plan.agents[e.agent], e) for e in todo)
            main = asyncio.create_task(
                run_episodes(
                    work,
                    self._record,
                    concurrency=min(self.concurrency, count),
                    timeout=self.timeout,
                    envs=self.envs,
                    record_tools=self.record_tools,
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
        return self.summary

    def run_sync(self) -> RolloutSummary:
        """`run()` in a new event loop."""
        return asyncio.run(self.run())
