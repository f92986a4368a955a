"""Third-party MCP servers nobody here wrote, behind our gateway: `mcp-server-git` from PyPI
(examples/envs/git, in a virtualenv of its own) and `@modelcontextprotocol/server-filesystem`
from npm (a server child of examples/envs/mixed, run by npx). Each runs a task end to end
with the oracle, fails it with a plausible shortcut agent, and has its tools held to our
roles and triggers. Real `agent-env` processes, real server processes, loopback only.

The servers are prepared by tests/e2e/third_party.py (CI runs it ahead); where the package
index or npx is missing the tests skip with that reason."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from tests.cli.test_serve_process import serving, step

from agentenv.rollout.store import RolloutStore

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

_spec = importlib.util.spec_from_file_location(
    "e2e_third_party", Path(__file__).with_name("third_party.py")
)
assert _spec is not None and _spec.loader is not None
third_party = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(third_party)


@pytest.fixture(scope="module")
def git_path() -> Iterator[str]:
    """PATH with mcp-server-git's virtualenv first, as a user who installed it would have."""
    try:
        bin_dir = third_party.git_server_bin()
    except third_party.Unavailable as error:
        pytest.skip(str(error))
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = path  # for `serving`, which copies os.environ
    try:
        yield path
    finally:
        os.environ["PATH"] = old


@pytest.fixture(scope="module")
def npx_ready() -> None:
    """npx on PATH with the filesystem server in its cache."""
    try:
        third_party.filesystem_server_command()
    except third_party.Unavailable as error:
        pytest.skip(str(error))


