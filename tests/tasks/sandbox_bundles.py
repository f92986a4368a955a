"""What the sandbox, verifier and trials tests share: a one-task bundle written to a folder,
a bwrap workspace env for it, and running it with an agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.agents import make_agent
from agentenv.sandbox import BwrapProvider
from agentenv.tasks import TaskContext, TaskResult, run_task
from agentenv.tasks.bundle import Task
from agentenv.tasks.runner import TaskError

NO_BWRAP = BwrapProvider.unavailable()
needs_bwrap = pytest.mark.skipif(
    NO_BWRAP is not None, reason=f"bwrap is not available here: {NO_BWRAP}"
)

WORKSPACE_ENV = """\
apiVersion: agentenv/v1
kind: Environment
name: ws
roles: [{name: agent}]
workspace:
  seed: {files: {"README.md": "the seed\\n"}}
  sandbox: {provider: bwrap, workdir: /app}
"""
"""A workspace env of one file, in bwrap at /app."""

BOX = {"id": "box", "type": "deploy_sandbox", "sandbox_name": "box", "sandbox_mode": "vm"}


def write_bundle(
    root: Path,
    steps: list[dict[str, Any]] | dict[str, Any],
    artifacts: dict[str, dict[str, str]] | None = None,
    envs: dict[str, str] | None = None,
) -> Path:
    """A bundle with one task (a bare list of steps, upstream's form, or a task document);
    `artifacts/<name>/<file>` and `envs/<name>/env.yaml` beside it; the task file's path."""
    (root / "tasks").mkdir(parents=True)
    for name, files in (artifacts or {}).items():
        for rel, text in files.items():
            path = root / "artifacts" / name / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for name, text in (envs or {}).items():
        (root / "envs" / name).mkdir(parents=True)
        (root / "envs" / name / "env.yaml").write_text(text)
    task = root / "tasks" / "x.json"
    task.write_text(json.dumps(steps))
    return task


async def run(
    path: Path,
    run_dir: Path | None = None,
    seed: dict[str, Any] | None = None,
    agent: str = "oracle",
) -> tuple[TaskContext, TaskResult]:
    """Run the task at `path` with `agent` playing every agent (`run_dir`: the task's
    run folder, where steps that keep files write them)."""
    task = Task.load(path)
    ctx = task.context(
        agent_factory=lambda request: make_agent(agent), seed=dict(seed or {}), run_dir=run_dir
    )
    try:
        result = await run_task(task.spec, ctx)
    except TaskError as exc:  # a task that cannot start, as `agent-env run` records it
        result = TaskResult(
            task=task.name, status="error", passed=False, score=None, error=str(exc)
        )
    return ctx, result.model_copy(update={"task": task.name})


def step(result: TaskResult, sid: str) -> Any:
    """A step's record in a task result."""
    return next(s for s in result.steps if s.id == sid)


TWO_FILES = {
    "calls": [
        {"tool": "write_file", "args": {"path": "done.txt", "content": "done\n"}},
        {"tool": "write_file", "args": {"path": "second.txt", "content": "second\n"}},
    ],
    "response": "Wrote both files.",
}
"""A reference solution of two calls (its first half writes one file)."""


def workspace_task(
    criteria: list[dict[str, Any]], solution: dict[str, Any] | None = TWO_FILES
) -> dict[str, Any]:
    """A task on the `ws` env (WORKSPACE_ENV): prompt an agent, then verify_sandbox
    `criteria` on its tree; `solution` is the prompt's reference solution (None: none)."""
    doc: dict[str, Any] = {
        "steps": [
            {"id": "env", "type": "deploy_env", "env_id": "ws", "env": "ws"},
            {"id": "agent", "type": "deploy_agent", "agent_name": "dev", "env_ids": ["ws"]},
            {
                "id": "ask",
                "type": "prompt_agent",
                "prompt_id": "main",
                "agent_name": "dev",
                "prompt": "Write done.txt and second.txt.",
            },
            {"id": "check", "type": "verify_sandbox", "env_id": "ws", "criteria": criteria},
        ]
    }
    if solution is not None:
        doc["solution"] = {"main": solution}
    return doc


def write_workspace_task(root: Path, name: str, doc: dict[str, Any]) -> Path:
    """`doc` as `tasks/<name>.json` of a bundle at `root` with the `ws` env; the task file."""
    (root / "envs" / "ws").mkdir(parents=True, exist_ok=True)
    (root / "envs" / "ws" / "env.yaml").write_text(WORKSPACE_ENV)
    (root / "tasks").mkdir(exist_ok=True)
    (root / "tasks" / f"{name}.json").write_text(json.dumps(doc))
    return root / "tasks" / f"{name}.json"
