"""Upstream's sandbox steps (deploy_sandbox, load_artifact by id, collect_artifacts, run_code
of a script artifact, teardown_sandboxes, run_docker_container), each run as a task of a
bundle written to tmp_path (`tasks/x.json` + `artifacts/<name>/...`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.tasks.sandbox_bundles import (
    BOX,
    WORKSPACE_ENV,
    needs_bwrap,
    run,
    step,
    write_bundle,
)

from agentenv.sandbox import SANDBOXES
from agentenv.spec.task import TaskSpec
from agentenv.tasks import TaskError, build_steps


def hello_steps() -> list[dict[str, Any]]:
    """Upstream's hello example: a sandbox, the greeting loaded into it, three criteria."""
    return [
        {**BOX, "sandbox_type": "local"},
        {
            "id": "load",
            "type": "load_artifact",
            "sandbox_name": "box",
            "artifact_id": "greeting",
            "destination_path": "/app/greeting",
            "depends_on": ["box"],
        },
        {
            "id": "hello",
            "type": "verify_sandbox",
            "sandbox_name": "box",
            "base_dir": "/app/greeting",
            "depends_on": ["load"],
            "criteria": [
                {
                    "type": "probe_file_contains",
                    "criterion": "says hello",
                    "paths": ["hello.txt"],
                    "expected": "hel+o",
                },
                {"type": "probe_dir_exists", "criterion": "a folder", "paths": ["/app/greeting"]},
                {
                    "type": "bash_cmd_succeeds",
                    "criterion": "its check passes",
                    "bash_cmd": "grep -q hello hello.txt",
                },
            ],
        },
    ]


# -- the hello flow ------------------------------------------------------------------------


@needs_bwrap
async def test_upstream_hello_flow_passes(tmp_path: Path) -> None:
    task = write_bundle(tmp_path / "b", hello_steps(), {"greeting": {"hello.txt": "hello there\n"}})
    _, result = await run(task)
    assert result.status == "passed", result.error
    assert result.score == 1.0
    assert step(result, "box").output["sandbox_type"] == "bwrap"  # upstream's local: this machine
    assert step(result, "load").output["files"] == ["/app/greeting/hello.txt"]
    rows = result.scores["hello"].details["results"]
    assert [(r["id"], r["result"]) for r in rows] == [
        ("says hello", True),
        ("a folder", True),
        ("its check passes", True),
    ]


@needs_bwrap
async def test_hello_flow_with_goodbye_scores_zero(tmp_path: Path) -> None:
    task = write_bundle(tmp_path / "b", hello_steps(), {"greeting": {"hello.txt": "goodbye\n"}})
    _, result = await run(task)
    assert result.status == "failed"
    assert result.score == 0.0
    rows = {r["id"]: r for r in result.scores["hello"].details["results"]}
    assert rows["says hello"]["result"] is False
    assert rows["says hello"]["score"] == 0.0
    assert rows["its check passes"]["result"] is False
    assert rows["a folder"]["result"] is True  # the folder is there; what it says is wrong


@needs_bwrap
async def test_an_artifact_goes_to_loaded_by_default_and_keeps_its_mode(tmp_path: Path) -> None:
    steps = [
        BOX,
        {"id": "load", "type": "load_artifact", "sandbox_name": "box", "artifact_id": "tool"},
        {
            "id": "v",
            "type": "verify_sandbox",
            "sandbox_name": "box",
            "depends_on": ["load"],
            "criteria": [
                {"type": "bash_cmd_succeeds", "bash_cmd": 'test "$(/loaded/run.sh)" = ran'}
            ],
        },
    ]
    task = write_bundle(tmp_path / "b", steps, {"tool": {"run.sh": "#!/bin/bash\necho ran\n"}})
    (tmp_path / "b" / "artifacts" / "tool" / "run.sh").chmod(0o755)
    _, result = await run(task)
    assert step(result, "load").output["files"] == ["/loaded/run.sh"]
    assert result.status == "passed", result.scores["v"].details["results"]


