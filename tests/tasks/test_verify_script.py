"""env_outcome_verifier with `file_artifact_id`: the artifact's verify(mcp_url) runs in a
child process against the env served over MCP on loopback, as the protocol's verifier
scripts do; bad scripts fail the step with a clear reason."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentenv.tasks import TaskContext, TaskResult, run_task
from agentenv.tasks.bundle import Task

ENV = """
apiVersion: agentenv/v1
kind: Environment
name: counter
roles: [{name: user}, {name: admin}]
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

CALLS_A_TOOL = """
import json
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def verify(mcp_url):
    async with streamable_http_client(mcp_url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool("get_counter", {"id": "c1"})
    text = "".join(getattr(part, "text", "") for part in result.content)
    value = json.loads(text).get("value")
    print("noise on stdout is fine")
    return [
        {"id": "is-one", "result": value == 1, "description": f"c1 is {value}"},
        {"id": "is-two", "result": value == 2, "description": f"c1 is {value}", "weight": 3},
    ]
"""


def bundle_with(tmp_path: Path, script: str, **verifier: Any) -> Path:
    bundle = tmp_path / "b"
    (bundle / "envs" / "counter").mkdir(parents=True)
    (bundle / "envs" / "counter" / "env.yaml").write_text(textwrap.dedent(ENV))
    (bundle / "artifacts" / "check").mkdir(parents=True)
    (bundle / "artifacts" / "check" / "verify.py").write_text(textwrap.dedent(script))
    (bundle / "tasks").mkdir()
    steps = [
        {"id": "env", "type": "deploy_env", "env_id": "counter"},
        {
            "id": "v",
            "type": "env_outcome_verifier",
            "env_id": "counter",
            "file_artifact_id": "check",
            **verifier,
        },
    ]
    (bundle / "tasks" / "t.json").write_text(json.dumps(steps))
    return bundle / "tasks" / "t.json"


async def run_file(path: Path) -> tuple[TaskResult, TaskContext]:
    task = Task.load(path)
    ctx = task.context()
    return await run_task(task.spec, ctx), ctx


def verifier(result: TaskResult) -> Any:
    return next(s for s in result.steps if s.id == "v")


@pytest.mark.parametrize(
    ("aggregator", "score"),
    [(None, 0.0), ("all_pass", 0.0), ("any_pass", 1.0), ("weighted_average", 0.25)],
)
async def test_the_script_calls_tools_over_mcp_and_its_rows_make_the_score(
    tmp_path: Path, aggregator: str | None, score: float
) -> None:
    extra = {"score_aggregator": aggregator} if aggregator else {}
    result, ctx = await run_file(bundle_with(tmp_path, CALLS_A_TOOL, **extra))
    assert verifier(result).status == "succeeded", verifier(result).error
    found = result.scores["v"]
    assert found.score == score and found.passed is (score == 1.0)
    assert [r["id"] for r in found.details["results"]] == ["is-one", "is-two"]
    assert found.details["results"][0]["result"] is True
    # its call went through the gateway as the env's default role, under its own name
    [record] = list(ctx.env("counter").gateway.instance(ctx.env("counter").instance).trajectory)
    assert (record.tool, record.role, record.principal) == ("get_counter", "user", "verifier")


async def test_the_server_is_gone_when_the_script_ends(tmp_path: Path) -> None:
    script = """
    import pathlib
    async def verify(mcp_url):
        pathlib.Path("url.txt").write_text(mcp_url)
        return [{"id": "ok", "result": True, "description": ""}]
    """
    path = bundle_with(tmp_path, script)
    result, _ = await run_file(path)
    assert result.status == "passed", result.error
    url = (path.parent.parent / "artifacts" / "check" / "url.txt").read_text()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
    async with httpx.AsyncClient(timeout=2) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(url)


async def test_the_script_cannot_reach_the_control_plane(tmp_path: Path) -> None:
    script = """
    import httpx
    async def verify(mcp_url):
        base = mcp_url.removesuffix("/mcp")
        async with httpx.AsyncClient() as http:
            answer = await http.post(base + "/tools/disable", json={"role": "user", "tools": "*"})
        return [{"id": "refused", "result": answer.status_code in (401, 403), "description": str(answer.status_code)}]
    """
    result, ctx = await run_file(bundle_with(tmp_path, script))
    assert result.status == "passed", result.scores["v"].details
    assert [t.name for t in ctx.env("counter").gateway.list_tools(_user(), "default")]


def _user() -> Any:
    from agentenv.env.tool import Principal

    return Principal(role="user")


@pytest.mark.parametrize(
    ("script", "error"),
    [
        (
            "async def verify(mcp_url):\n    raise KeyError('boom')\n",
            "verify() failed: KeyError: 'boom'",
        ),
        (
            "async def verify(mcp_url):\n    return {'id': 1}\n",
            "must return a list of {id, result, description}",
        ),
        ("async def verify(mcp_url):\n    return []\n", "verify() returned no result rows"),
        ("def other(url):\n    return []\n", "the script defines no verify(mcp_url) function"),
        (
            "async def verify(mcp_url, run):\n    return []\n",
            "only verify(mcp_url) is supported here (not the run context)",
        ),
        ("import sys\nsys.exit(3)\n", "verify() failed: exit code 3"),
    ],
)
async def test_a_bad_script_fails_the_step_clearly(tmp_path: Path, script: str, error: str) -> None:
    result, _ = await run_file(bundle_with(tmp_path, script))
    assert result.status == "error"
    assert error in verifier(result).error, verifier(result).error


async def test_a_missing_script_says_where_it_looked(tmp_path: Path) -> None:
    result, _ = await run_file(bundle_with(tmp_path, "", file_artifact_id="absent"))
    message = verifier(result).error
    assert message.startswith("no verifier script for artifact 'absent' (looked in: ")
    assert "artifacts/absent/verify.py" in message


async def test_another_python_can_run_the_script(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTENV_VERIFY_PYTHON", str(tmp_path / "no-such-python"))
    result, _ = await run_file(bundle_with(tmp_path, CALLS_A_TOOL))
    assert "cannot start" in verifier(result).error
    monkeypatch.setenv("AGENTENV_VERIFY_PYTHON", sys.executable)
    result, _ = await run_file(
        bundle_with(tmp_path / "again", CALLS_A_TOOL, score_aggregator="any_pass")
    )
    assert result.status == "passed", verifier(result).error


async def test_a_script_that_hangs_is_ended_by_the_steps_timeout(tmp_path: Path) -> None:
    script = """
    import time
    async def verify(mcp_url):
        time.sleep(600)
    """
    result, _ = await run_file(bundle_with(tmp_path, script, timeout_seconds=3))
    assert verifier(result).status == "timeout"
    assert verifier(result).error == "took longer than 3 s"
