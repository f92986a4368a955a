"""`agent-env validate` of tasks: a bundle, a task file or `.` from a bundle folder; each
document checked, then each reference solution run by the oracle (it must pass); a failing
solution exits 1 naming the task and its failed checks; `--no-solutions` skips them."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.tasks.sandbox_bundles import needs_bwrap
from typer.testing import CliRunner

from agentenv.cli import app

EXAMPLES = Path(__file__).parents[2] / "examples" / "bundles"
SUPPORT_DESK = EXAMPLES / "support-desk"


def validate(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["validate", *map(str, args)])
    return result.exit_code, " ".join(result.output.split())  # rich wraps long lines


def desk_copy(tmp_path: Path) -> Path:
    """support-desk copied (its envs/ link followed) to tmp_path, to be broken there."""
    bundle = tmp_path / "desk"
    shutil.copytree(SUPPORT_DESK, bundle)
    return bundle


def edit_task(path: Path, change: Callable[[dict[str, Any]], object]) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def test_a_bundle_whose_solutions_pass_validates() -> None:
    code, out = validate(SUPPORT_DESK)
    assert code == 0, out
    assert out.count("solution: the oracle passes (score 1.00") == 2
    assert "2 task files, 2 valid; solutions: 2 pass, 0 fail" in out


def test_a_task_file_validates_with_its_solution() -> None:
    code, out = validate(SUPPORT_DESK / "tasks" / "resolve-billing.yaml")
    assert code == 0, out
    assert "ok " in out and "resolve-billing.yaml (5 steps)" in out
    assert "solution: the oracle passes" in out


def test_dot_from_inside_a_bundle(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(SUPPORT_DESK)
    code, out = validate(".")
    assert code == 0, out
    assert "tasks/escalate-refund.yaml" in out and "tasks/resolve-billing.yaml" in out
    assert "solutions: 2 pass" in out


@needs_bwrap
def test_a_harbor_task_directory_validates_with_its_solution() -> None:
    code, out = validate(EXAMPLES.parent / "harbor" / "word-stats")
    assert code == 0, out
    assert "word-stats (4 steps)" in out and "solution: the oracle passes" in out


def test_a_solution_that_fails_exits_1_naming_the_task_and_its_checks(tmp_path: Path) -> None:
    bundle = desk_copy(tmp_path)
    task = bundle / "tasks" / "resolve-billing.yaml"

    def never_close(data: dict[str, Any]) -> None:
        calls = data["solution"]["main"]["calls"]
        data["solution"]["main"]["calls"] = [c for c in calls if c["tool"] != "close_ticket"]

    edit_task(task, never_close)
    code, out = validate(bundle)
    assert code == 1, out
    assert "solution fails" in out and "resolve-billing.yaml" in out
    assert "the oracle does not pass task desk/resolve-billing: failed, score" in out
    assert (
        "failed: outcome/state: T-1042 closed: tickets[T-1042].status is 'open', "
        "expected == 'closed'" in out
    )
    assert "failed: outcome/trajectory: refund before closing" in out
    assert "solutions: 1 pass, 1 fail" in out
    # the document itself is fine: --no-solutions passes it
    code, out = validate(bundle, "--no-solutions")
    assert code == 0, out
    assert "solutions not run (--no-solutions)" in out


def test_a_task_without_a_solution_is_a_warning(tmp_path: Path) -> None:
    bundle = desk_copy(tmp_path)
    edit_task(bundle / "tasks" / "escalate-refund.yaml", lambda data: data.pop("solution"))
    code, out = validate(bundle / "tasks" / "escalate-refund.yaml")
    assert code == 0, out
    assert "warning: no reference solution" in out
    assert "solutions: 0 pass, 0 fail, 1 without one" in out


def test_a_document_error_names_its_file_and_path(tmp_path: Path) -> None:
    bundle = desk_copy(tmp_path)

    def misspell(data: dict[str, Any]) -> None:
        data["steps"][1]["agent_nmae"] = data["steps"][1].pop("agent_name")

    edit_task(bundle / "tasks" / "resolve-billing.yaml", misspell)
    code, out = validate(bundle)
    assert code == 1, out
    assert f"invalid {bundle / 'tasks' / 'resolve-billing.yaml'}" in out
    assert "steps[1]" in out and "agent_nmae" in out
    assert "2 task files, 1 valid" in out
    # an invalid document is not run; the valid one still is
    assert "solutions: 1 pass, 0 fail" in out


SLOW_ENV = """\
apiVersion: agentenv/v1
kind: Environment
name: slow
version: 0.1.0
state:
  notes: {key: id}
