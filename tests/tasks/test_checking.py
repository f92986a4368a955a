"""A reference solution keyed by a prompt id no `prompt_agent` step sends is a document
problem at `solution.<key>` (with the prompt ids, and the closest one), found by the check
that `agent-env validate`, `run` and `rollout` share; prompt ids that are only known when
the task runs (a `<key>` placeholder) are not judged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentenv.spec.task import TaskSpec
from agentenv.tasks.checking import check_task
from agentenv.tasks.runner import TaskError, build_steps
from agentenv.tasks.validation import validate_task_file

DESK = Path(__file__).parents[2] / "examples" / "bundles" / "support-desk"


def task(solution: dict[str, Any], prompt_id: str | None = "main", **seed: Any) -> TaskSpec:
    ask: dict[str, Any] = {"id": "ask", "type": "prompt_agent", "prompt": "Say hi."}
    if prompt_id is not None:
        ask["prompt_id"] = prompt_id
    return TaskSpec.model_validate(
        {
            "name": "hi",
            "seed": seed,
            "steps": [
                {"id": "deploy", "type": "deploy_env", "env_id": "desk"},
                {"id": "agent", "type": "deploy_agent", "agent_name": "a", "env_ids": ["desk"]},
                ask,
                {"id": "second", "type": "prompt_agent", "prompt_id": "follow_up", "prompt": "?"},
            ],
            "solution": solution,
        }
    )


def test_a_mistyped_solution_key_names_the_prompt_ids_and_the_closest() -> None:
    [problem] = check_task(task({"mian": {"response": "hi"}})).problems
    assert problem.path == "solution.mian"
    assert "no prompt_agent step sends prompt_id 'mian'" in problem.message
    assert "(prompt ids: main, follow_up)" in problem.message
    assert problem.message.endswith("did you mean 'main'?")


def test_run_and_rollout_refuse_it_too() -> None:
    with pytest.raises(TaskError, match=r"solution\.mian: no prompt_agent step"):
        build_steps(task({"main": {}, "mian": {}}))


def test_a_key_far_from_every_prompt_id_gets_no_guess() -> None:
    [problem] = check_task(task({"zzz": {}})).problems
    assert "did you mean" not in problem.message


def test_keys_that_match_pass_and_a_step_id_is_a_prompt_id() -> None:
    assert check_task(task({"main": {}, "follow_up": {}})).ok
    assert check_task(task({"ask": {}}, prompt_id=None)).ok
    [problem] = check_task(task({"main": {}}, prompt_id=None)).problems
    assert (
        "did you mean" not in problem.message and "(prompt ids: ask, follow_up)" in problem.message
    )


def test_a_placeholder_prompt_id_is_not_judged() -> None:
    assert check_task(task({"anything": {}}, prompt_id="<which>", which="main")).ok


def test_validate_reports_it_in_the_task_file(tmp_path: Path) -> None:
    source = (DESK / "tasks" / "resolve-billing.yaml").read_text(encoding="utf-8")
    assert "\n  main:\n" in source and "prompt_id: main" in source
    path = tmp_path / "resolve-billing.yaml"
    path.write_text(source.replace("\n  main:\n", "\n  mian:\n"), encoding="utf-8")
    report = validate_task_file(path)
    assert [p.path for p in report.problems] == ["solution.mian"], report.problems
    assert "did you mean 'main'?" in report.problems[0].message
