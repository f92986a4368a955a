"""Running one episode of a plan: environments loaded once per plan, one task run per
episode in its own instances, and the record the store keeps.

What does not change from one episode to the next is made once per plan and shared (the
`EnvironmentCache`): loaded environments, each task's checked steps per seed (an episode
gets fresh Step objects around the checked fields), each tool's JSON form for the records.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentenv.env.environment import Environment
from agentenv.rollout.jsonsafe import describe_problem, error_text, safe_text
from agentenv.rollout.plan import PlanAgent, PlannedEpisode
from agentenv.rollout.records import Finished, ToolDumps, build_record, record_line
from agentenv.rollout.store import (
    NOT_SERIALISABLE,
    EpisodeRecord,
    record_json,
    stand_in_record,
)
from agentenv.spec.errors import DocumentError
from agentenv.spec.task import fill_placeholders
from agentenv.tasks.bundle import Task
from agentenv.tasks.runner import TaskError, TaskRunner, build_steps
from agentenv.tasks.step import Step, StepError

# -- environments, loaded once per plan ---------------------------------------------------


class EnvironmentCache:
    """What every episode of a plan shares (in this process, a Ray worker or a worker
    process): loaded environments by path, each task's checked steps per seed, and each
    tool's JSON form (`tools`).

    A document that fails to load is remembered too, so every episode that deploys it
    fails with the same message without reading it again; so is a task whose steps do not
    check (each episode raises the same TaskError).
    """

    def __init__(self, *, max_tasks: int | None = None) -> None:
        self._max_tasks = max_tasks
        """At most this many (task, seed) step lists are kept, the oldest dropped first
        (None: no limit; a plan's tasks are a fixed few, an SDK caller's may not be)."""
        self._loaded: dict[Path, Environment | DocumentError] = {}
        self._refs: dict[tuple[Path | None, Path, str], Environment] = {}
        self._steps: dict[tuple[int, str], tuple[Task, list[Step] | TaskError]] = {}
        self.tools = ToolDumps()

    def steps_for(self, task: Task, seed: dict[str, Any]) -> list[Step]:
        """`build_steps(task.spec, seed)`, checked once per task and seed: fresh Step
        objects (steps may keep per-run state on themselves) around the checked fields
        (shared: a step must not change its `params`)."""
        key = (id(task), json.dumps(seed, sort_keys=True, default=repr))
        found = self._steps.get(key)
        if found is None or found[0] is not task:
            built: list[Step] | TaskError
            try:
                built = build_steps(task.spec, seed)
            except TaskError as exc:
                built = exc
            if self._max_tasks is not None and key not in self._steps:
                while self._steps and len(self._steps) >= self._max_tasks:
                    del self._steps[next(iter(self._steps))]
            found = self._steps[key] = (task, built)
        built = found[1]
        if isinstance(built, TaskError):
            raise TaskError(str(built), built.problems)
        return [_fresh(step) for step in built]

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


def _fresh(step: Step) -> Step:
    """A new Step of the same type around the same checked spec and fields."""
    new = type(step)(step.spec, step.params)
    new.ignored = list(step.ignored)
    return new


# -- one episode --------------------------------------------------------------------------

WORKER = f"{socket.gethostname()}:{os.getpid()}"
DEFAULT_CONCURRENCY = 64
DEFAULT_TIMEOUT = 600.0
"""Seconds one episode may take (wall clock) before it is recorded as `timeout`."""


def _now() -> datetime:
    return datetime.now(UTC)


async def _run(
    task: Task,
    agent: PlanAgent,
    episode: PlannedEpisode,
    envs: EnvironmentCache,
    timeout: float | None,
) -> Finished:
    """Run one episode's task; what it left, for its record. Never raises for the
    episode's own failure (an exception, a hang past `timeout`); cancellation propagates."""
    started, t0 = _now(), time.perf_counter()
    ctx = task.context(agent_factory=lambda request: agent.make(), seed=dict(episode.seed))
    ctx.env_resolver = envs.resolver(task)
    runner: TaskRunner | None = None
    result = None
    status: str
    error: str | None = None
    try:
        runner = TaskRunner(task.spec, ctx, envs.steps_for(task, ctx.seed))
        async with asyncio.timeout(timeout or None):  # in this task: no task per episode
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
    return Finished(ctx, runner, result, episode, status, error, started, duration, WORKER)


def _unbuildable(done: Finished, exc: Exception) -> EpisodeRecord:
    ended = f" (the episode ended {done.status})"
    reason = safe_text(f"the episode's record cannot be built: {error_text(exc)}{ended}")
    return error_record(done.episode, reason, started_at=done.started, duration_s=done.duration)


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
    done = await _run(task, agent, episode, envs, timeout)
    try:
        return build_record(done, record_tools=record_tools, tools=envs.tools)
    except Exception as exc:  # what the episode left cannot make a record: say so, go on
        return _unbuildable(done, exc)


