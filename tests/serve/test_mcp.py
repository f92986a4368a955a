"""MCP over Streamable HTTP, against a real uvicorn server (`make_server`), with the official
`mcp` SDK client: tools/list and tools/call as the gateway answers them over REST, roles
from the header, from `_meta` (trusted mode) or from a bearer token, sessions, per-instance
endpoints, the card, and bad input that must never reach a 500 or half-apply a call.

Where the protocol era could matter, a test runs both eras the SDK speaks: `auto`
(negotiates 2026-07-28, one self-contained POST per request) and `legacy` (the `initialize`
handshake, as the MCP Inspector and most desktop clients speak it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from agentenv import Environment, Gateway
from agentenv.serve import make_server

ENV_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: mcp-notes
version: 0.4.0
description: Notes, served over MCP for the transport tests.
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
import asyncio
from pathlib import Path

from agentenv import ToolContext, ToolError, tool


@tool(kind="read")
def get_note(ctx: ToolContext, note_id: str) -> dict:
    """Read one note.

    Args:
        note_id: The note's id, e.g. N-1.
    """
    return ctx.state.require("notes", note_id)


@tool(kind="read")
def note_ids(ctx: ToolContext) -> list:
    """The ids of every note."""
    return ctx.state.keys("notes")


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


@tool
def crash(ctx: ToolContext, note_id: str) -> dict:
    """Write to a note, then crash (a bug in the tool)."""
    ctx.state.update("notes", note_id, {"text": "crashed"})
    raise RuntimeError("kaboom")


@tool(roles=["supervisor"])
def purge(ctx: ToolContext, note_id: str) -> dict:
    """Delete a note (supervisors only)."""
    ctx.state.delete("notes", note_id)
    return {"deleted": note_id}


@tool(timeout=0.2)
async def stall(ctx: ToolContext, note_id: str) -> str:
    """Write a note, then take far longer than the tool's timeout."""
    ctx.state.insert("notes", {"id": note_id, "text": "stalled"})
    await asyncio.sleep(60)
    return "done"


@tool(timeout=60)
async def slow_pair(
    ctx: ToolContext, first: str, second: str, marker: str, seconds: float = 2.0
) -> dict:
    """Write one note, say so in the marker file, wait, then write a second note."""
    ctx.state.insert("notes", {"id": first, "text": "first of a pair"})
    Path(marker).write_text("started", encoding="utf-8")
    await asyncio.sleep(seconds)
    ctx.state.insert("notes", {"id": second, "text": "second of a pair"})
    return {"written": [first, second]}
