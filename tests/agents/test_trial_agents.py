"""The trial agents: `half_of` (the partial agent's half of a solution), and the no-op and
partial agents run on a workspace task written to tmp_path."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.tasks.sandbox_bundles import WORKSPACE_ENV, needs_bwrap

from agentenv.agents import NoopAgent, PartialOracleAgent, make_agent
from agentenv.agents.oracle import half_of
from agentenv.spec.task import SolutionCall
from agentenv.tasks import run_task
from agentenv.tasks.bundle import Task


def bash(command: str, **extra: object) -> SolutionCall:
    return SolutionCall(tool="bash", args={"command": command, **extra})


def write(path: str) -> SolutionCall:
    return SolutionCall(tool="write_file", args={"path": path, "content": path})


def parses(script: str) -> bool:
    done = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    return done.returncode == 0 and not done.stderr


# -- half_of --------------------------------------------------------------------------------


@pytest.mark.parametrize(("count", "kept"), [(2, 1), (3, 1), (4, 2), (5, 2)])
def test_half_of_several_calls_is_their_first_half(count: int, kept: int) -> None:
    calls = [write(f"f{i}.txt") for i in range(count)]
    assert half_of(calls) == calls[:kept]


def test_half_of_no_calls_is_none() -> None:
    assert half_of([]) == []


def test_half_of_one_bash_script_is_its_first_half_cut_where_it_parses() -> None:
    script = (
        "mkdir -p out\n"
        "echo one > out/one\n"
        "if true; then\n"
        "  echo a > out/a\n"
        "  echo b > out/b\n"
        "fi\n"
        "echo c > out/c\n"
        "echo d > out/d\n"
    )
    (call,) = half_of([bash(script, timeout=30)])
    assert call.tool == "bash"
    assert call.args["timeout"] == 30  # the call's other arguments are kept
    # four lines would end inside the `if`: the cut moves up to where bash parses it
    assert call.args["command"] == "mkdir -p out\necho one > out/one\n"
    assert parses(call.args["command"])


def test_half_of_a_script_with_continued_lines_parses() -> None:
    script = (
        "cat data.txt \\\n  | tr A-Z a-z \\\n  | sort > out.txt\nwc -l out.txt\necho done\nexit 0\n"
    )
    (call,) = half_of([bash(script)])
    assert call.args["command"] == "cat data.txt \\\n  | tr A-Z a-z \\\n  | sort > out.txt\n"
    assert parses(call.args["command"])


def test_half_of_does_not_cut_a_heredoc_in_its_middle() -> None:
    script = (
        "set -e\n"
        "cat > notes.txt <<'EOF'\n"
        "line one\n"
        "line two\n"
        "line three\n"
        "EOF\n"
        "echo done > done.txt\n"
        "exit 0\n"
    )
    (call,) = half_of([bash(script)])
    assert call.args["command"] == "set -e\n"
    assert parses(call.args["command"])


def test_half_of_one_line_bash_is_none() -> None:
    assert half_of([bash("echo only")]) == []


def test_half_of_a_single_call_that_is_not_bash_is_none() -> None:
    assert half_of([write("only.txt")]) == []
    assert half_of([SolutionCall(tool="bash", args={"cmd": "echo a\necho b\n"})]) == []


# -- the agents on a task ---------------------------------------------------------------------


TASK = {
    "steps": [
        {"id": "env", "type": "deploy_env", "env_id": "ws", "env": "ws"},
        {"id": "agent", "type": "deploy_agent", "agent_name": "dev", "env_ids": ["ws"]},
        {
            "id": "ask",
            "type": "prompt_agent",
            "prompt_id": "main",
            "agent_name": "dev",
            "prompt": "Write the four files.",
        },
    ],
    "solution": {
        "main": {
            "calls": [
                {"tool": "write_file", "args": {"path": "a.txt", "content": "a"}},
                {"tool": "bash", "args": {"command": "echo b > b.txt"}},
                {"tool": "write_file", "args": {"path": "c.txt", "content": "c"}},
                {"tool": "write_file", "args": {"path": "d.txt", "content": "d"}},
            ],
            "response": "Wrote a, b, c and d.",
        }
    },
}


async def tree_after(tmp_path: Path, agent: str) -> tuple[set[str], object]:
    root = tmp_path / "b"
    (root / "envs" / "ws").mkdir(parents=True)
    (root / "envs" / "ws" / "env.yaml").write_text(WORKSPACE_ENV)
    (root / "tasks").mkdir()
    (root / "tasks" / "t.json").write_text(json.dumps(TASK))
    task = Task.load(root / "tasks" / "t.json")
    ctx = task.context(agent_factory=lambda request: make_agent(agent))
    result = await run_task(task.spec, ctx)
    assert result.status == "passed", result.error
    final = {env_id: d.snapshot().to_dict() for env_id, d in ctx.envs.items()}
    return {r["path"] for r in final["ws"]["files"]}, ctx.prompts["main"].response


def test_the_trial_agents_are_registered() -> None:
    assert isinstance(make_agent("noop"), NoopAgent)
    assert isinstance(make_agent("partial"), PartialOracleAgent)


@needs_bwrap
async def test_the_noop_agent_does_nothing_and_answers_nothing(tmp_path: Path) -> None:
    paths, response = await tree_after(tmp_path, "noop")
    assert paths == {"README.md"}
    assert response == ""


@needs_bwrap
async def test_the_partial_agent_makes_the_first_half_of_the_calls(tmp_path: Path) -> None:
    paths, response = await tree_after(tmp_path, "partial")
    assert paths == {"README.md", "a.txt", "b.txt"}
    assert response == ""


@needs_bwrap
async def test_the_oracle_makes_every_call(tmp_path: Path) -> None:
    paths, response = await tree_after(tmp_path, "oracle")
    assert paths == {"README.md", "a.txt", "b.txt", "c.txt", "d.txt"}
    assert response == "Wrote a, b, c and d."