async def run_episode_line(
    task: Task,
    agent: PlanAgent,
    episode: PlannedEpisode,
    *,
    envs: EnvironmentCache | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    record_tools: bool = True,
    keep_state: StateSink | None = None,
) -> tuple[str, str]:
    """`run_episode`, serialised: (status, the record's JSON line) as the store writes it
    (`record_json(await run_episode(...))`, made without the intermediate record; see
    `rollout.records`). `keep_state(episode_id, state)` gets the episode's final state
    (`final_state`) before the line is made."""
    envs = envs if envs is not None else EnvironmentCache()
    done = await _run(task, agent, episode, envs, timeout)
    if keep_state is not None:
        keep_state(episode.id, final_state(done.ctx))
    try:
        return record_line(done, record_tools=record_tools, tools=envs.tools)
    except Exception as exc:
        line, written = record_json(_unbuildable(done, exc))
        return written.status, line


StateSink = Callable[[str, dict[str, Any]], None]
"""Where a runner keeps an episode's final state: `(episode_id, state)`."""


def final_state(ctx: Any) -> dict[str, Any]:
    """What each deployed environment of a task run ended as: env id -> its records by
    collection (an environment whose state cannot be read says why, under `error`)."""
    out: dict[str, Any] = {}
    for env_id, deployed in getattr(ctx, "envs", {}).items():
        try:
            out[env_id] = deployed.snapshot().to_dict()
        except Exception as exc:  # a state that cannot be read must not lose the record
            out[env_id] = {"error": error_text(exc)}
    return out


def error_record(
    episode: PlannedEpisode,
    reason: str,
    *,
    started_at: datetime | None = None,
    duration_s: float = 0.0,
) -> EpisodeRecord:
    """The record of an episode that ended in an error outside its task (its record could
    not be built, its worker died): status `error`, the reason, and nothing it produced."""
    return EpisodeRecord(
        episode_id=episode.id,
        status="error",
        task=episode.task,
        agent=episode.agent,
        seed=episode.seed,
        repeat=episode.repeat,
        error=reason,
        started_at=started_at or _now(),
        ended_at=_now(),
        duration_s=duration_s,
        worker=WORKER,
    )


def _where(runner: TaskRunner | None) -> str:
    if runner is None:
        return ""
    running = [r.id for r in runner.records.values() if r.status == "running"]
    return f" (still running: {', '.join(running)})" if running else ""


WorkItem = tuple[Task, PlanAgent, PlannedEpisode]


def _hand_over(record: EpisodeRecord, on_record: Callable[[EpisodeRecord], None]) -> None:
    """`on_record(record)`; its error stand-in when the record cannot be serialised there
    (e.g. a Ray worker that serialises records itself)."""
    try:
        on_record(record)
    except (ValueError, TypeError, RecursionError) as exc:
        reason = f"{NOT_SERIALISABLE}: {describe_problem(record, exc)}"
        on_record(stand_in_record(record, reason))


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
    it finishes. When `on_record` cannot serialise a record (it raises ValueError,
    TypeError or RecursionError: a lone surrogate, nesting too deep, a value that is not
    JSON), it gets the record's error stand-in instead; any other error in `on_record`
    (e.g. a full disk) stops the run."""
    cache = envs if envs is not None else EnvironmentCache()

    async def one(task: Task, agent: PlanAgent, episode: PlannedEpisode) -> None:
        record = await run_episode(
            task, agent, episode, envs=cache, timeout=timeout, record_tools=record_tools
        )
        _hand_over(record, on_record)

    await _pool(work, one, concurrency)


async def run_episode_lines(
    work: Iterable[WorkItem],
    on_line: Callable[[str, str], None],
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    timeout: float | None = DEFAULT_TIMEOUT,
    envs: EnvironmentCache | None = None,
    record_tools: bool = True,
    keep_state: StateSink | None = None,
) -> None:
    """`run_episodes` for runners that write lines: `on_line(status, line)` gets each
    episode's record as the JSON line the store writes (its error stand-in already, when
    the record cannot be serialised); `keep_state`, when given, each final state first.
    An error in `on_line` (or `keep_state`) stops the run."""
    cache = envs if envs is not None else EnvironmentCache()

    async def one(task: Task, agent: PlanAgent, episode: PlannedEpisode) -> None:
        status, line = await run_episode_line(
            task,
            agent,
            episode,
            envs=cache,
            timeout=timeout,
            record_tools=record_tools,
            keep_state=keep_state,
        )
        on_line(status, line)

    await _pool(work, one, concurrency)


async def _pool(
    work: Iterable[WorkItem],
    one: Callable[[Task, PlanAgent, PlannedEpisode], Awaitable[None]],
    concurrency: int,
) -> None:
    """`one(*item)` for every item, at most `concurrency` at once (each item once)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
    items = iter(work)

    async def worker() -> None:
        me = asyncio.current_task()
        for task, agent, episode in items:  # one shared iterator: each item runs once
            await one(task, agent, episode)
            if me is not None and me.cancelling():
                # A cancellation that arrived as an episode finished, and that something
                # awaited in it swallowed (asyncio.wait_for does, in 3.11): honour it, or
                # this worker would go on through the rest of the plan.
                raise asyncio.CancelledError
            await asyncio.sleep(0)  # an episode that never awaited must not starve the rest

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
