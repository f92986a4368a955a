"""Tasks written for upstream AgentEnv, end to end: our upstream-style example bundle runs
and passes, `agent-env validate` checks task files, and upstream's own example bundles
(read from its sdist, when it is unpacked on this machine) validate as far as the step
types we build go."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentenv.cli import app
from agentenv.rollout.store import RolloutStore
from agentenv.spec.loader import read_document
from agentenv.spec.task import TaskSpec
from agentenv.tasks.checking import NOT_BUILT_STEP_TYPES, check_task
from agentenv.tasks.validation import validate_bundle

BUNDLE = Path(__file__).parents[2] / "examples" / "bundles" / "upstream-style"
UPSTREAM_EXAMPLES = Path(
    os.environ.get(
        "AGENTENV_UPSTREAM_EXAMPLES",
        # where tests/conformance/upstream_venv.py unpacks upstream's framework source
        str(
            Path(__file__).parents[2]
            / ".venv-upstream/src/agentenv_framework-0.9.1364/src/agent_env/examples"
        ),
    )
)
runner = CliRunner()


def test_the_example_is_in_upstreams_format() -> None:
    for path in (BUNDLE / "tasks").glob("*.json"):
        steps = json.loads(path.read_text())
        assert isinstance(steps, list), path  # a bare array of steps, as upstream writes them
        for step in steps:
            for dep in step.get("depends_on", []):
                assert isinstance(dep, str | dict)
    assert (BUNDLE / "aliases.toml").is_file()
    assert (BUNDLE / "artifacts" / "check_order" / "verify.py").is_file()


def test_the_oracle_passes_every_task_of_the_upstream_style_bundle(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(BUNDLE), "--agent", "oracle", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 passed," in result.output and "mean score 1.00" in result.output
    # The timeline counts the agent's turns and calls; the verify.py's calls are listed,
    # marked `v`, and not counted.
    verbose = runner.invoke(app, ["run", str(BUNDLE), "-v", "--out", str(tmp_path / "v")])
    assert "oracle on upstream-style/buy-a-book   1 turn, 1 call, 0 denied" in verbose.output
    assert "  v 09:00:05 list_orders U-001" in verbose.output
    record = {r.task: r for r in RolloutStore(out).records()}["upstream-style/buy-a-book"]
    assert record.status == "passed" and record.score == 1.0
    scores = record.model_dump(mode="json")
    # the verify.py rows and the response criteria rows are pooled by aggregate_verifiers
    pooled = scores["scores"]["score"]["details"]
    assert pooled["source_verifier_ids"] == ["bought", "answered"]
    assert [r["id"] for r in pooled["results"][:2]] == ["one-copy", "paid"]
    assert scores["scores"]["bought"]["details"]["verifier_id"] == "bought"
    # a field we accept but do not act on is reported once, in the run folder
    assert scores["warnings"] == [
        "steps[0].ttl_seconds: ignored: environments run in this process, for as long as "
        "the task run (step 'env')"
    ]
    # the verifier's own MCP calls go through the gateway, recorded under its name
    calls = [r for r in record.trajectory if r["kind"] == "call"]
    assert calls[0]["tool"] == "place_order"
    assert [r["tool"] for r in calls[1:]] == ["list_orders", "get_customer"]


def test_validate_checks_a_bundles_tasks() -> None:
    result = runner.invoke(app, ["validate", str(BUNDLE)])
    assert result.exit_code == 0, result.output
    assert "ok" in result.output and "buy-a-book.json (6 steps)" in result.output
    assert "warning: steps[0].ttl_seconds: ignored" in result.output
    assert "2 task files, 2 valid" in result.output


def test_validate_lists_every_problem_of_a_task_file_with_its_path(tmp_path: Path) -> None:
    bundle = tmp_path / "b"
    (bundle / "tasks").mkdir(parents=True)
    task = [
        {"id": "env", "type": "deploy_env", "env_id": "nowhere", "cpu": 2},
        {"id": "ask", "type": "prompt_agent", "prompt": "hi", "depends_on": ["env"]},
        {
            "id": "check",
            "type": "agent_prompt_response_verifier",
            "prompt_id": "ask",
            "depends_on": ["ask", "ghost"],
            "criteria": [{"type": "response_sounds_nice"}, {"type": "response_contains"}],
        },
        {"id": "box", "type": "run_docker_container", "sandbox_name": "box"},
        {"id": "v", "type": "env_outcome_verifier", "env_id": "env", "file_artifact_id": "nope"},
    ]
    (bundle / "tasks" / "bad.json").write_text(json.dumps(task))
    result = runner.invoke(app, ["validate", str(bundle / "tasks" / "bad.json")])
    assert result.exit_code == 1
    out = result.output
    assert "bad.json: 6 problems" in out, out
    assert "steps[2].depends_on[1].task_step_id: no step 'ghost' (step 'check')" in out
    assert "steps[2].criteria[0].type: Input tag 'response_sounds_nice'" in out
    assert "steps[2].criteria[1].needles: Field required (step 'check')" in out
    assert (
        "steps[3].type: not supported: 'run_docker_container' is a step type of upstream "
        "AgentEnv that is not built here (step 'box')" in out
    )
    assert "steps[0].env_id: no environment 'nowhere'" in out
    assert "steps[4].file_artifact_id: no verifier script for artifact 'nope'" in out
    assert "warning: steps[0].cpu: ignored: environments run in this process" in out
    lines = [line.strip() for line in out.splitlines()[1:7]]
    assert [line.split(".")[0].split(":")[0] for line in lines] == [
        "steps[0]",
        "steps[2]",
        "steps[2]",
        "steps[2]",
        "steps[3]",
        "steps[4]",
    ]


def test_validate_still_checks_an_environment_folder() -> None:
    env = Path(__file__).parents[2] / "examples" / "envs" / "support-desk"
    result = runner.invoke(app, ["validate", str(env)])
    assert result.exit_code == 0, result.output
    assert "ok support-desk" in result.output


# -- upstream's own example bundles (from its sdist, never committed here) ------------------


def _upstream_tasks() -> list[Path]:
    if not UPSTREAM_EXAMPLES.is_dir():
        return []
    return sorted(UPSTREAM_EXAMPLES.glob("*/tasks/*.json"))


def _built_only(path: Path) -> bool:
    steps = read_document(path)
    return all(step.get("type") not in NOT_BUILT_STEP_TYPES for step in steps)


@pytest.mark.skipif(not _upstream_tasks(), reason="upstream's sdist is not unpacked here")
@pytest.mark.parametrize(
    "path",
    [p for p in _upstream_tasks() if _built_only(p)],
    ids=lambda p: f"{p.parent.parent.name}/{p.stem}",
)
def test_upstream_example_tasks_of_built_step_types_validate(path: Path) -> None:
    steps = read_document(path)
    checked = check_task(TaskSpec.model_validate({"name": path.stem, "steps": steps}))
    assert checked.problems == [], [str(p) for p in checked.problems]
    # and their bundles too: envs from upstream folders run as processes here, no Docker
    [report] = [r for r in validate_bundle(path.parent.parent) if r.path == path]
    assert report.problems == [], [str(p) for p in report.problems]


@pytest.mark.skipif(not _upstream_tasks(), reason="upstream's sdist is not unpacked here")
def test_every_upstream_example_task_uses_only_built_step_types() -> None:
    assert [p for p in _upstream_tasks() if not _built_only(p)] == []


UPSTREAM_PYTHON = Path(__file__).parents[2] / ".venv-upstream" / "bin" / "python"


@pytest.mark.skipif(
    not (UPSTREAM_EXAMPLES / "echo-mcp").is_dir(), reason="upstream's sdist is not unpacked here"
)
@pytest.mark.parametrize("python", ["ours", "upstream"])
def test_upstreams_echo_task_and_verifier_run_unchanged_against_our_env(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, python: str
) -> None:
    """Upstream's own task file and verify.py (written for the MCP SDK 1.x), with its
    Docker-built echo server swapped for an env document of ours; run by our Python (MCP
    SDK 2.x) and by upstream's protocol virtualenv (1.x) when it is there."""
    if python == "upstream" and not UPSTREAM_PYTHON.is_file():
        pytest.skip("upstream's protocol virtualenv (.venv-upstream) is not here")
    source = UPSTREAM_EXAMPLES / "echo-mcp"
    bundle = tmp_path / "echo-mcp"
    (bundle / "tasks").mkdir(parents=True)
    (bundle / "tasks" / "smoke.json").write_text((source / "tasks" / "smoke.json").read_text())
    (bundle / "artifacts" / "check_echo").mkdir(parents=True)
    script = (source / "artifacts" / "check_echo" / "verify.py").read_text()
    (bundle / "artifacts" / "check_echo" / "verify.py").write_text(script)
    env = bundle / "envs" / "echo"
    env.mkdir(parents=True)
    (env / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: echo\nstate: {}\n"
        "tools:\n  - module: tools.py\n"
    )
    (env / "tools.py").write_text(
        "from agentenv import ToolContext, tool\n\n\n@tool\n"
        "def echo(ctx: ToolContext, text: str) -> str:\n"
        '    """Return the text it is sent."""\n    return text\n'
    )
    if python == "upstream":
        monkeypatch.setenv("AGENTENV_VERIFY_PYTHON", str(UPSTREAM_PYTHON))
    else:
        monkeypatch.delenv("AGENTENV_VERIFY_PYTHON", raising=False)
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(bundle), "--agent", "oracle", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 passed," in result.output and "mean score 1.00" in result.output
    (record,) = RolloutStore(out).records()
    scores = record.model_dump(mode="json")
    assert scores["scores"]["echoes"]["details"]["results"][0]["id"] == "echoes"
