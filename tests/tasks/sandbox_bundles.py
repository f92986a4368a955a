"""What the sandbox, verifier and trials tests share: a one-task bundle written to a folder,
a bwrap workspace env for it, and running it with an agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.agents import make_agent
from agentenv.sandbox import BwrapProvider
from agentenv.tasks import TaskContext, TaskResult
from agentenv.tasks.bundle import Task
from agentenv.tasks.run_folder import run_to_folder

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
    """Run the task at `path` with `agent` playing every agent."""
    return await run_to_folder(
        Task.load(path), lambda request: make_agent(agent), run_dir, seed=seed
    )


def step(result: TaskResult, sid: str) -> Any:
    """A step's record in a task result."""
    return next(s for s in result.steps if s.id == sid)