# -- deploy_sandbox ------------------------------------------------------------------------


@needs_bwrap
async def test_deploying_two_sandboxes_with_one_name_fails(tmp_path: Path) -> None:
    task = write_bundle(tmp_path / "b", [BOX, {**BOX, "id": "again", "depends_on": ["box"]}])
    _, result = await run(task)
    assert step(result, "box").status == "succeeded"
    assert step(result, "again").status == "failed"
    assert "a sandbox named 'box' is already deployed" in step(result, "again").error
    assert result.status == "error"


async def test_an_unknown_sandbox_type_names_our_providers_and_the_entry_point(
    tmp_path: Path,
) -> None:
    task = write_bundle(tmp_path / "b", [{**BOX, "sandbox_type": "modal"}])
    _, result = await run(task)
    assert result.status == "error"
    error = step(result, "box").error
    assert "'modal'" in error
    for name in SANDBOXES.names():
        assert name in error
    assert "agentenv.sandboxes" in error


@needs_bwrap
async def test_a_fallback_chain_takes_the_first_provider_that_runs(tmp_path: Path) -> None:
    task = write_bundle(tmp_path / "b", [{**BOX, "sandbox_type": "modal, bwrap"}])
    _, result = await run(task)
    assert step(result, "box").status == "succeeded", step(result, "box").error
    assert step(result, "box").output["sandbox_type"] == "bwrap"


@pytest.mark.skipif(
    SANDBOXES.get("docker").unavailable() is None, reason="Docker is available here"
)
async def test_container_mode_is_refused_without_docker(tmp_path: Path) -> None:
    container = {**BOX, "sandbox_mode": "container", "image": "python:3.12", "port": 8080}
    task = write_bundle(tmp_path / "b", [container])
    _, result = await run(task)
    assert result.status == "error"
    assert "container mode needs Docker" in step(result, "box").error


async def test_a_network_allowlist_is_refused(tmp_path: Path) -> None:
    policy = {"mode": "allowlist", "allow_hosts": ["example.com"]}
    task = write_bundle(tmp_path / "b", [{**BOX, "network_policy": policy}])
    _, result = await run(task)
    assert result.status == "error"
    assert "allowlists are not built" in step(result, "box").error


def test_run_docker_container_is_refused_at_validation_by_name() -> None:
    spec = TaskSpec.model_validate(
        {"name": "t", "steps": [{"id": "d", "type": "run_docker_container", "image": "x"}]}
    )
    with pytest.raises(TaskError, match="'run_docker_container' is a step type of upstream"):
        build_steps(spec)


# -- teardown_sandboxes --------------------------------------------------------------------


def torn_down_then(use: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        BOX,
        {
            "id": "down",
            "type": "teardown_sandboxes",
            "sandbox_names": ["box", "never-deployed"],
            "depends_on": ["box"],
        },
        {**use, "depends_on": ["down"]},
    ]


@needs_bwrap
async def test_a_command_in_a_torn_down_sandbox_fails_clearly(tmp_path: Path) -> None:
    use = {
        "id": "v",
        "type": "verify_sandbox",
        "sandbox_name": "box",
        "criteria": [{"type": "bash_cmd_succeeds", "bash_cmd": "true"}],
    }
    task = write_bundle(tmp_path / "b", torn_down_then(use))
    _, result = await run(task)
    assert step(result, "down").output == {"torn_down": ["box"], "skipped": ["never-deployed"]}
    assert step(result, "v").status == "failed"
    assert step(result, "v").error == "sandbox 'box' was torn down (teardown_sandboxes)"


@needs_bwrap
async def test_loading_into_a_torn_down_sandbox_fails_clearly(tmp_path: Path) -> None:
    use = {
        "id": "load",
        "type": "load_artifact",
        "sandbox_name": "box",
        "artifact_id": "greeting",
        "destination_path": "/app/greeting",
    }
    task = write_bundle(tmp_path / "b", torn_down_then(use), {"greeting": {"hello.txt": "hi\n"}})
    _, result = await run(task)
    assert step(result, "load").status == "failed"
    assert "torn down" in (step(result, "load").error or "")


