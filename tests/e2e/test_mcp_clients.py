"""Real MCP clients against agentenv: the official Python SDK spawning `agent-env serve ENV
--stdio` the way desktop clients spawn servers, and the MCP Inspector CLI (TypeScript SDK,
fetched with npx) over Streamable HTTP against a real uvicorn server.

The Inspector tests skip, with the reason, when `npx` is missing or npm cannot fetch the
package; once the Inspector runs, wrong output fails. Version 0.15.0 is pinned: every later
release declares `engines.node >= 22.7.5`, and the Node here may be 20. The first fetch
downloads the package (about 15 s on a good connection); later runs reuse npm's cache.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters, stdio_client

from agentenv import Environment, Gateway
from agentenv.serve import make_server

ENV_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: e2e-notes
description: Notes, for real MCP clients.
roles:
  - name: agent
  - name: supervisor
default_role: agent
state:
  notes:
    key: id
seed:
  notes:
    - {id: N-1, text: first, priority: 1}
tools:
  - module: tools.py
"""

TOOLS_PY = '''\
import os

from agentenv import ToolContext, ToolError, tool


@tool(kind="read")
def get_note(ctx: ToolContext, note_id: str) -> dict:
    """Read one note.

    Args:
        note_id: The note's id, e.g. N-1.
    """
    return ctx.state.require("notes", note_id)


@tool
def add_note(ctx: ToolContext, note_id: str, text: str, priority: int = 0) -> dict:
    """Add a note.

    Args:
        note_id: The new note's id.
        text: What the note says.
        priority: 0 (low) to 3 (urgent).
    """
    return ctx.state.insert("notes", {"id": note_id, "text": text, "priority": priority})


@tool
def shred(ctx: ToolContext, note_id: str) -> dict:
    """Write to a note, then fail on purpose."""
    ctx.state.update("notes", note_id, {"text": "half shredded"})
    raise ToolError("the shredder jammed")


@tool(roles=["supervisor"])
def purge(ctx: ToolContext, note_id: str) -> dict:
    """Delete a note (supervisors only)."""
    ctx.state.delete("notes", note_id)
    return {"deleted": note_id}


@tool(kind="read")
def server_pid() -> dict:
    """The id of the process serving this call."""
    return {"pid": os.getpid()}
'''

AGENT_TOOLS = {"get_note", "add_note", "shred", "server_pid"}
SUPERVISOR_TOOLS = AGENT_TOOLS | {"purge"}
SEED_NOTE = {"id": "N-1", "text": "first", "priority": 1}
META_ROLE = "agentenv.io/role"
WAIT_S = 30