tools:
  - module: tools.py
"""

SLOW_TOOLS = '''\
import asyncio

from agentenv import tool


@tool
async def nap(seconds: float) -> dict:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return {"slept": seconds}
'''

SLOW_TASK = """\
steps:
  - {id: deploy, type: deploy_env, env_id: box, env: slow}
  - {id: agent, type: deploy_agent, agent_name: solver, env_ids: [box]}
  - {id: ask, type: prompt_agent, prompt_id: main, agent_name: solver, prompt: Take a nap.}
solution:
  main:
    calls:
      - {tool: nap, args: {seconds: 30}}
    response: slept
"""


def test_a_solution_past_its_timeout_fails(tmp_path: Path) -> None:
    env = tmp_path / "b" / "envs" / "slow"
    env.mkdir(parents=True)
    (env / "env.yaml").write_text(SLOW_ENV, encoding="utf-8")
    (env / "tools.py").write_text(SLOW_TOOLS, encoding="utf-8")
    (tmp_path / "b" / "tasks").mkdir()
    (tmp_path / "b" / "tasks" / "nap.yaml").write_text(SLOW_TASK, encoding="utf-8")
    code, out = validate(tmp_path / "b", "--timeout", "0.5")
    assert code == 1, out
    assert "the oracle does not pass task b/nap: timeout" in out
    assert "the episode took longer than 0.5 s" in out


def test_an_environment_that_does_not_load_makes_its_tasks_invalid(tmp_path: Path) -> None:
    bundle = desk_copy(tmp_path)
    env = bundle / "envs" / "support-desk" / "env.yaml"
    text = env.read_text(encoding="utf-8")
    assert "  mode: stepped" in text
    env.write_text(text.replace("  mode: stepped", "  mode: steped"), encoding="utf-8")
    code, out = validate(bundle)
    assert code == 1, out
    assert f"invalid {bundle / 'tasks' / 'resolve-billing.yaml'}: 1 problem" in out
    assert (
        "steps[0].env: environment 'support-desk' does not load: "
        f"{env}: clock.mode: Input should be 'stepped' or 'wall' (got 'steped')" in out
    )
    assert "2 task files, 0 valid; solutions: 0 pass, 0 fail" in out
    assert "solution fails" not in out


def test_a_mistyped_solution_key_is_a_document_problem(tmp_path: Path) -> None:
    bundle = desk_copy(tmp_path)
    task = bundle / "tasks" / "resolve-billing.yaml"
    edit_task(task, lambda data: data.update(solution={"mian": data["solution"]["main"]}))
    code, out = validate(task)
    assert code == 1, out
    assert f"invalid {task}: 1 problem" in out
    assert "solution.mian: no prompt_agent step sends prompt_id 'mian'" in out
    assert "(prompt ids: main); did you mean 'main'?" in out
    assert "no reference solution reached the oracle" not in out


def test_a_mistyped_key_in_a_solutions_file_names_that_file(tmp_path: Path) -> None:
    bundle = desk_copy(tmp_path)
    task = bundle / "tasks" / "resolve-billing.yaml"
    solution: dict[str, Any] = {}
    edit_task(task, lambda data: solution.update(data.pop("solution")))
    (bundle / "solutions").mkdir()
    found = bundle / "solutions" / "resolve-billing.yaml"
    found.write_text(yaml.safe_dump({"mian": solution["main"]}), encoding="utf-8")
    code, out = validate(bundle)
    assert code == 1, out
    assert f"{found}: mian: no prompt_agent step sends prompt_id 'mian'" in out
    assert "did you mean 'main'?" in out
    assert "2 task files, 1 valid; solutions: 1 pass, 0 fail" in out
