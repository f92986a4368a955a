"""A small bundle written in tmp_path for rollout tests: a counter environment, a task the
oracle passes, one it fails (wrong reference solution), one it cannot do (no solution),
and a two-environment task."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

COUNTER_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: counter
roles: [{name: agent}, {name: auditor}]
default_role: agent
state:
  counters:
    schema:
      type: object
      required: [id, value]
      properties:
        id: {type: string}
        value: {type: integer}
seed:
  counters:
    - {id: c1, value: 0}
tools:
  - module: counter_tools.py
  - name: get_counter
    crud: {collection: counters, op: get}
"""

COUNTER_TOOLS = '''
import time

from agentenv import ToolContext, ToolError, tool


@tool
def bump(ctx: ToolContext, amount: int, counter_id: str = "c1") -> dict:
    """Add to a counter.

    Args:
        amount: How much to add (positive).
        counter_id: Which counter.
    """
    if amount <= 0:
        raise ToolError("amount must be positive")
    counter = ctx.state.require("counters", counter_id)
    return ctx.state.update("counters", counter_id, {"value": counter["value"] + amount})


@tool(kind="read", blocking=True)
def nap(ctx: ToolContext, seconds: float) -> dict:
    """Sleep (blocking code, run off the event loop).

    Args:
        seconds: How long.
    """
    time.sleep(seconds)
    return {"slept": seconds}
'''

BUMP_TASK = """
name: bump
description: Bump the counter to 3.
steps:
  - {id: env, type: deploy_env, env_id: main, env: counter}
  - {id: agent, type: deploy_agent, agent_name: worker, system_prompt: You are careful.}
  - {id: p1, type: prompt_agent, prompt: "Bump counter <counter> by 3."}
  - id: check
    type: env_outcome_verifier
    checks:
      - {collection: counters, key: c1, field: value, equals: 3}
seed: {counter: c1}
solution:
  p1:
    calls:
      - {tool: bump, args: {amount: 1}}
      - {tool: bump, args: {amount: -5}}
      - {tool: bump, args: {amount: 2}}
      - {tool: get_counter, args: {id: c1}}
    response: "Done: the counter is 3."
"""

WRONG_TASK = """
name: wrong
description: The reference solution bumps by 2, the check wants 3 (the oracle fails).
steps:
  - {id: env, type: deploy_env, env_id: main, env: counter}
  - {id: agent, type: deploy_agent, agent_name: worker}
  - {id: p1, type: prompt_agent, prompt: "Bump the counter by 3."}
  - id: check
    type: env_outcome_verifier
    checks:
      - {collection: counters, key: c1, field: value, equals: 3}
      - {collection: counters, key: c1, field: value, gte: 1}
solution:
  p1:
    calls:
      - {tool: bump, args: {amount: 2}}
    response: "Bumped by 2."
"""

TWO_ENVS_TASK = """
name: two
description: Two counters, one agent reaching both (tools named <env>__<tool>).
steps:
  - {id: left, type: deploy_env, env_id: left, env: counter}
  - {id: right, type: deploy_env, env_id: right, env: counter}
  - {id: agent, type: deploy_agent, agent_name: worker}
  - {id: p1, type: prompt_agent, prompt: "Bump left by 1 and right by 2."}
  - {id: p2, type: prompt_agent, prompt: "Now bump right by 1 more."}
  - id: check
    type: env_outcome_verifier
    env_id: right
    checks:
      - {collection: counters, key: c1, field: value, equals: 3}
solution:
  p1:
    calls:
      - {tool: bump, env_id: left, args: {amount: 1}}
      - {tool: bump, env_id: right, args: {amount: 2}}
    response: "Left 1, right 2."
  p2:
    calls:
      - {tool: bump, env_id: right, args: {amount: 1}}
    response: "Right is 3."
"""


def write_bundle(root: Path, name: str = "counters", tasks: dict[str, str] | None = None) -> Path:
    """A bundle folder with the counter env and the given tasks (default: bump, wrong)."""
    bundle = root / name
    env_dir = bundle / "envs" / "counter"
    env_dir.mkdir(parents=True)
    (env_dir / "env.yaml").write_text(textwrap.dedent(COUNTER_ENV))
    (env_dir / "counter_tools.py").write_text(textwrap.dedent(COUNTER_TOOLS))
    (bundle / "tasks").mkdir()
    for task_name, text in (tasks or {"bump": BUMP_TASK, "wrong": WRONG_TASK}).items():
        (bundle / "tasks" / f"{task_name}.yaml").write_text(textwrap.dedent(text))
    return bundle


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """tmp_path/counters: tasks bump (the oracle passes) and wrong (the oracle fails)."""
    return write_bundle(tmp_path)


@pytest.fixture(scope="session")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder of the oracle on bump, wrong and two (two repeats each), made once."""
    from agentenv.rollout import LocalRunner, RolloutPlan

    root = tmp_path_factory.mktemp("oracle-run")
    bundle = write_bundle(
        root, tasks={"bump": BUMP_TASK, "wrong": WRONG_TASK, "two": TWO_ENVS_TASK}
    )
    folder = root / "run"
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=2)
    summary = LocalRunner(plan, folder).run_sync()
    assert summary.ran == 6 and summary.errors == 0
    return folder


SLEEPY_TASK = """
name: sleepy
description: The reference solution naps longer than the episode may take.
steps:
  - {id: env, type: deploy_env, env_id: main, env: counter}
  - {id: agent, type: deploy_agent, agent_name: worker}
  - {id: p1, type: prompt_agent, prompt: "Take a nap."}
solution:
  p1:
    calls:
      - {tool: nap, args: {seconds: 2}}
    response: "Rested."
"""

NO_SOLUTION_TASK = """
name: unsolved
description: No reference solution, so the oracle cannot play it (an error).
steps:
  - {id: env, type: deploy_env, env_id: main, env: counter}
  - {id: agent, type: deploy_agent, agent_name: worker}
  - {id: p1, type: prompt_agent, prompt: "Do something."}
"""


TASKS = {
    "bump": BUMP_TASK,
    "wrong": WRONG_TASK,
    "two": TWO_ENVS_TASK,
    "sleepy": SLEEPY_TASK,
    "unsolved": NO_SOLUTION_TASK,
}


@pytest.fixture
def make_bundle(tmp_path: Path):  # type: ignore[no-untyped-def]
    """make_bundle("bump", "sleepy", name="b2"): a bundle with these tasks (of TASKS)."""

    def make(*names: str, name: str = "counters") -> Path:
        return write_bundle(tmp_path, name, {n: TASKS[n] for n in names})

    return make


CHAT_TASK = """
name: chat
description: A conversation with a simulated user, who also calls a tool of its own.
steps:
  - {id: env, type: deploy_env, env_id: main, env: counter}
  - {id: helper, type: deploy_agent, agent_name: helper, role: agent}
  - id: user
    type: deploy_agent
    agent_name: sam
    role: auditor
    agent: simulated-user
    system_prompt: You want the counter at 3.
    agent_config:
      script:
        - say: "Please add one more."
        - say: "I added one myself. Thanks!"
          calls: [{tool: bump, args: {amount: 1}}]
          stop: true
  - id: talk
    type: prompt_agent
    prompt_id: chat
    agent_name: helper
    user_agent_name: sam
    max_conversation_turns: 4
    prompt: "Hi, bump the counter please."
  - id: check
    type: env_outcome_verifier
    checks:
      - {collection: counters, key: c1, field: value, equals: 2}
solution:
  chat:
    calls:
      - {tool: bump, args: {amount: 1}}
    response: "Bumped."
"""
TASKS["chat"] = CHAT_TASK