'''

AGENT_TOOLS = {"get_note", "note_ids", "add_note", "shred", "crash", "stall", "slow_pair"}
SUPERVISOR_TOOLS = AGENT_TOOLS | {"purge"}
MODES = ["auto", "legacy"]
META_ROLE = "agentenv.io/role"
META_SESSION = "agentenv.io/session"
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST_BODY = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
CALL_BODY = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "add_note", "arguments": {"note_id": "N-9", "text": "x"}},
}
WAIT_S = 30


# -- a real server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def notes_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder = tmp_path_factory.mktemp("mcp-notes")
    (folder / "env.yaml").write_text(textwrap.dedent(ENV_YAML), encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return Environment.load(folder)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def serving(gateway: Gateway, **options: Any) -> Iterator[str]:
    """Run `make_server(gateway)` in a thread; yield its base URL; always stop and join it."""
    port = free_port()
    server = make_server(gateway, host="127.0.0.1", port=port, **options)
    thread = threading.Thread(target=server.run, name=f"mcp-uvicorn-{port}", daemon=True)
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


@dataclass
class Served:
    url: str
    gateway: Gateway


@pytest.fixture
def served(notes_env: Environment) -> Iterator[Served]:
    """A fresh gateway over the notes env, served in trusted local mode."""
    gateway = Gateway(notes_env)
    with serving(gateway) as url:
        yield Served(url, gateway)


@pytest.fixture
def tokened(notes_env: Environment) -> Iterator[Served]:
    """A fresh gateway served with bearer tokens: s1 is an agent, s2 a supervisor."""
    gateway = Gateway(notes_env)
    with serving(gateway, tokens={"s1": "agent", "s2": "supervisor"}) as url:
        yield Served(url, gateway)


# -- clients ---------------------------------------------------------------------------------


async def _no_server_error(response: httpx.Response) -> None:
    await response.aread()
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text, response.text


@contextlib.asynccontextmanager
async def rest(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client of the server; every answer is checked for 5xx and tracebacks."""
    async with httpx.AsyncClient(
        base_url=url,
        headers=headers or {},
        timeout=WAIT_S,
        event_hooks={"response": [_no_server_error]},
    ) as client:
        yield client


@contextlib.asynccontextmanager
async def mcp_client(
    url: str, *, headers: dict[str, str] | None = None, mode: str = "auto"
) -> AsyncIterator[Client]:
    """The official SDK client over Streamable HTTP; custom headers go on its httpx2 client."""
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=WAIT_S) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=mode,  # type: ignore[arg-type]
            cache=None,
            read_timeout_seconds=WAIT_S,
        ) as client,
    ):
        yield client


async def state_hash(http: httpx.AsyncClient, prefix: str = "") -> str:
    r = await http.get(f"{prefix}/state")
    assert r.status_code == 200, r.text
    return r.json()["state_hash"]


async def trajectory(http: httpx.AsyncClient, prefix: str = "") -> list[dict[str, Any]]:
    """Our trajectory records (GET /trajectory?format=records)."""
    r = await http.get(f"{prefix}/trajectory?format=records")
    assert r.status_code == 200, r.text
    return [json.loads(line) for line in r.text.splitlines() if line.strip()]


async def step_tools(http: httpx.AsyncClient, role: str | None = None) -> dict[str, Any]:
    """POST /step list_tools as `role`: {name: {description, inputSchema}}."""
    headers = {"AgentEnv-Role": role} if role else {}
    r = await http.post("/step", json={"action": "list_tools"}, headers=headers)
    assert r.status_code == 200, r.text
    return {
        t["name"]: {k: t.get(k) for k in ("description", "inputSchema")} for t in r.json()["tools"]
    }


async def mcp_tools(client: Client, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    listed = await client.list_tools(meta=meta)  # type: ignore[arg-type]
    return {
        t.name: {"description": t.description, "inputSchema": t.input_schema} for t in listed.tools
    }


def mcp_error_in(exc: BaseException) -> MCPError:
    """The MCPError the SDK client raised: itself, or (when it fails while connecting, in
    its task group) the one inside the exception group."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            with contextlib.suppress(AssertionError):
                return mcp_error_in(inner)
    raise AssertionError(f"no MCPError in {exc!r}")


def text_of(result: Any) -> str:
    assert len(result.content) == 1, result
    assert result.content[0].type == "text"
    return result.content[0].text


# -- tools/list ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_tools_list_is_what_step_list_tools_answers_for_each_role(
    served: Served, mode: str
) -> None:
    async with rest(served.url) as http:
        for role in [None, "agent", "supervisor", "visitor"]:
            headers = {"AgentEnv-Role": role} if role else {}
            async with mcp_client(served.url + "/mcp", headers=headers, mode=mode) as client:
                listed = await mcp_tools(client)
            assert listed == await step_tools(http, role), role
        assert set(await step_tools(http)) == AGENT_TOOLS
        assert set(await step_tools(http, "supervisor")) == SUPERVISOR_TOOLS

        # A tool disabled at run time disappears from MCP exactly as from /step.
        r = await http.post("/tools/disable", json={"role": "agent", "tools": ["add_note"]})
        assert r.status_code == 200, r.text
        async with mcp_client(served.url + "/mcp", mode=mode) as client:
            listed = await mcp_tools(client)
            refused = await client.call_tool("add_note", {"note_id": "N-9", "text": "no"})
        assert listed == await step_tools(http)
        assert set(listed) == AGENT_TOOLS - {"add_note"}
        assert refused.is_error
        assert "may not call 'add_note'" in text_of(refused)


async def test_tools_carry_their_description_and_input_schema(served: Served) -> None:
    async with mcp_client(served.url + "/mcp") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    add = tools["add_note"]
    assert add.description and add.description.startswith("Add a note.")
    assert add.input_schema["type"] == "object"
    assert set(add.input_schema["properties"]) == {"note_id", "text", "priority"}
    assert add.input_schema["properties"]["priority"]["type"] == "integer"
    assert sorted(add.input_schema.get("required", [])) == ["note_id", "text"]


# -- tools/call ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_a_call_answers_structured_content_and_the_same_text(
    served: Served, mode: str
) -> None:
    async with rest(served.url) as http, mcp_client(served.url + "/mcp", mode=mode) as client:
        before = await state_hash(http)
        result = await client.call_tool("add_note", {"note_id": "N-2", "text": "hi", "priority": 2})
        assert not result.is_error, result
        expected = {"id": "N-2", "text": "hi", "priority": 2}
        assert result.structured_content == expected
        assert json.loads(text_of(result)) == expected

        # The write is real: read back over MCP and over REST, and recorded.
        read = await client.call_tool("get_note", {"note_id": "N-2"})
        assert read.structured_content == expected
        after = await state_hash(http)
        assert after != before
        records = await trajectory(http)
        assert [r["tool"] for r in records] == ["add_note", "get_note"]
        assert records[0]["role"] == "agent"
        assert records[0]["result"] == expected
        assert records[0]["state_hash"] == after

        # A result that is not an object is wrapped, as MCP wants structuredContent objects.
        ids = await client.call_tool("note_ids", {})
        assert not ids.is_error
        assert ids.structured_content == {"result": ["N-1", "N-2"]}
        assert json.loads(text_of(ids)) == ["N-1", "N-2"]


FAILING_CALLS = [
    pytest.param(
        "shred", {"note_id": "N-1"}, "tool_error", ["the shredder jammed"], id="tool-error"
    ),
    pytest.param("crash", {"note_id": "N-1"}, "tool_error", ["RuntimeError", "kaboom"], id="bug"),
    pytest.param("no_such_tool", {}, "unknown_tool", ["unknown tool 'no_such_tool'"], id="unknown"),
    pytest.param(
        "add_note",
        {"note_id": 5, "text": "x", "priority": "high"},
        "invalid_arguments",
        ["note_id", "priority"],
        id="wrong-types",
    ),
    pytest.param(
        "add_note", {"note_id": "N-5"}, "invalid_arguments", ["text", "missing"], id="missing"
    ),
    pytest.param(
        "add_note",
        {"note_id": "N-5", "text": "x", "colour": "red"},
        "invalid_arguments",
        ["colour", "unknown argument"],
        id="unknown-argument",
    ),
    pytest.param("get_note", {"note_id": "N-404"}, "tool_error", ["N-404"], id="missing-record"),
    pytest.param("stall", {"note_id": "N-6"}, "timeout", ["took longer than"], id="timeout"),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("tool", "args", "kind", "fragments"), FAILING_CALLS)
async def test_a_failing_call_is_an_error_result_and_changes_nothing(
    served: Served, mode: str, tool: str, args: dict[str, Any], kind: str, fragments: list[str]
) -> None:
    async with rest(served.url) as http, mcp_client(served.url + "/mcp", mode=mode) as client:
        before = await state_hash(http)
        result = await client.call_tool(tool, args)
        assert result.is_error, result
        assert result.structured_content is None
        message = text_of(result)
        for fragment in fragments:
            assert fragment in message, message
        assert "Traceback" not in message
        assert await state_hash(http) == before
        [record] = await trajectory(http)
        assert record["tool"] == tool
        assert record["error"]["kind"] == kind
        assert record["denied"] is False
        assert record["state_hash"] == before

        # The server keeps serving, and the next call sees the untouched seed.
        again = await client.call_tool("get_note", {"note_id": "N-1"})
        assert again.structured_content == {"id": "N-1", "text": "first", "priority": 1}


@pytest.mark.parametrize("mode", MODES)
async def test_a_denied_call_is_an_error_and_recorded_as_denied(served: Served, mode: str) -> None:
    async with rest(served.url) as http:
        before = await state_hash(http)
        async with mcp_client(served.url + "/mcp", mode=mode) as client:
            result = await client.call_tool("purge", {"note_id": "N-1"})
        assert result.is_error
        assert "role 'agent' may not call 'purge'" in text_of(result)
        assert await state_hash(http) == before
        [record] = await trajectory(http)
        assert record["tool"] == "purge"
        assert record["role"] == "agent"
        assert record["denied"] is True
        assert record["error"]["kind"] == "denied"

        # The role that may call it, named in the header, can.
        headers = {"AgentEnv-Role": "supervisor"}
        async with mcp_client(served.url + "/mcp", headers=headers, mode=mode) as client:
            result = await client.call_tool("purge", {"note_id": "N-1"})
        assert not result.is_error, result
        assert result.structured_content == {"deleted": "N-1"}
        records = await trajectory(http)
        assert records[-1]["role"] == "supervisor"
        assert records[-1]["denied"] is False
        assert await state_hash(http) != before


# -- role and session from _meta -------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_in_trusted_mode_the_role_can_come_from_meta(served: Served, mode: str) -> None:
    meta = {META_ROLE: "supervisor"}
    async with rest(served.url) as http, mcp_client(served.url + "/mcp", mode=mode) as client:
        assert set(await mcp_tools(client, meta)) == SUPERVISOR_TOOLS
        assert set(await mcp_tools(client)) == AGENT_TOOLS
        result = await client.call_tool("purge", {"note_id": "N-1"}, meta=meta)
        assert not result.is_error, result
        [record] = await trajectory(http)
        assert (record["tool"], record["role"], record["denied"]) == ("purge", "supervisor", False)


@pytest.mark.parametrize("mode", MODES)
async def test_a_meta_role_wins_over_the_header(served: Served, mode: str) -> None:
    # A `_meta` role entry marks a call a gateway proxied: the header is the gateway's own.
    headers = {"AgentEnv-Role": "agent"}
    meta = {META_ROLE: "supervisor"}
    async with (
        rest(served.url) as http,
        mcp_client(served.url + "/mcp", headers=headers, mode=mode) as client,
    ):
        assert set(await mcp_tools(client, meta)) == SUPERVISOR_TOOLS
        result = await client.call_tool("purge", {"note_id": "N-1"}, meta=meta)
        assert not result.is_error, result
        [record] = await trajectory(http)
        assert (record["role"], record["denied"]) == ("supervisor", False)


@pytest.mark.parametrize("forwarded", ["default", "", "  "])
async def test_a_meta_role_of_default_or_blank_is_the_default_role(
    served: Served, forwarded: str
) -> None:
    # What upstream's gateway stamps when its caller named no role: even over a header.
    headers = {"AgentEnv-Role": "supervisor"}
    meta = {META_ROLE: forwarded}
    async with (
        rest(served.url) as http,
        mcp_client(served.url + "/mcp", headers=headers) as client,
    ):
        assert set(await mcp_tools(client, meta)) == AGENT_TOOLS
        result = await client.call_tool("add_note", {"note_id": "N-7", "text": "x"}, meta=meta)
        assert not result.is_error, result
        denied = await client.call_tool("purge", {"note_id": "N-1"}, meta=meta)
        assert denied.is_error
        records = await trajectory(http)
    assert [(r["tool"], r["role"], r["denied"]) for r in records] == [
        ("add_note", "agent", False),
        ("purge", "agent", True),
    ]


async def test_a_call_with_no_role_anywhere_is_the_default_role(served: Served) -> None:
    async with rest(served.url) as http, mcp_client(served.url + "/mcp") as client:
        result = await client.call_tool("add_note", {"note_id": "N-8", "text": "x"})
        assert not result.is_error, result
        [record] = await trajectory(http)
    assert record["role"] == "agent"


HIDDEN_ENV = """\
apiVersion: agentenv/v1
kind: Environment
name: hidden-notes
state: {notes: {key: id}}
tools:
  - {name: get_note, crud: {collection: notes, op: get}}
  - {name: purge_note, crud: {collection: notes, op: delete}, hidden_by_default: true}
"""


async def test_a_hidden_tool_is_listed_with_its_meta_once_a_rule_names_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "env.yaml").write_text(HIDDEN_ENV, encoding="utf-8")
    gateway = Gateway(Environment.load(tmp_path))
    with serving(gateway) as url:
        async with mcp_client(url + "/mcp") as client:
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["get_note"]
            assert listed.tools[0].meta is None
            async with rest(url) as http:
                enabled = await http.post(
                    "/tools/enable", json={"role": "default", "tools": ["purge_note"]}
                )
                assert enabled.status_code == 200, enabled.text
            listed = await client.list_tools()
    shown = {t.name: t.meta for t in listed.tools}
    assert shown == {"get_note": None, "purge_note": {"agentenv.io/hiddenByDefault": True}}


async def test_behind_a_gateway_a_role_less_tools_list_shows_every_tool(
    notes_env: Environment, tmp_path: Path
) -> None:
    # How upstream's gateway discovers a backing server's tools: one tools/list, no role.
    (tmp_path / "env.yaml").write_text(HIDDEN_ENV, encoding="utf-8")
    for env, expected in (
        (notes_env, SUPERVISOR_TOOLS),
        (Environment.load(tmp_path), {"get_note", "purge_note"}),
    ):
        with serving(Gateway(env, behind_gateway=True)) as url:
            async with mcp_client(url + "/mcp") as client:
                listed = await client.list_tools()
        assert {t.name for t in listed.tools} == expected
    assert {t.name: t.meta for t in listed.tools}["purge_note"] == {
        "agentenv.io/hiddenByDefault": True
    }


@pytest.mark.parametrize("mode", MODES)
async def test_the_session_in_meta_is_recorded(served: Served, mode: str) -> None:
    async with rest(served.url) as http, mcp_client(served.url + "/mcp", mode=mode) as client:
        await client.call_tool(
            "add_note", {"note_id": "N-2", "text": "a"}, meta={META_SESSION: "s-1"}
        )
        await client.call_tool("get_note", {"note_id": "N-2"}, meta={META_SESSION: "s-2"})
        await client.call_tool("shred", {"note_id": "N-2"}, meta={META_SESSION: "s-1"})
        await client.call_tool("get_note", {"note_id": "N-1"})
        records = await trajectory(http)
    assert [(r["tool"], r["session"]) for r in records] == [
        ("add_note", "s-1"),
        ("get_note", "s-2"),
        ("shred", "s-1"),
        ("get_note", None),
    ]


# -- instances -------------------------------------------------------------------------------


async def test_the_card_advertises_the_mcp_endpoints(served: Served) -> None:
    async with rest(served.url) as http:
        card = (await http.get("/.well-known/agent-env.json")).json()
        assert {"url": "/mcp", "transport": "mcp"} in card["additionalInterfaces"]
        r = await http.post("/instances", json={"id": "ep-1"})
        assert r.status_code == 201, r.text
        card = (await http.get("/instances/ep-1/.well-known/agent-env.json")).json()
        assert {"url": "/instances/ep-1/mcp", "transport": "mcp"} in card["additionalInterfaces"]

    # The advertised URL is usable as it stands.
    [mcp_url] = [i["url"] for i in card["additionalInterfaces"] if i["transport"] == "mcp"]
    async with mcp_client(served.url + mcp_url) as client:
        assert set(await mcp_tools(client)) == AGENT_TOOLS


@pytest.mark.parametrize("mode", MODES)
async def test_an_instance_endpoint_is_isolated_from_the_default_instance(
    served: Served, mode: str
) -> None:
    async with rest(served.url) as http:
        for name in ("ep-1", "ep-2"):
            r = await http.post("/instances", json={"id": name})
            assert r.status_code == 201, r.text
        default_before = await state_hash(http)
        other_before = await state_hash(http, "/instances/ep-2")

        async with mcp_client(served.url + "/instances/ep-1/mcp", mode=mode) as client:
            assert set(await mcp_tools(client)) == AGENT_TOOLS
            added = await client.call_tool("add_note", {"note_id": "N-2", "text": "mine"})
            assert not added.is_error, added
            seen = await client.call_tool("get_note", {"note_id": "N-2"})
            assert not seen.is_error, seen

        assert await state_hash(http) == default_before
        assert await state_hash(http, "/instances/ep-2") == other_before
        assert await state_hash(http, "/instances/ep-1") != default_before
        assert await trajectory(http) == []
        assert await trajectory(http, "/instances/ep-2") == []
        assert [r["tool"] for r in await trajectory(http, "/instances/ep-1")] == [
            "add_note",
            "get_note",
        ]
        async with mcp_client(served.url + "/mcp", mode=mode) as client:
            missing = await client.call_tool("get_note", {"note_id": "N-2"})
        assert missing.is_error


def jsonrpc_refusal(r: httpx.Response, code: int, kind: str) -> str:
    """The message of an HTTP-level refusal at /mcp, checked to be a JSON-RPC error (what
    MCP clients can show) with our kind in `error.data.code`."""
    assert r.headers["content-type"] == "application/json", r.headers
    answer = r.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] is None, answer
    assert answer["error"]["code"] == code, answer
    assert answer["error"]["data"]["code"] == kind, answer
    assert answer["error"]["data"]["detail"] == answer["error"]["message"]
    return answer["error"]["message"]


async def test_an_unknown_or_dropped_instance_is_404_at_the_http_level(served: Served) -> None:
    async with rest(served.url) as http:
        r = await http.post("/instances/nope/mcp", json=LIST_BODY, headers=MCP_HEADERS)
        assert r.status_code == 404, r.text
        assert jsonrpc_refusal(r, -32004, "not_found") == "no instance 'nope'"

        assert (await http.post("/instances", json={"id": "ep-1"})).status_code == 201
        r = await http.post("/instances/ep-1/mcp", json=LIST_BODY, headers=MCP_HEADERS)
        assert r.status_code == 200, r.text
        assert (await http.delete("/instances/ep-1")).status_code == 200
        r = await http.post("/instances/ep-1/mcp", json=LIST_BODY, headers=MCP_HEADERS)
        assert r.status_code == 404, r.text


# -- bearer tokens ---------------------------------------------------------------------------


async def test_with_tokens_a_request_without_a_known_token_is_401(tokened: Served) -> None:
    admin = {"Authorization": "Bearer s2"}
    async with rest(tokened.url) as http:
        r = await http.get("/state", headers=admin)
        before = r.json()["state_hash"]
        for path in ("/mcp", "/instances/default/mcp"):
            for headers in (
                {},
                {"Authorization": "Bearer wrong"},
                {"Authorization": "s1"},
                {"AgentEnv-Role": "supervisor"},
            ):
                for body in (LIST_BODY, CALL_BODY):
                    r = await http.post(path, json=body, headers={**MCP_HEADERS, **headers})
                    assert r.status_code == 401, (path, headers, r.text)
                    assert r.headers["www-authenticate"] == "Bearer"
                    message = jsonrpc_refusal(r, -32005, "unauthenticated")
                    assert "bearer token" in message, message
        assert (await http.get("/state", headers=admin)).json()["state_hash"] == before
        r = await http.get("/trajectory", headers=admin)
        assert r.status_code == 200
        assert r.text.strip() == ""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("headers", "message"),
    [
        pytest.param({}, "a bearer token is required", id="no-token"),
        pytest.param({"Authorization": "Bearer wrong"}, "unknown bearer token", id="wrong-token"),
    ],
)
async def test_the_sdk_client_shows_why_it_got_401(
    tokened: Served, mode: str, headers: dict[str, str], message: str
) -> None:
    # Before, the 401 body was not JSON-RPC and the client said only "Server returned an
    # error response".
    with pytest.raises((MCPError, BaseExceptionGroup)) as caught:
        async with mcp_client(tokened.url + "/mcp", headers=headers, mode=mode) as client:
            await client.list_tools()
    error = mcp_error_in(caught.value)
    assert message in str(error), error
    assert error.error.code == -32005


@pytest.mark.parametrize("mode", MODES)
async def test_the_sdk_client_shows_why_it_got_404(served: Served, mode: str) -> None:
    with pytest.raises((MCPError, BaseExceptionGroup)) as caught:
        async with mcp_client(served.url + "/instances/nope/mcp", mode=mode) as client:
            await client.list_tools()
    error = mcp_error_in(caught.value)
    assert "no instance 'nope'" in str(error), error
    assert error.error.code == -32004


@pytest.mark.parametrize("mode", MODES)
async def test_with_tokens_the_role_comes_from_the_token_only(tokened: Served, mode: str) -> None:
    agent = {"Authorization": "Bearer s1", "AgentEnv-Role": "supervisor"}
    meta = {META_ROLE: "supervisor"}
    async with rest(tokened.url, {"Authorization": "Bearer s2"}) as http:
        before = await state_hash(http)
        async with mcp_client(tokened.url + "/mcp", headers=agent, mode=mode) as client:
            # Neither the role header nor _meta lifts the token's role.
            assert set(await mcp_tools(client)) == AGENT_TOOLS
            assert set(await mcp_tools(client, meta)) == AGENT_TOOLS
            refused = await client.call_tool("purge", {"note_id": "N-1"}, meta=meta)
            assert refused.is_error
            assert "role 'agent' may not call 'purge'" in text_of(refused)
            added = await client.call_tool("add_note", {"note_id": "N-2", "text": "ok"})
            assert not added.is_error, added
        records = await trajectory(http)
        assert [(r["tool"], r["role"], r["principal"], r["denied"]) for r in records] == [
            ("purge", "agent", "token:agent", True),
            ("add_note", "agent", "token:agent", False),
        ]
        assert records[0]["state_hash"] == before

        supervisor = {"Authorization": "Bearer s2"}
        async with mcp_client(tokened.url + "/mcp", headers=supervisor, mode=mode) as client:
            assert set(await mcp_tools(client)) == SUPERVISOR_TOOLS
            purged = await client.call_tool("purge", {"note_id": "N-1"})
            assert not purged.is_error, purged
        assert (await trajectory(http))[-1]["role"] == "supervisor"


# -- bad input -------------------------------------------------------------------------------

MALFORMED = [
    pytest.param(b"{not json", id="not-json"),
    pytest.param(b"\xff\xfe\x00", id="not-utf8"),
    pytest.param(b"", id="empty"),
    pytest.param(b"42", id="a-number"),
    pytest.param(b"[]", id="empty-batch"),
    pytest.param(b'{"jsonrpc": "2.0"}', id="no-method-no-id"),
    pytest.param(b'{"jsonrpc": "1.0", "id": 1, "method": "tools/list"}', id="wrong-version"),
    pytest.param(b'{"jsonrpc": "2.0", "id": {}, "method": "tools/list"}', id="object-id"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "no/such"}', id="unknown-method"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call"}', id="call-no-params"),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": []}', id="list-params"
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}}}',
        id="call-no-name",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
        b' "params": {"name": "add_note", "arguments": "note_id=N-9"}}',
        id="string-arguments",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
        b' "params": {"name": ["add_note"], "arguments": {}}}',
        id="list-name",
    ),
    pytest.param(
        b'{"jsonrpc": "2.0", "method": "tools/call",'
        b' "params": {"name": "add_note", "arguments": {"note_id": "N-9", "text": "x"}}}',
        id="call-as-notification",
    ),
    pytest.param(
        b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/call",'
        b' "params": {"name": "add_note", "arguments": {"note_id": "N-9", "text": "x"}}}]',
        id="batch",
    ),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "result": {}}', id="a-response"),
]


async def test_malformed_json_rpc_is_refused_without_a_server_error(served: Served) -> None:
    async with rest(served.url) as http:
        before = await state_hash(http)
        for param in MALFORMED:
            [raw] = param.values
            r = await http.post("/mcp", content=raw, headers=MCP_HEADERS)
            assert r.status_code < 500, (param.id, r.status_code, r.text)
            if r.status_code == 200:
                answer = r.json()
                assert "error" in answer, (param.id, answer)
                assert isinstance(answer["error"]["code"], int), (param.id, answer)
            assert await state_hash(http) == before, param.id

        # A body that is not declared as JSON is refused too.
        r = await http.post(
            "/mcp", json=LIST_BODY, headers={**MCP_HEADERS, "Content-Type": "text/plain"}
        )
        assert 400 <= r.status_code < 500, r.text

        # The server keeps serving MCP, and nothing was called.
        async with mcp_client(served.url + "/mcp") as client:
            assert set(await mcp_tools(client)) == AGENT_TOOLS
            ok = await client.call_tool("add_note", {"note_id": "N-2", "text": "still here"})
            assert not ok.is_error, ok
        records = await trajectory(http)
        assert [r["tool"] for r in records] == ["add_note"]
        assert records[0]["args"]["note_id"] == "N-2"


@pytest.mark.parametrize("mode", MODES)
async def test_a_huge_argument_is_refused_and_changes_nothing(served: Served, mode: str) -> None:
    huge = "x" * (2 * 1024 * 1024)
    async with rest(served.url) as http:
        before = await state_hash(http)
        async with mcp_client(served.url + "/mcp", mode=mode) as client:
            try:
                result = await client.call_tool("add_note", {"note_id": "N-big", "text": huge})
            except MCPError:
                pass
            else:
                assert result.is_error, "a 2 MB argument was accepted"
            ok = await client.call_tool("get_note", {"note_id": "N-1"})
            assert not ok.is_error, ok

        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "add_note", "arguments": {"note_id": "N-big", "text": huge}},
        }
        r = await http.post("/mcp", json=body, headers=MCP_HEADERS)
        assert r.status_code == 413, r.text
        # JSON-RPC-shaped, so MCP clients show why
        assert r.json()["error"]["data"]["code"] == "too_large"
        assert "over the limit" in r.json()["error"]["message"]

        assert await state_hash(http) == before
        assert [r["tool"] for r in await trajectory(http)] == ["get_note"]


async def test_requests_from_foreign_hosts_and_origins_are_refused(served: Served) -> None:
    """On loopback the SDK's DNS-rebinding checks are on: a page on another site cannot
    drive a local server through the browser."""
    call = CALL_BODY
    async with rest(served.url) as http:
        before = await state_hash(http)
        r = await http.post("/mcp", json=call, headers={**MCP_HEADERS, "Host": "evil.example"})
        assert 400 <= r.status_code < 500, r.text
        r = await http.post(
            "/mcp", json=call, headers={**MCP_HEADERS, "Origin": "http://evil.example"}
        )
        assert 400 <= r.status_code < 500, r.text
        assert await state_hash(http) == before
        assert await trajectory(http) == []

        # A same-origin request is served.
        port = served.url.rsplit(":", 1)[1]
        r = await http.post(
            "/mcp", json=LIST_BODY, headers={**MCP_HEADERS, "Origin": f"http://127.0.0.1:{port}"}
        )
        assert r.status_code == 200, r.text


async def test_a_client_that_disconnects_mid_call_leaves_no_half_applied_state(
    served: Served, tmp_path: Path
) -> None:
    """The call writes one note, waits, then writes a second. Whatever the server does with
    a vanished client (MCP says a disconnect is not a cancellation, so finishing the call is
    allowed), the state ends with both notes or neither, and the trajectory agrees."""
    marker = tmp_path / "started"
    args = {"first": "P-1", "second": "P-2", "marker": str(marker), "seconds": 2.0}
    async with rest(served.url) as http:
        before = await state_hash(http)

        async def call_and_vanish() -> None:
            async with mcp_client(served.url + "/mcp") as client:
                await client.call_tool("slow_pair", args)

        task = asyncio.create_task(call_and_vanish())
        try:
            deadline = time.monotonic() + WAIT_S
            while not marker.exists():
                assert not task.done(), task
                assert time.monotonic() < deadline, "the tool never started"
                await asyncio.sleep(0.02)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, WAIT_S)

        # A tool call waits for the instance's lock, so once it is answered the abandoned
        # call has finished or been rolled back.
        r = await http.post(
            "/step",
            json={"action": "call_tool", "tool_name": "note_ids", "arguments": {}},
        )
        assert r.status_code == 200, r.text
        ids = set(r.json()["structuredContent"]["result"])
        records = [t for t in await trajectory(http) if t["tool"] == "slow_pair"]
        now = await state_hash(http)

    if {"P-1", "P-2"} & ids:
        assert {"P-1", "P-2"} <= ids, f"half-applied: {sorted(ids)}"
        [record] = records
        assert record["error"] is None
        assert record["state_hash"] == now
    else:
        assert now == before
        assert all(r["error"] is not None for r in records), records


# -- more of the gateway, seen through MCP ---------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
async def test_arming_the_clock_adds_get_time_to_mcp(served: Served, mode: str) -> None:
    async with rest(served.url) as http, mcp_client(served.url + "/mcp", mode=mode) as client:
        assert "get_time" not in await mcp_tools(client)
        body = {"virtual_time": "2026-03-02T09:00:00Z", "virtual_seconds_per_real_second": 0}
        r = await http.put("/clock/set-time", json=body)
        assert r.status_code == 200, r.text
        listed = await mcp_tools(client)
        assert listed == await step_tools(http)
        assert "get_time" in listed
        result = await client.call_tool("get_time", {})
        assert not result.is_error, result
        assert result.structured_content == {
            "current_time": "2026-03-02T09:00:00Z",
            "virtual_time": "2026-03-02T09:00:00Z",
        }


async def test_tool_access_changed_on_one_instance_shows_only_on_its_endpoint(
    served: Served,
) -> None:
    async with rest(served.url) as http:
        assert (await http.post("/instances", json={"id": "ep-1"})).status_code == 201
        r = await http.post(
            "/instances/ep-1/tools/disable", json={"role": "agent", "tools": ["add_note"]}
        )
        assert r.status_code == 200, r.text
        async with mcp_client(served.url + "/instances/ep-1/mcp") as client:
            assert set(await mcp_tools(client)) == AGENT_TOOLS - {"add_note"}
            refused = await client.call_tool("add_note", {"note_id": "N-2", "text": "x"})
            assert refused.is_error
        async with mcp_client(served.url + "/mcp") as client:
            assert set(await mcp_tools(client)) == AGENT_TOOLS
            added = await client.call_tool("add_note", {"note_id": "N-2", "text": "x"})
            assert not added.is_error, added
        calls = [r for r in await trajectory(http, "/instances/ep-1") if r["kind"] == "call"]
        assert [(r["tool"], r["denied"]) for r in calls] == [("add_note", True)]


async def test_concurrent_calls_are_all_applied_once(served: Served) -> None:
    ids = [f"C-{i}" for i in range(12)]
    async with rest(served.url) as http, mcp_client(served.url + "/mcp") as client:
        results = await asyncio.gather(
            *(client.call_tool("add_note", {"note_id": i, "text": i}) for i in ids)
        )
        assert all(not r.is_error for r in results), results
        listed = await client.call_tool("note_ids", {})
        assert sorted(listed.structured_content["result"]) == sorted(["N-1", *ids])
        records = await trajectory(http)
        assert [r["seq"] for r in records] == list(range(len(ids) + 1))
        added = [r["args"]["note_id"] for r in records if r["tool"] == "add_note"]
        assert sorted(added) == sorted(ids)
        assert records[-1]["state_hash"] == await state_hash(http)


# -- known bugs ------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings:UserWarning")
@pytest.mark.parametrize("session", [123, {"episode": 1}], ids=["number", "object"])
async def test_a_session_in_meta_that_is_not_a_string_never_breaks_the_record(
    served: Served, session: Any
) -> None:
    async with rest(served.url) as http, mcp_client(served.url + "/mcp") as client:
        before = await state_hash(http)
        result = await client.call_tool(
            "add_note", {"note_id": "N-2", "text": "x"}, meta={META_SESSION: session}
        )
        records = await trajectory(http)
    if result.is_error:  # refusing the envelope is fine, as long as nothing happened
        assert await state_hash(http) == before
    for record in records:
        assert record["session"] is None or isinstance(record["session"], str), record


def test_a_client_holding_the_get_stream_does_not_keep_the_server_from_stopping(
    notes_env: Environment,
) -> None:
    port = free_port()
    server = make_server(Gateway(notes_env), host="127.0.0.1", port=port)
    thread = threading.Thread(target=server.run, name=f"mcp-uvicorn-{port}", daemon=True)
    thread.start()
    client = httpx.Client(timeout=WAIT_S)
    try:
        deadline = time.monotonic() + WAIT_S
        while not server.started:
            assert thread.is_alive(), "the server thread died during startup"
            assert time.monotonic() < deadline, f"the server did not start within {WAIT_S} s"
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port}/mcp"
        with client.stream("GET", url, headers={"Accept": "text/event-stream"}) as response:
            # The spec allows 405 here (no stream offered); a stream must not pin the server.
            assert response.status_code in (200, 405), response.status_code
            server.should_exit = True
            thread.join(timeout=5)
            stopped = not thread.is_alive()
    finally:
        client.close()  # once the stream is gone a stuck server finishes stopping
        server.should_exit = True
        thread.join(timeout=WAIT_S)
        assert not thread.is_alive(), f"the server did not stop within {WAIT_S} s"
    assert stopped, "the server was still running 5 s after it was told to stop"