@pytest.fixture(scope="module")
def env_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("e2e-notes")
    (folder / "env.yaml").write_text(textwrap.dedent(ENV_YAML), encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return folder


# -- the official SDK over stdio -------------------------------------------------------------


def agent_env_command() -> tuple[str, list[str]]:
    """`agent-env` as installed; without the console script, the same entry point."""
    found = shutil.which("agent-env")
    if found:
        return found, []
    return sys.executable, ["-c", "from agentenv.cli import main; main()"]


@contextlib.asynccontextmanager
async def stdio_session(env_dir: Path, log: Path, mode: str) -> AsyncIterator[Client]:
    command, prefix = agent_env_command()
    params = StdioServerParameters(
        command=command, args=[*prefix, "serve", str(env_dir), "--stdio"], cwd=str(env_dir)
    )
    with log.open("w", encoding="utf-8") as errlog:
        async with Client(
            stdio_client(params, errlog=errlog),
            mode=mode,  # type: ignore[arg-type]
            cache=None,
            read_timeout_seconds=WAIT_S,
        ) as client:
            yield client


def text_of(result: Any) -> str:
    assert len(result.content) == 1, result
    return result.content[0].text


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_drives_agent_env_over_stdio(
    env_dir: Path, tmp_path: Path, mode: str
) -> None:
    log = tmp_path / "server-stderr.log"
    with anyio.fail_after(120):
        async with stdio_session(env_dir, log, mode) as client:
            listed = await client.list_tools()
            tools = {t.name: t for t in listed.tools}
            assert set(tools) == AGENT_TOOLS, log.read_text()
            assert tools["add_note"].input_schema["properties"]["priority"]["type"] == "integer"

            added = await client.call_tool("add_note", {"note_id": "N-2", "text": "hi"})
            assert not added.is_error, added
            assert added.structured_content == {"id": "N-2", "text": "hi", "priority": 0}
            assert json.loads(text_of(added)) == added.structured_content
            read = await client.call_tool("get_note", {"note_id": "N-2"})
            assert read.structured_content == added.structured_content

            # A tool error is a result, the write before it is undone, and serving goes on.
            failed = await client.call_tool("shred", {"note_id": "N-1"})
            assert failed.is_error
            assert "the shredder jammed" in text_of(failed)
            assert "Traceback" not in text_of(failed)
            unknown = await client.call_tool("no_such_tool", {})
            assert unknown.is_error
            assert "no_such_tool" in text_of(unknown)
            wrong = await client.call_tool(
                "add_note", {"note_id": "N-3", "text": "x", "priority": "high"}
            )
            assert wrong.is_error
            assert "priority" in text_of(wrong)
            seed = await client.call_tool("get_note", {"note_id": "N-1"})
            assert seed.structured_content == SEED_NOTE

            pid = (await client.call_tool("server_pid", {})).structured_content["pid"]
            assert pid != os.getpid()

    # The spawned server is gone once the client is.
    deadline = time.monotonic() + WAIT_S
    while not gone(pid):
        assert time.monotonic() < deadline, f"agent-env (pid {pid}) still running"
        time.sleep(0.05)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_over_stdio_the_role_comes_from_meta(
    env_dir: Path, tmp_path: Path, mode: str
) -> None:
    meta = {META_ROLE: "supervisor"}
    with anyio.fail_after(120):
        async with stdio_session(env_dir, tmp_path / "server-stderr.log", mode) as client:
            assert {t.name for t in (await client.list_tools(meta=meta)).tools} == SUPERVISOR_TOOLS

            denied = await client.call_tool("purge", {"note_id": "N-1"})
            assert denied.is_error
            assert "role 'agent' may not call 'purge'" in text_of(denied)
            still = await client.call_tool("get_note", {"note_id": "N-1"})
            assert still.structured_content == SEED_NOTE

            purged = await client.call_tool("purge", {"note_id": "N-1"}, meta=meta)
            assert not purged.is_error, purged
            assert purged.structured_content == {"deleted": "N-1"}
            after = await client.call_tool("get_note", {"note_id": "N-1"})
            assert after.is_error


# -- the MCP Inspector CLI (npx) -------------------------------------------------------------

INSPECTOR = "@modelcontextprotocol/inspector@0.15.0"
FETCH_TIMEOUT_S = 600
RUN_TIMEOUT_S = 180
NPM_ERROR = re.compile(r"^npm (?:error|ERR!)", re.MULTILINE)


def _npm_env() -> dict[str, str]:
    quiet = {
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
        "NO_COLOR": "1",
    }
    return {**os.environ, **quiet}


def _skip_if_npm_failed(proc: subprocess.CompletedProcess[str]) -> None:
    """npx exits non-zero with `npm error` lines when it cannot fetch the package; the
    Inspector's own failures never print those."""
    if proc.returncode != 0 and NPM_ERROR.search(proc.stderr):
        lines = [line for line in proc.stderr.splitlines() if NPM_ERROR.match(line)]
        codes = [line for line in lines if re.match(r"npm (?:error|ERR!) code ", line)]
        pytest.skip(f"npm could not fetch {INSPECTOR}: {' | '.join((codes or lines)[:3])}")


@pytest.fixture(scope="module")
def inspector() -> list[str]:
    """The Inspector CLI command line, fetched once (skips if it cannot be)."""
    npx = shutil.which("npx")
    if npx is None:
        pytest.skip(f"npx not found: Node.js/npm are needed to run {INSPECTOR}")
    command = [npx, "-y", INSPECTOR, "--cli"]
    try:
        proc = subprocess.run(
            [*command, "--help"],
            capture_output=True,
            text=True,
            timeout=FETCH_TIMEOUT_S,
            env=_npm_env(),
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.skip(f"npx could not fetch {INSPECTOR} within {FETCH_TIMEOUT_S} s")
    _skip_if_npm_failed(proc)
    assert proc.returncode == 0, f"{INSPECTOR} --cli --help failed:\n{proc.stderr}"
    return command


def run_inspector(command: list[str], url: str, *args: str) -> Any:
    """Run the Inspector CLI against `url`; its stdout as JSON."""
    proc = subprocess.run(
        [*command, url, *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env=_npm_env(),
        stdin=subprocess.DEVNULL,
    )
    _skip_if_npm_failed(proc)
    assert proc.returncode == 0, f"inspector {args} exited {proc.returncode}:\n{proc.stderr}"
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"inspector {args} printed no JSON:\n{proc.stdout}\n{proc.stderr}")


def call_with_inspector(command: list[str], url: str, tool: str, **args: str) -> Any:
    """`--method tools/call --tool-name TOOL --tool-arg k=v ...`; the CLI converts each
    value to the type the tool's input schema names."""
    pairs = [f"{key}={value}" for key, value in args.items()]
    return run_inspector(
        command, url, "--method", "tools/call", "--tool-name", tool, "--tool-arg", *pairs
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(gateway: Gateway) -> Iterator[str]:
    """Run `make_server(gateway)` in a thread; yield its base URL; always stop and join it."""
    port = free_port()
    server = make_server(gateway, host="127.0.0.1", port=port)
    thread = threading.Thread(target=server.run, name=f"e2e-uvicorn-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + WAIT_S
        while not server.started:
            assert thread.is_alive(), "the server thread died during startup"
            assert time.monotonic() < deadline, f"the server did not start within {WAIT_S} s"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT_S)
        assert not thread.is_alive(), f"the server did not stop within {WAIT_S} s"


@pytest.fixture
def served(env_dir: Path) -> Iterator[str]:
    with serving(Gateway(Environment.load(env_dir))) as url:
        yield url


def rest(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=WAIT_S)


def test_the_inspector_lists_what_step_lists(inspector: list[str], served: str) -> None:
    listed = run_inspector(inspector, served + "/mcp", "--method", "tools/list")
    with rest(served) as http:
        step = http.post("/step", json={"action": "list_tools"}).json()["tools"]
    tools = {t["name"]: t for t in listed["tools"]}
    assert set(tools) == AGENT_TOOLS
    assert tools == {
        t["name"]: {
            "name": t["name"],
            "description": t["description"],
            "inputSchema": t["inputSchema"],
        }
        for t in step
    }


def test_the_inspector_calls_tools(inspector: list[str], served: str) -> None:
    mcp_url = served + "/mcp"
    called = call_with_inspector(
        inspector, mcp_url, "add_note", note_id="N-7", text="hello", priority="3"
    )
    expected = {"id": "N-7", "text": "hello", "priority": 3}
    assert called["isError"] is False, called
    assert called["structuredContent"] == expected
    assert json.loads(called["content"][0]["text"]) == expected

    with rest(served) as http:
        before = http.get("/state").json()["state_hash"]
        failed = call_with_inspector(inspector, mcp_url, "shred", note_id="N-7")
        assert failed["isError"] is True, failed
        assert "the shredder jammed" in failed["content"][0]["text"]
        denied = call_with_inspector(inspector, mcp_url, "purge", note_id="N-1")
        assert denied["isError"] is True, denied
        assert "may not call 'purge'" in denied["content"][0]["text"]
        assert http.get("/state").json()["state_hash"] == before

        r = http.get("/trajectory?format=records")
        records = [json.loads(line) for line in r.text.splitlines()]
    assert [(r["tool"], r["role"], r["error"] and r["error"]["kind"]) for r in records] == [
        ("add_note", "agent", None),
        ("shred", "agent", "tool_error"),
        ("purge", "agent", "denied"),
    ]
    assert records[0]["args"] == {"note_id": "N-7", "text": "hello", "priority": 3}


def test_the_inspector_uses_an_instance_endpoint(inspector: list[str], served: str) -> None:
    with rest(served) as http:
        assert http.post("/instances", json={"id": "ep-1"}).status_code == 201
        default_before = http.get("/state").json()["state_hash"]
        instance_url = served + "/instances/ep-1/mcp"
        called = call_with_inspector(
            inspector, instance_url, "add_note", note_id="N-8", text="mine"
        )
        assert called["isError"] is False, called
        assert http.get("/state").json()["state_hash"] == default_before
        assert http.get("/trajectory").text == ""
        records = http.get("/instances/ep-1/trajectory?format=records").text.splitlines()
    assert [json.loads(line)["tool"] for line in records] == ["add_note"]
