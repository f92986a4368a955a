"""Running one episode of a plan: environments loaded once per plan, one task run per
episode in its own instances, and the record the store keeps."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agentenv.env.environment import Environment
from agentenv.env.tool import Principal
from agentenv.rollout.jsonsafe import describe_problem, error_text, safe_text
from agentenv.rollout.plan import PlanAgent, PlannedEpisode
from agentenv.rollout.store import (
    NOT_SERIALISABLE,
    EpisodeRecord,
    PromptEntry,
    stand_in_record,
)
from agentenv.spec.errors import DocumentError
from agentenv.spec.task import fill_placeholders
from agentenv.tasks.bundle import Task
from agentenv.tasks.context import TaskContext
from agentenv.tasks.run_folder import trajectory_rows
from agentenv.tasks.runner import TaskError, TaskRunner, build_steps
from agentenv.tasks.step import StepError

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
DEFAULT_CONCURRENCY = 64
DEFAULT_TIMEOUT = 600.0
"""Seconds one episode may take (wall clock) before it is recorded as `timeout`."""


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
    try:
        return _build_record(
            ctx, runner, result, episode, status, error, started, duration, record_tools
        )
    except Exception as exc:  # what the episode left cannot make a record: say so, go on
        ended = f" (the episode ended {status})"
        reason = safe_text(f"the episode's record cannot be built: {error_text(exc)}{ended}")
        return error_record(episode, reason, started_at=started, duration_s=duration)


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


def _build_record(
    ctx: TaskContext,
    runner: TaskRunner | None,
    result: Any,
    episode: PlannedEpisode,
    status: str,
    error: str | None,
    started: datetime,
    duration: float,
    record_tools: bool,
) -> EpisodeRecord:
    """The record of a finished episode: its result, steps, prompts, tools, trajectory."""
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
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1 (got {concurrency})")
    envs = envs if envs is not None else EnvironmentCache()
    items = iter(work)

    async def worker() -> None:
        for task, agent, episode in items:  # one shared iterator: each item runs once
            record = await run_episode(
                task, agent, episode, envs=envs, timeout=timeout, record_tools=record_tools
            )
            _hand_over(record, on_record)
            await asyncio.sleep(0)  # an episode that never awaited must not starve the rest

    workers = [asyncio.create_task(worker()) for _ in range(concurrency)]
    try:
        await asyncio.gather(*workers)
    finally:
        for w in workers:
            w.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
