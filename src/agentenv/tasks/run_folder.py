"""Running one task to a task folder: what `agent-env trials` keeps per agent and task, and
a Python helper (`agent-env run` writes a rollout run folder instead: `rollout.store`).

A task folder holds `<task>/trajectory.jsonl` (every env's records, each with
its `env_id`), `<task>/scores.json` (the TaskResult: status, score, per-verifier scores,
per-step records), `<task>/task.json` (the task as run, seed placeholders filled) and
`<task>/final_state.json` (each env's records at the end). It is written even when the
task fails, so partial scores and the trajectory are kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentenv.agents.base import Agent
from agentenv.spec.task import fill_placeholders
from agentenv.tasks.bundle import Task
from agentenv.tasks.context import DeployedAgentRequest, TaskContext
from agentenv.tasks.runner import TaskError, TaskResult, run_task


def trajectory_rows(ctx: TaskContext) -> list[dict[str, Any]]:
    """Every deployed env's trajectory records as JSON data, with `env_id` added."""
    rows = []
    for env_id, deployed in ctx.envs.items():
        for record in deployed.gateway.instance(deployed.instance).trajectory:
            rows.append({"env_id": env_id, **record.to_json()})
    return rows


def write_run_folder(folder: Path, ctx: TaskContext, result: TaskResult) -> Path:
    """Write one task's files into `folder` (created if needed)."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "trajectory.jsonl").open("w", encoding="utf-8") as out:
        for row in trajectory_rows(ctx):
            out.write(json.dumps(row) + "\n")
    (folder / "scores.json").write_text(result.model_dump_json(indent=2), encoding="utf-8")
    task = ctx.task.model_dump(mode="json", exclude_none=True)
    values = {**ctx.task.seed, **ctx.seed}
    task["steps"] = [fill_placeholders(step, values) for step in task["steps"]]
    (folder / "task.json").write_text(json.dumps(task, indent=2), encoding="utf-8")
    if ctx.usage:
        (folder / "usage.json").write_text(json.dumps(ctx.usage, indent=2), encoding="utf-8")
    final = {env_id: d.snapshot().to_dict() for env_id, d in ctx.envs.items()}
    (folder / "final_state.json").write_text(json.dumps(final, indent=2), encoding="utf-8")
    return folder


async def run_to_folder(
    task: Task,
    make_agent: Callable[[DeployedAgentRequest], Agent | None],
    folder: Path | None,
    *,
    seed: dict[str, Any] | None = None,
) -> tuple[TaskContext, TaskResult]:
    """Run one task with the given agents and (if `folder`) write its run folder.

    A task that cannot even start (a bad document) comes back as an `error` result.
    """
    ctx = task.context(agent_factory=make_agent, seed=dict(seed or {}), run_dir=folder)
    try:
        result = await run_task(task.spec, ctx)
    except TaskError as exc:
        result = TaskResult(
            task=task.name, status="error", passed=False, score=None, error=str(exc)
        )
    result = result.model_copy(update={"task": task.name})
    if folder is not None:
        write_run_folder(folder, ctx, result)
    return ctx, result