@needs_bwrap
async def test_probing_a_torn_down_sandbox_fails_clearly(tmp_path: Path) -> None:
    use = {
        "id": "v",
        "type": "verify_sandbox",
        "sandbox_name": "box",
        "criteria": [{"type": "probe_dir_exists", "paths": ["/app"]}],
    }
    task = write_bundle(tmp_path / "b", torn_down_then(use))
    _, result = await run(task)
    assert step(result, "v").status == "failed"
    assert "torn down" in (step(result, "v").error or "")


def test_teardown_with_fail_task_on_error_true_is_refused_at_validation() -> None:
    spec = TaskSpec.model_validate(
        {
            "name": "t",
            "steps": [
                BOX,
                {
                    "id": "down",
                    "type": "teardown_sandboxes",
                    "sandbox_names": ["box"],
                    "fail_task_on_error": True,
                },
            ],
        }
    )
    with pytest.raises(TaskError, match="teardown_sandboxes never fails its task"):
        build_steps(spec)


def test_teardown_with_nothing_named_is_refused_at_validation() -> None:
    spec = TaskSpec.model_validate(
        {"name": "t", "steps": [{"id": "down", "type": "teardown_sandboxes"}]}
    )
    with pytest.raises(TaskError, match="sandbox_names, agent_names or env_ids"):
        build_steps(spec)


# -- collect_artifacts -> load_artifact ------------------------------------------------------


@needs_bwrap
async def test_collected_files_load_into_another_sandbox(tmp_path: Path) -> None:
    steps = [
        BOX,
        {
            "id": "load",
            "type": "load_artifact",
            "sandbox_name": "box",
            "artifact_id": "greeting",
            "destination_path": "/app/greeting",
            "depends_on": ["box"],
        },
        {
            "id": "collect",
            "type": "collect_artifacts",
            "sandbox_name": "box",
            "base_path": "/app/greeting",
            "artifact_paths": ["hello.txt", "missing.txt"],
            "depends_on": ["load"],
        },
        {**BOX, "id": "second", "sandbox_name": "second", "depends_on": ["collect"]},
        {
            "id": "reload",
            "type": "load_artifact",
            "sandbox_name": "second",
            "artifact_from_step_id": "collect",
            "destination_path": "/loaded/collected",
            "depends_on": ["second"],
        },
        {
            "id": "v",
            "type": "verify_sandbox",
            "sandbox_name": "second",
            "depends_on": ["reload"],
            "criteria": [
                {
                    "type": "probe_file_contains",
                    "paths": ["/loaded/collected/hello.txt"],
                    "expected": "^hello from box$",
                },
                {"type": "probe_file_exists", "paths": ["/app/greeting/hello.txt"]},
            ],
            "score_aggregator": "weighted_average",
        },
    ]
    arts = {"greeting": {"hello.txt": "hello from box"}}
    task = write_bundle(tmp_path / "b", steps, arts)
    _, result = await run(task, tmp_path / "run")
    collected = step(result, "collect").output
    assert collected["missing"] == ["missing.txt"]
    kept = Path(collected["artifacts"]["hello.txt"])
    assert kept == tmp_path / "run" / "artifacts" / "collect" / "hello.txt"
    assert kept.read_text() == "hello from box"
    assert step(result, "reload").output["files"] == ["/loaded/collected/hello.txt"]
    rows = result.scores["v"].details["results"]
    # the second sandbox got the collected file, and nothing else of the first one's
    assert [r["result"] for r in rows] == [True, False]


@needs_bwrap
async def test_loading_from_a_step_that_collected_nothing_fails(tmp_path: Path) -> None:
    steps = [
        BOX,
        {
            "id": "reload",
            "type": "load_artifact",
            "sandbox_name": "box",
            "artifact_from_step_id": "box",
            "depends_on": ["box"],
        },
    ]
    task = write_bundle(tmp_path / "b", steps)
    _, result = await run(task)
    assert step(result, "reload").status == "failed"
    assert "collected no artifacts" in step(result, "reload").error


