"""Running a task: validate its steps, then run them in waves of the dependency graph.

Steps whose dependencies are met run concurrently (one wave at a time: the generations
stdlib `graphlib`'s TopologicalSorter gives, computed once per pass). Each step has an optional timeout. A failed step with a `retry_config`
sends the run back to its target step (rolling environment state back to what it was
when the target started, for `retry_from_step_id`) at most `max_retries` times. A failed
step with `fail_task_on_error` (the default) stops the task: what is running finishes,
the rest is skipped. Every step's start, end, status, output and error are recorded.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from graphlib import CycleError
from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from agentenv.env.tool import SYSTEM
from agentenv.grading.aggregate import finish_verifier
from agentenv.registry import Registry
from agentenv.spec.task import SolutionTurn, TaskSpec, fill_placeholders
from agentenv.state import Snapshot
from agentenv.tasks.checking import Problem, check_task, describe
from agentenv.tasks.context import TaskContext
from agentenv.tasks.step import STEPS, Score, Step, StepError

StepStatus = Literal["pending", "running", "succeeded", "failed", "timeout", "skipped"]
CLEANUP_TIMEOUT = 15.0
log = logging.getLogger(__name__)
_FAILED = ("failed", "timeout")
_WARNED: set[tuple[str, str]] = set()


class TaskError(ValueError):
    """A task document that cannot run; names every problem, with its step and field."""

    def __init__(self, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.problems = list(problems or [])


class StepRecord(BaseModel):
    """What happened to one step."""

    id: str
    type: str
    status: StepStatus = "pending"
    attempts: int = 0
    started_at: datetime | None = None
    ended_at: datetime | None = None
    output: Any = None
    error: str | None = None


class TaskResult(BaseModel):
    """The outcome of one task run."""

    task: str
    status: Literal["passed", "failed", "error"]
    passed: bool
    score: float | None = Field(description="The aggregate score; None when no verifier ran.")
    scores: dict[str, Score] = Field(default_factory=dict)
    steps: list[StepRecord] = Field(default_factory=list)
    error: str | None = None
    warnings: list[str] = Field(
        default_factory=list,
        description="Fields of the task this runner accepted but did not act on.",
    )


_SOLUTIONS: TypeAdapter[dict[str, SolutionTurn]] = TypeAdapter(dict[str, SolutionTurn])


@dataclass
class _Checkpoint:
    """What a retry goes back to: env states, and which envs, agents, prompts and
    snapshots existed, when a step started."""

    states: dict[str, Snapshot]
    names: tuple[frozenset[str], ...]

    @classmethod
    def take(cls, ctx: TaskContext) -> _Checkpoint:
        return cls(ctx.checkpoint(), tuple(frozenset(r) for r in _registries(ctx)))

    def keys(self, ctx: TaskContext) -> list[tuple[dict[str, Any], frozenset[str]]]:
        return list(zip(_registries(ctx), self.names, strict=True))


def _registries(ctx: TaskContext) -> list[dict[str, Any]]:
    return [ctx.envs, ctx.agents, ctx.prompts, ctx.snapshots]


def build_steps(
    task: TaskSpec, seed: dict[str, Any] | None = None, registry: Registry[type[Step]] = STEPS
) -> list[Step]:
    """Instantiate and check every step (types, fields, structure); TaskError listing
    every problem, each with its path and step (see `tasks.checking`)."""
    checked = check_task(task, seed, registry)
    if checked.problems:
        raise TaskError(describe(checked.problems), checked.problems)
    for warning in checked.warnings:
        key = (task.name, str(warning))
        if key not in _WARNED:  # once per process: rollouts build a task many times
            _WARNED.add(key)
            log.warning("task %s: %s", task.name, warning)
    return checked.steps


_DEPS: dict[int, tuple[TaskSpec, list[Any], dict[str, list[str]]]] = {}
_DEPS_KEPT = 1024


def _dependencies(task: TaskSpec) -> dict[str, list[str]]:
    """`task.dependencies()`, made once per task document (a rollout runs one many times);
    shared: never change it."""
    found = _DEPS.get(id(task))
    if found is None or found[0] is not task or found[1] is not task.steps:
        if len(_DEPS) >= _DEPS_KEPT:
            _DEPS.clear()
        found = _DEPS[id(task)] = (task, task.steps, task.dependencies())
    return found[2]


def verifier_id_of(step: Step) -> str:
    """A verifier step's `verifier_id` (the protocol's field); default: the step id."""
    value = getattr(step.params, "verifier_id", None)
    return value if isinstance(value, str) and value else step.id


def _now() -> datetime:
    return datetime.now(UTC)


class TaskRunner:
    """Runs one task in one context."""

    def __init__(self, task: TaskSpec, ctx: TaskContext, steps: list[Step]) -> None:
        self.task = task
        self.ctx = ctx
        if task.solution:  # the reference solution may use <key> placeholders too
            values = {**task.seed, **ctx.seed}
            raw = fill_placeholders(task.model_dump(mode="json")["solution"], values)
            ctx.task = task.model_copy(update={"solution": _SOLUTIONS.validate_python(raw)})
        self.steps = {s.id: s for s in steps}
        self.order = [s.id for s in steps]
        self.index = {sid: i for i, sid in enumerate(self.order)}
        self.deps = _dependencies(task)
        self.records = {s.id: StepRecord(id=s.id, type=s.spec.type) for s in steps}
        self.retries: dict[str, int] = dict.fromkeys(self.order, 0)
        self.checkpoints: dict[str, _Checkpoint] = {}
        # Only a retry's target is ever gone back to: only its checkpoint is taken.
        self.targets = {
            s.spec.retry_config.target for s in steps if s.spec.retry_config is not None
        }
        self.aborted: str | None = None

    async def run(self) -> TaskResult:
        """Run to the end and summarise; `ctx.cleanups` run at the end, however it ends."""
        budget = 1 + sum(
            s.spec.retry_config.max_retries for s in self.steps.values() if s.spec.retry_config
        )
        try:
            for _ in range(budget):
                retry = await self._pass()
                if retry is None:
                    break
                await self._rewind(*retry)
        finally:
            await self._cleanup()
        return self._result()

    async def _cleanup(self) -> None:
        """Run the context's cleanups, last added first; each is bounded and a failing one
        does not stop the rest (what a task started must not outlive it)."""
        while self.ctx.cleanups:
            cleanup = self.ctx.cleanups.pop()
            try:
                await asyncio.wait_for(cleanup(), CLEANUP_TIMEOUT)
            except Exception as exc:
                log.warning("a task cleanup failed: %s: %s", type(exc).__name__, exc)

    async def _pass(self) -> tuple[str, str] | None:
        pending = [sid for sid in self.order if self.records[sid].status == "pending"]
        for wave in self._waves(pending):
            runnable = []
            for sid in wave:
                if self.aborted or self._blocked(sid):
                    self.records[sid].status = "skipped"
                    self.records[sid].error = self.aborted or "a step it depends on did not succeed"
                else:
                    runnable.append(sid)
            if len(runnable) == 1:  # one step: no task to wrap it in
                await self._run_one(runnable[0])
            else:
                await asyncio.gather(*(self._run_one(sid) for sid in runnable))
            for sid in runnable:
                record, spec = self.records[sid], self.steps[sid].spec
                if record.status not in _FAILED:
                    continue
                config = spec.retry_config
                if config is not None and self.retries[sid] < config.max_retries:
                    self.retries[sid] += 1
                    mode = "rollback" if config.retry_from_step_id else "goto"
                    return config.target, mode
                if self.steps[sid].fails_task and not self.aborted:
                    self.aborted = f"step {sid!r} failed, so the task stopped"
        return None

    def _waves(self, pending: list[str]) -> list[list[str]]:
        """The pending steps in waves of the dependency graph among them, each wave in
        task order: what graphlib's TopologicalSorter gives wave by wave (get_ready, then
        done with the whole wave), computed up front, since the graph does not change
        during a pass. CycleError, as graphlib raises it, for a cycle."""
        left = set(pending)
        waiting = {sid: {d for d in self.deps[sid] if d in left} for sid in pending}
        waves: list[list[str]] = []
        while waiting:
            wave = [sid for sid, deps in waiting.items() if not deps]  # in task order
            if not wave:
                raise CycleError("nodes are in a cycle", sorted(waiting))
            for sid in wave:
                del waiting[sid]
            done = set(wave)
            for deps in waiting.values():
                deps -= done
            waves.append(wave)
        return waves

    def _blocked(self, sid: str) -> bool:
        for dep in self.deps[sid]:
            record = self.records[dep]
            if record.status == "skipped":
                return True
            if record.status in _FAILED and self.steps[dep].fails_task:
                return True
        return False

    async def _rewind(self, target: str, mode: str) -> None:
        checkpoint = self.checkpoints.get(target)
        if checkpoint is not None:
            if mode == "rollback":
                for env_id, snapshot in checkpoint.states.items():
                    deployed = self.ctx.envs.get(env_id)
                    if deployed is not None:
                        await deployed.gateway.restore(SYSTEM, snapshot, instance=deployed.instance)
            # What the re-run steps deployed, prompted or saved goes, so they can redo it.
            for registry, kept in checkpoint.keys(self.ctx):
                for key in [k for k in registry if k not in kept]:
                    del registry[key]
        for sid in self.order[self.index[target] :]:
            record = self.records[sid]
            record.status, record.output, record.error = "pending", None, None
            self.ctx.scores.pop(sid, None)
            self.ctx.outputs.pop(sid, None)

    async def _run_one(self, sid: str) -> None:
        step = self.steps[sid]
        record = self.records[sid]
        record.status, record.attempts, record.started_at = "running", record.attempts + 1, _now()
        record.error = None
        if sid in self.targets:
            self.checkpoints[sid] = _Checkpoint.take(self.ctx)
        timeout = step.spec.timeout_seconds or step.default_timeout
        try:
            async with asyncio.timeout(timeout):  # in this task: no task per step
                output = await step.run(self.ctx)
            if step.is_verifier:
                if not isinstance(output, Score):
                    raise StepError(f"verifier returned {type(output).__name__}, not a Score")
                output = finish_verifier(
                    output,
                    verifier_id_of(step),
                    getattr(step.params, "score_aggregator", None),
                    getattr(step.params, "threshold", 1.0),
                )
                self.ctx.scores[sid] = output
                output = output.model_dump(mode="json")
            record.status = "succeeded"
            record.output = output
            self.ctx.outputs[sid] = output
        except TimeoutError:
            record.status = "timeout"
            record.error = f"took longer than {timeout:g} s" if timeout else "timed out"
        except StepError as exc:
            record.status, record.error = "failed", str(exc)
        except Exception as exc:  # a step's own bug: reported on the step, the run goes on
            record.status, record.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            record.ended_at = _now()

    def _result(self) -> TaskResult:
        from agentenv.grading.aggregate import aggregate_task

        records = [self.records[sid] for sid in self.order]
        verifiers = [s for s in self.steps.values() if s.is_verifier]
        scores = dict(self.ctx.scores)
        for step in verifiers:  # a verifier that failed to run scores 0
            if step.id not in scores and self.records[step.id].status in _FAILED:
                scores[step.id] = Score(
                    score=0.0, passed=False, details={"error": self.records[step.id].error}
                )
        score, passed = aggregate_task(self.task, scores)
        failed = [r for r in records if r.status in _FAILED and self.steps[r.id].fails_task]
        if failed:
            status: Literal["passed", "failed", "error"] = "error"
            passed = False
        elif score is None:
            status, passed = "passed", True
        else:
            status = "passed" if passed else "failed"
        error = None
        if failed:
            error = f"step {failed[0].id!r} {failed[0].status}: {failed[0].error}"
        return TaskResult(
            task=self.task.name,
            status=status,
            passed=passed,
            score=score,
            scores=scores,
            steps=records,
            error=error,
            warnings=[w for s in self.steps.values() for w in s.ignored],
        )


async def run_task(
    task: TaskSpec,
    ctx: TaskContext,
    *,
    registry: Registry[type[Step]] = STEPS,
) -> TaskResult:
    """Validate and run a task in `ctx`; never raises for a failing step (see the result)."""
    steps = build_steps(task, ctx.seed, registry)
    return await TaskRunner(task, ctx, steps).run()