def _run(
    command: list[str], bundle: Path, agent: str, out: Path, cwd: Path | None = None
) -> dict[str, Any]:
    """`agent-env run BUNDLE --agent AGENT --out OUT`; the one episode's record (as JSON)."""
    done = subprocess.run(
        [*command, "run", str(bundle), "--agent", agent, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=cwd,
        env={**os.environ, "AGENTENV_LOG_DIR": str(out.parent / "logs")},
    )
    records = list(RolloutStore(out).records())
    assert len(records) == 1, done.stdout + done.stderr
    return {
        "scores": records[0].model_dump(mode="json"),
        "trajectory": records[0].trajectory,
        "output": done.stdout + done.stderr,
    }


def _script(folder: Path, body: str) -> str:
    """A scripted agent (`scripted:FILE:act`) from the body of `async def act(turn)`."""
    path = folder / "shortcut.py"
    path.write_text("async def act(turn):\n" + textwrap.indent(textwrap.dedent(body), "    "))
    return f"scripted:{path}:act"


def _script_rows(scores: dict[str, Any]) -> dict[str, bool]:
    parts = scores["scores"]["outcome"]["details"]["parts"]
    return {row["id"]: row["result"] for row in parts["script"]["details"]["results"]}


def _failed_checks(scores: dict[str, Any]) -> list[str]:
    parts = scores["scores"]["outcome"]["details"]["parts"]
    return [name for part in parts.values() for name in part["details"].get("failed", [])]


def _servers(name: str) -> list[int]:
    """Pids of live processes whose command line holds `name`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if name.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


# --- mcp-server-git (PyPI) ----------------------------------------------------------


def test_the_git_task_passes_with_the_oracle_and_leaves_no_server_running(
    tmp_path: Path, git_path: str, agent_env_command: list[str]
) -> None:
    before = set(_servers("mcp-server-git"))
    run = _run(agent_env_command, EXAMPLES / "bundles/git-commit", "oracle", tmp_path / "run")
    assert run["scores"]["score"] == 1.0, run["output"]
    assert _script_rows(run["scores"]) == {
        "one-new-commit": True,
        "calc-committed": True,
        "message-says-the-fix": True,
        "scratch-left-out": True,
        "handed-in": True,
    }
    calls = [r for r in run["trajectory"] if r.get("tool")]
    agent_calls = [(r["tool"], r["role"]) for r in calls if r["kind"] == "call"][:3]
    assert agent_calls == [("git_status", "agent"), ("git_add", "agent"), ("git_commit", "agent")]
    # The trigger's tool action went to the server, as the system principal.
    assert any(
        r["kind"] == "trigger" and r["tool"] == "git_create_branch" and r["error"] is None
        for r in calls
    )
    assert set(_servers("mcp-server-git")) <= before


def test_committing_everything_fails_the_git_task(
    tmp_path: Path, git_path: str, agent_env_command: list[str]
) -> None:
    agent = _script(
        tmp_path,
        """
        await turn.tools.call("git_add", {"repo_path": ".", "files": ["."]})
        await turn.tools.call("git_commit", {"repo_path": ".", "message": "Fix division by zero"})
        return "Committed: Fix division by zero"
        """,
    )
    run = _run(agent_env_command, EXAMPLES / "bundles/git-commit", agent, tmp_path / "run")
    assert run["scores"]["score"] < 1.0
    rows = _script_rows(run["scores"])
    assert rows["scratch-left-out"] is False and rows["calc-committed"] is True
    assert "staged calc.py by name" in _failed_checks(run["scores"])


def test_the_git_servers_tools_obey_roles_and_the_hand_in_trigger(
    tmp_path: Path,
    git_path: str,
    agent_env_command: list[str],
    loopback_port: Callable[[], int],
) -> None:
    with serving(tmp_path, agent_env_command, loopback_port(), str(EXAMPLES / "envs/git")) as (
        url,
        _,
        _,
    ):
        card = httpx.get(url + "/.well-known/agent-env.json", timeout=10).json()
        assert "git_commit" in {t["name"] for t in card["capabilities"]["tools"]}

        denied = step(url, "git_commit", {"repo_path": ".", "message": "x"}, role="reviewer")
        assert denied["error"]["kind"] == "denied", denied
        log = step(url, "git_log", {"repo_path": "."}, role="reviewer")
        assert "Initial commit" in json.dumps(log), log

        async def as_agent() -> list[Any]:
            async with Client(url + "/mcp") as client:
                names = {t.name for t in (await client.list_tools()).tools}
                added = await client.call_tool("git_add", {"repo_path": ".", "files": ["calc.py"]})
                committed = await client.call_tool(
                    "git_commit", {"repo_path": ".", "message": "Fix division by zero"}
                )
                again = await client.call_tool(
                    "git_commit", {"repo_path": ".", "message": "A second one"}
                )
                branches = await client.call_tool(
                    "git_branch", {"repo_path": ".", "branch_type": "local"}
                )
                return [names, added, committed, again, branches]

        names, added, committed, again, branches = anyio.run(as_agent)
        assert {"git_add", "git_commit", "git_log"} <= names
        assert not added.is_error and not committed.is_error
        # The hand-in trigger disabled committing for the agent and made the branch.
        assert again.is_error and "may not call 'git_commit'" in again.content[0].text
        assert "submitted" in branches.content[0].text


def test_a_missing_git_server_is_one_error_naming_the_command(
    tmp_path: Path, agent_env_command: list[str]
) -> None:
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"}
    done = subprocess.run(
        [*agent_env_command, "card", str(EXAMPLES / "envs/git")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode != 0
    assert "mcp-server-git" in done.stderr and "not found" in done.stderr
    assert "Traceback" not in done.stderr


# --- @modelcontextprotocol/server-filesystem (npm), in a composed env -------------


def test_the_mixed_task_passes_with_the_oracle(
    tmp_path: Path, npx_ready: None, agent_env_command: list[str]
) -> None:
    run = _run(agent_env_command, EXAMPLES / "bundles/mixed", "oracle", tmp_path / "run")
    assert run["scores"]["score"] == 1.0, run["output"]
    tools = [r["tool"] for r in run["trajectory"] if r.get("tool")]
    # The server child's write provoked the trigger, which acted on the document child.
    assert tools == [
        "files__read_text_file",
        "tasks__add_task",
        "files__write_file",
        "tasks__add_task",
    ]


def test_adding_every_action_item_fails_the_mixed_task(
    tmp_path: Path, npx_ready: None, agent_env_command: list[str]
) -> None:
    agent = _script(
        tmp_path,
        """
        await turn.tools.call("files__read_text_file", {"path": "minutes.md"})
        for title in ("Send the roadmap to the board", "Book the offsite venue"):
            await turn.tools.call(
                "tasks__add_task", {"title": title, "due": "2026-03-06", "project": "work"}
            )
        await turn.tools.call(
            "files__write_file", {"path": "reviews/roadmap-review.md", "content": "Roadmap."}
        )
        return "Added the roadmap task."
        """,
    )
    run = _run(agent_env_command, EXAMPLES / "bundles/mixed", agent, tmp_path / "run")
    assert run["scores"]["score"] < 1.0
    assert _failed_checks(run["scores"]) == [
        "Alex's action item is a task due 6 March",
        "nothing else was added (Jordan's item is not Alex's)",
    ]


def test_the_mixed_envs_children_share_one_gateway_and_its_roles(
    tmp_path: Path,
    npx_ready: None,
    agent_env_command: list[str],
    loopback_port: Callable[[], int],
) -> None:
    with serving(tmp_path, agent_env_command, loopback_port(), str(EXAMPLES / "envs/mixed")) as (
        url,
        _,
        _,
    ):
        card = httpx.get(url + "/.well-known/agent-env.json", timeout=10).json()
        children = {c["name"]: c for c in card["children_environments"]}
        assert set(children) == {"tasks", "files"}
        assert "files__write_file" in {
            t["name"] for t in children["files"]["capabilities"]["tools"]
        }

        read = step(url, "files__read_text_file", {"path": "minutes.md"}, role="user")
        assert "Roadmap review" in json.dumps(read), read
        denied = step(url, "files__write_file", {"path": "x.md", "content": "x"}, role="user")
        assert denied["error"]["kind"] == "denied", denied
        escaped = step(url, "files__read_text_file", {"path": "/etc/passwd"})
        assert escaped.get("error"), escaped  # the server's own refusal, as a tool error

        wrote = step(url, "files__write_file", {"path": "reviews/q2.md", "content": "Q2."})
        assert not wrote.get("error"), wrote
        listed = step(url, "tasks__list_tasks", {"status": "open"})
        assert "Review reviews/q2.md" in json.dumps(listed), listed