# -- run_code of a script artifact ---------------------------------------------------------

FIRST = """\
def run(given):
    return {"double": given["args"]["n"] * 2, "earlier": sorted(given["results"])}
"""
SECOND = """\
def run(given):
    return {"sum": given["args"]["n"] + given["results"]["first"]["double"]}
"""


@needs_bwrap
async def test_a_script_artifact_returns_json_and_sees_earlier_results(tmp_path: Path) -> None:
    steps = [
        BOX,
        {
            "id": "one",
            "type": "run_code",
            "sandbox_name": "box",
            "script_artifact_id": "first",
            "args": {"n": 2},
            "result_id": "first",
            "depends_on": ["box"],
        },
        {
            "id": "two",
            "type": "run_code",
            "script_artifact_id": "second",
            "args": {"n": 5},
            "depends_on": ["one"],
        },
    ]
    task = write_bundle(
        tmp_path / "b", steps, {"first": {"run.py": FIRST}, "second": {"run.py": SECOND}}
    )
    _, result = await run(task)
    assert result.status == "passed", result.error
    one = step(result, "one").output
    assert one["result_id"] == "first"
    assert one["result"] == {"double": 4, "earlier": []}
    assert one["sandbox_name"] == "box"
    two = step(result, "two").output
    assert two["result_id"] == "two"  # no result_id: the step's id
    assert two["result"] == {"sum": 9}


@needs_bwrap
async def test_a_script_that_raises_fails_the_step_with_its_stderr(tmp_path: Path) -> None:
    bad = "def run(given):\n    raise ValueError('no tally today')\n"
    steps = [
        BOX,
        {
            "id": "one",
            "type": "run_code",
            "sandbox_name": "box",
            "script_artifact_id": "bad",
            "depends_on": ["box"],
        },
    ]
    task = write_bundle(tmp_path / "b", steps, {"bad": {"run.py": bad}})
    _, result = await run(task)
    record = step(result, "one")
    assert record.status == "failed"
    assert record.error.startswith("script 'run.py' exited 1")
    assert "ValueError: no tally today" in record.error
    assert result.status == "error"


async def test_a_script_artifact_without_python_fails(tmp_path: Path) -> None:
    steps = [{"id": "one", "type": "run_code", "script_artifact_id": "notes"}]
    task = write_bundle(tmp_path / "b", steps, {"notes": {"notes.txt": "no code here\n"}})
    _, result = await run(task)
    assert step(result, "one").status == "failed"
    assert "holds no .py file" in step(result, "one").error


# -- load_artifact into a workspace env -------------------------------------------------------


@needs_bwrap
async def test_an_artifact_loads_into_a_workspace_envs_tree(tmp_path: Path) -> None:
    steps = [
        {"id": "env", "type": "deploy_env", "env_id": "ws", "env": "ws"},
        {
            "id": "load",
            "type": "load_artifact",
            "env_id": "ws",
            "artifact_id": "greeting",
            "destination_path": "/app/sub",
            "depends_on": ["env"],
        },
    ]
    arts = {"greeting": {"hello.txt": "hello\n", "deeper/more.txt": "more\n"}}
    task = write_bundle(tmp_path / "b", steps, arts, {"ws": WORKSPACE_ENV})
    ctx, result = await run(task, tmp_path / "run")
    assert result.status == "passed", result.error
    assert step(result, "load").output["files"] == ["sub/deeper/more.txt", "sub/hello.txt"]
    final = ctx.envs["ws"].snapshot().to_dict()
    files = {r["path"]: r["content"] for r in final["files"] if "content" in r}
    assert files == {
        "README.md": "the seed\n",
        "sub/hello.txt": "hello\n",
        "sub/deeper/more.txt": "more\n",
    }
