"""Running an example task with a shortcut agent: a fixed list of tool calls, then an answer.

A shortcut is what an agent that wants the score without the work would do (skip a step,
guess an argument, edit the test instead of the code). `run_with_calls` plays one through
the Python API (a task context and `run_task`, as `agent-env run` does, without its run
folder) and returns the TaskResult, so a test asserts on `passed` and `score` directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentenv.agents import Agent, AgentTurn, ScriptedAgent
from agentenv.tasks import TaskResult, run_task
from agentenv.tasks.bundle import Task
from agentenv.tasks.harbor import harbor_task_spec, is_harbor_task
from agentenv.tasks.runner import TaskError

Call = dict[str, Any]
"""One tool call of a shortcut: `{"tool": ..., "args": {...}}`, optionally `"env_id"`."""


async def load_task(path: Path) -> Task:
    """The task at `path`: a task file (in its bundle when it lies in one's tasks/), or a
    Harbor task directory (its environment built on this machine)."""
    if path.is_dir() and is_harbor_task(path):
        spec = await harbor_task_spec(path)
        return Task(spec=spec, name=f"harbor/{spec.name}", file=path.resolve() / "task.toml")
    return Task.load(path)


def shortcut_agent(calls: list[Call], response: str | None = None) -> ScriptedAgent:
    """An agent that makes `calls` on its first turn of each prompt, then answers
    `response` (by default the reference solution's answer, so that only what the calls
    did, not the wording, decides the score)."""

    async def act(turn: AgentTurn) -> str:
        if turn.conversation_turn == 0:
            for call in calls:
                await turn.tools.call(call["tool"], call.get("args", {}), env_id=call.get("env_id"))
        if response is not None:
            return response
        return turn.solution.response if turn.solution is not None else ""

    return ScriptedAgent(act, reference="shortcut")


async def run_with_agent(task_file: Path, agent: Agent) -> TaskResult:
    """Run the task at `task_file` with every agent it deploys (those it does not pin)
    played by `agent`; the task's result. A task that cannot start is an `error` result,
    as with `agent-env run`."""
    task = await load_task(task_file)
    ctx = task.context(agent_factory=lambda request: agent)
    try:
        return await run_task(task.spec, ctx)
    except TaskError as exc:
        return TaskResult(task=task.name, status="error", passed=False, score=None, error=str(exc))


async def run_with_calls(
    task_file: Path, calls: list[Call], *, response: str | None = None
) -> TaskResult:
    """`run_with_agent` with `shortcut_agent(calls, response)`."""
    return await run_with_agent(task_file, shortcut_agent(calls, response))


def solution_calls(task_file: Path, prompt_id: str = "main") -> list[Call]:
    """The reference solution's calls for `prompt_id`, as shortcut calls (to alter)."""
    task = Task.load(task_file)
    turn = task.spec.solution[prompt_id]
    return [c.model_dump(exclude_none=True) for c in turn.calls]
