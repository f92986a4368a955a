"""Tasks in upstream AgentEnv's format: its base fields and shapes, env ids resolved the way
it resolves them, its fields we accept but do not act on (a warning) or refuse (a clear
reason, never a schema error), and every problem of a task in one message."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentenv.agents import AgentTurn, make_agent
from agentenv.spec.task import TaskSpec
from agentenv.tasks import TaskContext, TaskError, TaskResult, build_steps, run_task
from agentenv.tasks.bundle import Task
from agentenv.tasks.checking import check_task

ENV = """
apiVersion: agentenv/v1
kind: Environment
name: counter
roles: [{name: user}]
default_role: user
state:
  counters: {}
seed:
  counters:
    - {id: c1, value: 1}
tools:
  - name: get_counter
    crud: {collection: counters, op: get}
"""


def write_bundle(root: Path, tasks: dict[str, Any], aliases: str | None = None) -> Path:
    bundle = root / "b"
    (bundle / "envs" / "counter").mkdir(parents=True)
    (bundle / "envs" / "counter" / "env.yaml").write_text(textwrap.dedent(ENV))
    (bundle / "tasks").mkdir()
    for name, steps in tasks.items():
        (bundle / "tasks" / f"{name}.json").write_text(json.dumps(steps))
    if aliases is not None:
        (bundle / "aliases.toml").write_text(aliases)
    return bundle


async def run_file(path: Path, **kwargs: Any) -> tuple[TaskResult, TaskContext]:
    task = Task.load(path)
    ctx = task.context(**kwargs)
    return await run_task(task.spec, ctx), ctx


def step(result: TaskResult, sid: str) -> Any:
    return next(s for s in result.steps if s.id == sid)


# -- base fields --------------------------------------------------------------------------


def test_depends_on_takes_plain_ids_and_objects() -> None:
    spec = TaskSpec.model_validate(
        [
            {"id": "a", "type": "x"},
            {"id": "b", "type": "x"},
            {"id": "c", "type": "x", "depends_on": ["a", {"task_step_id": "b"}]},
            {"id": "d", "type": "x", "depends_on": []},
        ]
    )
    assert spec.dependencies() == {"a": [], "b": ["a"], "c": ["a", "b"], "d": []}


@pytest.mark.parametrize("value", ["a", {"task_step_id": "a"}])
def test_a_lone_dependency_is_refused_not_read_as_a_list(value: Any) -> None:
    with pytest.raises(ValueError, match=r"depends_on is a list of step ids .* write \["):
        TaskSpec.model_validate(
            [{"id": "a", "type": "x"}, {"id": "b", "type": "x", "depends_on": value}]
        )


def test_the_protocols_integer_version_is_accepted() -> None:
    spec = TaskSpec.model_validate([{"id": "a", "type": "x", "version": 3}])
    assert spec.steps[0].version == 3


async def test_reset_env_does_not_fail_the_task_by_default(tmp_path: Path) -> None:
    bundle = write_bundle(
        tmp_path,
        {
            "t": [
                {"id": "env", "type": "deploy_env", "env_id": "counter"},
                {"id": "reset", "type": "reset_env", "env_id": "elsewhere"},
                {"id": "after", "type": "snapshot_env", "env_id": "counter", "snapshot_id": "s"},
            ],
            "strict": [
                {"id": "env", "type": "deploy_env", "env_id": "counter"},
                {
                    "id": "reset",
                    "type": "reset_env",
                    "env_id": "elsewhere",
                    "fail_task_on_error": True,
                },
                {"id": "after", "type": "snapshot_env", "env_id": "counter"},
            ],
        },
    )
    result, _ = await run_file(bundle / "tasks" / "t.json")
    assert step(result, "reset").status == "failed"
    assert result.status == "passed", result.error  # the protocol's default for reset_env
    assert step(result, "after").output["name"] == "s"  # snapshot_id names the snapshot
    strict, _ = await run_file(bundle / "tasks" / "strict.json")
    assert strict.status == "error" and step(strict, "after").status == "skipped"


# -- deploy_env resolves env_id as the protocol does ----------------------------------------


async def test_deploy_env_finds_the_bundle_env_by_its_id(tmp_path: Path) -> None:
    bundle = write_bundle(
        tmp_path, {"t": [{"id": "env", "type": "deploy_env", "env_id": "counter"}]}
    )
    result, ctx = await run_file(bundle / "tasks" / "t.json")
    assert result.status == "passed", result.error
    assert ctx.env("counter").env.name == "counter"


async def test_deploy_env_finds_an_alias_of_aliases_toml(tmp_path: Path) -> None:
    bundle = write_bundle(
        tmp_path,
        {"t": [{"id": "env", "type": "deploy_env", "env_id": "tally"}]},
        aliases='[envs]\ncounter = ["tally", "count"]\n',
    )
    result, ctx = await run_file(bundle / "tasks" / "t.json")
    assert result.status == "passed", result.error
    assert ctx.env("tally").env.name == "counter"


async def test_deploy_env_finds_the_local_catalog(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    catalog = tmp_path / "catalog"
    write_bundle(catalog, {})
    monkeypatch.setenv("AGENTENV_PATH", str(catalog))
    task = tmp_path / "t.json"
    task.write_text(json.dumps([{"id": "env", "type": "deploy_env", "env_id": "counter"}]))
    result, ctx = await run_file(task)
    assert result.status == "passed", result.error
    assert ctx.env("counter").env.name == "counter"


async def test_an_env_that_cannot_be_found_says_where_it_looked(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path, {"t": [{"id": "env", "type": "deploy_env", "env_id": "nope"}]})
    result, _ = await run_file(bundle / "tasks" / "t.json")
    assert step(result, "env").error.startswith(
        "no environment 'nope' (not in the bundle or its aliases.toml, no such path"
    )


async def test_a_container_built_env_is_refused_by_name(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path, {"t": [{"id": "env", "type": "deploy_env", "env_id": "echo"}]})
    (bundle / "envs" / "echo").mkdir()
    (bundle / "envs" / "echo" / "Dockerfile").write_text("FROM python:3.11\n")
    result, _ = await run_file(bundle / "tasks" / "t.json")
    assert "a container-built MCP server (Dockerfile): deploying those is not supported" in (
        step(result, "env").error
    )


def test_a_bad_aliases_toml_is_a_clear_error(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path, {}, aliases="[envs]\ncounter = 3\n")
    from agentenv.spec.errors import DocumentError
    from agentenv.tasks.bundle import Bundle

    with pytest.raises(DocumentError, match=r"aliases.toml: envs.counter: a list of alias strings"):
        Bundle(bundle).env_aliases()


# -- fields we do not act on ----------------------------------------------------------------


async def test_an_ignored_field_is_reported_once_in_the_result(tmp_path: Path) -> None:
    bundle = write_bundle(
        tmp_path,
        {
            "t": [
                {
                    "id": "env",
                    "type": "deploy_env",
                    "env_id": "counter",
                    "cpu": 2,
                    "memory_mb": 512,
                    "sandbox_type": "local",
                    "gateway_mode": "consistent",
                }
            ]
        },
    )
    result, _ = await run_file(bundle / "tasks" / "t.json")
    assert result.status == "passed", result.error
    assert result.warnings == [
        "steps[0].cpu: ignored: environments run in this process, for as long as the task "
        "run (step 'env')",
        "steps[0].memory_mb: ignored: environments run in this process, for as long as the "
        "task run (step 'env')",
    ]  # sandbox_type local and gateway_mode consistent are what we do anyway


def test_a_field_we_cannot_honour_is_refused_with_its_reason() -> None:
    spec = TaskSpec.model_validate(
        [{"id": "env", "type": "deploy_env", "env_id": "e", "env_state_instance_id": "i-1"}]
    )
    with pytest.raises(TaskError) as info:
        build_steps(spec)
    assert str(info.value) == (
        "steps[0].env_state_instance_id: not supported: attaching to an existing env state "
        "instance is not built (step 'env')"
    )


def test_an_upstream_step_type_we_do_not_build_is_named() -> None:
    spec = TaskSpec.model_validate(
        [{"id": "box", "type": "run_docker_container", "sandbox_name": "b"}]
    )
    [problem] = check_task(spec).problems
    assert str(problem) == (
        "steps[0].type: not supported: 'run_docker_container' is a step type of upstream "
        "AgentEnv that is not built here (step 'box')"
    )


def test_every_problem_of_a_task_comes_in_one_message() -> None:
    spec = TaskSpec.model_validate(
        [
            {"id": "env", "type": "deploy_env", "env_id": "e", "artifact_id": "a"},
            {"id": "ask", "type": "prompt_agent", "prompt": "hi", "user_a2a_url": "http://u"},
            {
                "id": "check",
                "type": "agent_prompt_response_verifier",
                "prompt_id": "ask",
                "criteria": [{"type": "response_regex_present", "pattern": "(", "flags": ["NOPE"]}],
                "score_aggregator": "median",
            },
            {"id": "sum", "type": "aggregate_verifiers", "verifier_ids": ["check", "ghost"]},
        ]
    )
    with pytest.raises(TaskError) as info:
        build_steps(spec)
    message = str(info.value)
    assert message.startswith("6 problems:\n")
    for expected in (
        "steps[0].artifact_id: not supported: deploying an environment from an artifact",
        "steps[1].user_a2a_url: not supported: a remote user is not built",
        "steps[2].criteria[0].pattern: bad regular expression '('",
        "steps[2].criteria[0].flags: 'NOPE' is not a flag of Python's re module",
        "steps[2].score_aggregator: Input should be 'all_pass', 'any_pass', 'weighted_average'",
        "steps[3].verifier_ids[1]: no verifier 'ghost' (verifiers: check)",
    ):
        assert expected in message, message
    assert [p.step_id for p in info.value.problems] == [
        "env",
        "ask",
        "check",
        "check",
        "check",
        "sum",
    ]


# -- prompt_agent and peer_agents -----------------------------------------------------------


async def test_several_conversation_turns_default_to_the_protocols_user(tmp_path: Path) -> None:
    bundle = write_bundle(
        tmp_path,
        {
            "t": [
                {"id": "env", "type": "deploy_env", "env_id": "counter"},
                {"id": "agent", "type": "deploy_agent"},
                {"id": "ask", "type": "prompt_agent", "prompt": "hi", "max_conversation_turns": 2},
            ]
        },
    )
    result, ctx = await run_file(
        bundle / "tasks" / "t.json", agent_factory=lambda req: make_agent("oracle")
    )
    assert "default-agent" in ctx.agents  # the protocol's default agent name
    assert step(result, "ask").error == "no agent 'human_agent' is deployed (default-agent)"


class Recorder:
    """Answers with the names of the peers it was given."""

    def __init__(self, name: str) -> None:
        self.name = name

    async def run_turn(self, turn: AgentTurn) -> str:
        return ",".join(sorted(turn.peers)) or "none"


async def test_peerings_give_each_source_its_own_peers(tmp_path: Path) -> None:
    bundle = write_bundle(
        tmp_path,
        {
            "t": [
                {"id": "env", "type": "deploy_env", "env_id": "counter"},
                {"id": "a", "type": "deploy_agent", "agent_name": "a"},
                {"id": "b", "type": "deploy_agent", "agent_name": "b"},
                {
                    "id": "peers",
                    "type": "peer_agents",
                    "peerings": [{"source_agent_name": "a", "peer_agent_names": ["b"]}],
                },
                {"id": "ask-a", "type": "prompt_agent", "agent_name": "a", "prompt": "?"},
                {"id": "ask-b", "type": "prompt_agent", "agent_name": "b", "prompt": "?"},
            ]
        },
    )
    result, ctx = await run_file(
        bundle / "tasks" / "t.json", agent_factory=lambda req: Recorder(req.agent_name)
    )
    assert result.status == "passed", result.error
    assert ctx.prompts["ask-a"].response == "b"
    assert ctx.prompts["ask-b"].response == "none"
    assert list(step(result, "peers").output["peerings"]) == ["a"]


@pytest.mark.parametrize(
    ("peerings", "error"),
    [
        (
            [
                {"source_agent_name": "a", "peer_agent_names": ["b"]},
                {"source_agent_name": "a", "peer_agent_names": ["b"]},
            ],
            "peerings[1]: source 'a' is listed twice",
        ),
        ([{"source_agent_name": "a", "peer_agent_names": ["a"]}], "peerings[0]: 'a' lists itself"),
        ([{"source_agent_name": "a", "peer_agent_names": ["zed"]}], "no agent 'zed' is deployed"),
    ],
)
async def test_bad_peerings_fail_before_anything_is_served(
    tmp_path: Path, peerings: list[dict[str, Any]], error: str
) -> None:
    bundle = write_bundle(
        tmp_path,
        {
            "t": [
                {"id": "env", "type": "deploy_env", "env_id": "counter"},
                {"id": "a", "type": "deploy_agent", "agent_name": "a"},
                {"id": "b", "type": "deploy_agent", "agent_name": "b"},
                {"id": "peers", "type": "peer_agents", "peerings": peerings},
            ]
        },
    )
    result, ctx = await run_file(
        bundle / "tasks" / "t.json", agent_factory=lambda req: Recorder(req.agent_name)
    )
    assert error in step(result, "peers").error
    assert ctx.agent_peers == {}


def test_the_docs_list_every_upstream_field_we_do_not_act_on() -> None:
    import re

    from agentenv.tasks import STEPS

    text = (Path(__file__).parents[2] / "docs" / "steps.md").read_text(encoding="utf-8")
    table = text.split("## Upstream fields accepted but not acted on")[1]
    documented = set(re.findall(r"^\| `(\w+)` \| `(\w+)` \| (ignored|refused) \|", table, re.M))
    in_code = {
        (name, field, "refused" if rule.refuse else "ignored")
        for name in STEPS.names()
        if STEPS.is_builtin(name)
        for field, rule in STEPS.get(name).unhonoured.items()
    }
    assert documented == in_code


def test_a_bad_task_document_lists_every_problem_when_loaded(tmp_path: Path) -> None:
    from agentenv.tasks.bundle import TaskDocumentError

    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"id": "a b", "type": "x"}, {"type": "y", "depends_on": "a"}]))
    with pytest.raises(TaskDocumentError) as info:
        Task.load(path)
    assert str(info.value) == (
        f"{path}: 3 problems:\n"
        "  steps[0].id: String should match pattern '^[A-Za-z0-9][A-Za-z0-9._-]*$'\n"
        "  steps[1].id: Field required\n"
        "  steps[1].depends_on: depends_on is a list of step ids (or of {task_step_id} "
        "objects), not a single str: write ['a']"
    )
    assert [p.path for p in info.value.problems] == [
        "steps[0].id",
        "steps[1].id",
        "steps[1].depends_on",
    ]
