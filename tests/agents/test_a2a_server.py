"""Serving our agents over A2A: the card, a turn that acts in a real served gateway over
MCP, and every way a request or an agent can go wrong ending in a failed task (never a
JSON-RPC internal error). Real a2a-sdk servers and clients, on 127.0.0.1 only."""

from __future__ import annotations

import json
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.types import Task, TaskState
from google.protobuf.json_format import MessageToDict

from agentenv import Environment, Gateway
from agentenv.agents import AgentError, AgentTurn, OracleAgent
from agentenv.agents.a2a import (
    AGENT_CONFIG_URI,
    MCP_CONFIG_URI,
    PEER_AGENTS_URI,
    SOLUTION_URI,
    TRAJECTORY_URI,
)
from agentenv.agents.a2a.client import exchange, fetch_card
from agentenv.agents.a2a.server import JSONRPC_PATH, serve_agent
from agentenv.serve.background import BackgroundServer
from agentenv.serve.server import make_server

WAIT_S = 10.0

NOTES_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: notes
roles: [{name: writer}, {name: reader}]
default_role: writer
state:
  notes: {}
seed:
  notes:
    - {id: n1, text: hello, stars: 1}
tools:
  - name: add_note
    crud: {collection: notes, op: create}
  - name: list_notes
    crud: {collection: notes, op: list}
  - module: tools.py
"""

TOOLS = '''
from agentenv import ToolContext, tool


@tool(roles=["writer"])
def star(ctx: ToolContext, note_id: str, stars: int) -> dict:
    """Give a note stars."""
    return ctx.state.update("notes", note_id, {"stars": stars})


@tool(kind="read")
def count(ctx: ToolContext) -> int:
    """How many notes there are."""
    return ctx.state.count("notes")
'''


@pytest.fixture(scope="module")
def notes_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder = tmp_path_factory.mktemp("a2a-notes")
    (folder / "env.yaml").write_text(textwrap.dedent(NOTES_ENV))
    (folder / "tools.py").write_text(textwrap.dedent(TOOLS))
    return Environment.load(folder)


class Served:
    """A gateway served with one token per role."""

    def __init__(self, gateway: Gateway, server: BackgroundServer, tokens: dict[str, str]):
        self.gateway = gateway
        self.server = server
        self.tokens = tokens

    def config(self, role: str, *, token: str | None = None) -> dict[str, str]:
        return {
            "url": self.server.url + "/mcp",
            "token": token or self.tokens[role],
            "role": role,
            "env_id": "notes",
        }


@pytest.fixture
async def served(notes_env: Environment) -> AsyncIterator[Served]:
    gateway = Gateway(notes_env)
    tokens = {"writer": uuid.uuid4().hex, "reader": uuid.uuid4().hex}
    server = await BackgroundServer.start(
        lambda port: make_server(
            gateway, port=port, tokens={secret: role for role, secret in tokens.items()}
        )
    )
    try:
        yield Served(gateway, server, tokens)
    finally:
        await server.stop()


class NoteTaker:
    """Lists its tools, stars n1 with the number in its config, reads the count back."""

    name = "note-taker"

    async def run_turn(self, turn: AgentTurn) -> str:
        names = sorted(t.name for t in turn.tools.list_tools())
        starred = await turn.tools.call("star", {"note_id": "n1", "stars": turn.config["stars"]})
        counted = await turn.tools.call("count", {})
        return json.dumps(
            {
                "tools": names,
                "starred": starred.ok,
                "denied": starred.denied,
                "value": starred.value,
                "count": counted.value,
                "role": turn.role,
                "prompt_id": turn.prompt_id,
                "peers": turn.peers,
                "history": turn.history,
                "system_prompt": turn.system_prompt,
            }
        )


async def send(url: str, text: str, metadata: dict[str, Any]) -> Task:
    card = await fetch_card(url)
    result = await exchange(url, card, text, metadata, timeout=WAIT_S)
    assert isinstance(result, Task), result
    return result


def artifact(task: Task, name: str) -> Any:
    found = [a for a in task.artifacts if a.name == name]
    assert len(found) == 1, [a.name for a in task.artifacts]
    part = found[0].parts[0]
    return part.text if part.HasField("text") else MessageToDict(part.data)


def reason(task: Task) -> str:
    return "\n".join(p.text for p in task.status.message.parts if p.HasField("text"))


def error_data(task: Task) -> dict[str, Any]:
    """The failed task's `{error_type, error_code, error_message}` (upstream's layout)."""
    [data] = [MessageToDict(p.data) for p in task.status.message.parts if p.HasField("data")]
    return data


# -- the card -----------------------------------------------------------------------------


async def test_the_card_declares_the_extensions_and_where_to_send() -> None:
    server = await serve_agent(NoteTaker())
    try:
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            raw = (await http.get(server.url + "/.well-known/agent-card.json")).json()
        card = await fetch_card(server.url)
    finally:
        await server.stop()
    assert raw["name"] == "note-taker"
    assert raw["version"]
    interfaces = [
        (i["url"], i["protocolBinding"], i["protocolVersion"]) for i in raw["supportedInterfaces"]
    ]
    assert interfaces == [
        (server.url + JSONRPC_PATH, "JSONRPC", "1.0"),
        (server.url + "/a2a/rest", "HTTP+JSON", "1.0"),
        (server.url + "/a2a", "JSONRPC", "0.3"),  # A2A 0.3 clients, upstream's task runner
        (server.url + "/a2a/rest", "HTTP+JSON", "0.3"),
    ]
    # The 0.3 card fields, for clients that read only those.
    assert (raw["url"], raw["preferredTransport"]) == (server.url + "/a2a", "JSONRPC")
    # every field upstream's card validator requires
    required = ["name", "description", "url", "version", "capabilities", "skills"]
    assert all(raw[f] for f in [*required, "defaultInputModes", "defaultOutputModes"])
    uris = [e.uri for e in card.capabilities.extensions]
    assert uris == [AGENT_CONFIG_URI, MCP_CONFIG_URI, PEER_AGENTS_URI, TRAJECTORY_URI]
    mcp = raw["capabilities"]["extensions"][1]
    # Upstream's layout: an endpoint and its methods; our per-message form rides along.
    assert mcp["params"]["endpoint"] == "/ext/mcp-config"
    assert mcp["params"]["methods"]["add"] == {
        "method": "POST",
        "request": {"required": ["url"], "optional": ["headers", "name"]},
    }
    assert mcp["params"]["methods"]["list"]["method"] == "GET"
    assert set(mcp["params"]["value"]) == {"url", "token", "role", "env_id"}


async def test_only_an_agent_that_replays_solutions_asks_for_them() -> None:
    server = await serve_agent(OracleAgent())
    try:
        card = await fetch_card(server.url)
    finally:
        await server.stop()
    assert card.name == "oracle"
    assert SOLUTION_URI in [e.uri for e in card.capabilities.extensions]


# -- a turn -------------------------------------------------------------------------------


async def test_a_turn_acts_in_the_gateway_named_by_the_request(served: Served) -> None:
    server = await serve_agent(NoteTaker())
    try:
        task = await send(
            server.url,
            "Star the first note.",
            {
                MCP_CONFIG_URI: served.config("writer"),
                PEER_AGENTS_URI: {"helper": "http://127.0.0.1:1"},
                "prompt_id": "p-7",
                "history": [{"role": "user", "text": "hi"}],
                "system_prompt": "Be brief.",
                "config": json.dumps({"stars": 5}),
            },
        )
    finally:
        await server.stop()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, reason(task)
    answer = json.loads(artifact(task, "response"))
    assert answer == {
        "tools": ["add_note", "count", "list_notes", "star"],
        "starred": True,
        "denied": False,
        "value": {"id": "n1", "text": "hello", "stars": 5},
        "count": 1,  # a value that is not an object comes back unwrapped
        "role": "writer",
        "prompt_id": "p-7",
        "peers": {"helper": "http://127.0.0.1:1"},
        "history": [{"role": "user", "text": "hi"}],
        "system_prompt": "Be brief.",
    }
    # The calls are the gateway's: the token's role, the prompt_id as the session.
    calls = [r for r in served.gateway.instance().trajectory if r.kind == "call"]
    assert [(r.tool, r.role, r.session, r.args) for r in calls] == [
        ("star", "writer", "p-7", {"note_id": "n1", "stars": 5}),
        ("count", "writer", "p-7", {}),
    ]
    assert served.gateway.instance().state.get("notes", "n1")["stars"] == 5  # an int, not 5.0
    log = artifact(task, "trajectory")
    assert log["prompt_id"] == "p-7"
    assert [c["tool"] for c in log["calls"]] == ["star", "count"]


async def test_the_role_comes_from_the_token_and_is_enforced(served: Served) -> None:
    server = await serve_agent(NoteTaker())
    try:
        # The reader's token, though the metadata claims the writer's role.
        config = {**served.config("reader"), "role": "writer"}
        task = await send(
            server.url, "Star it.", {MCP_CONFIG_URI: config, "config": '{"stars": 3}'}
        )
    finally:
        await server.stop()
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, reason(task)
    answer = json.loads(artifact(task, "response"))
    assert "star" not in answer["tools"]
    assert (answer["starred"], answer["denied"]) == (False, True)
    star = [r for r in served.gateway.instance().trajectory if r.tool == "star"]
    assert [(r.role, r.denied) for r in star] == [("reader", True)]
    assert served.gateway.instance().state.get("notes", "n1")["stars"] == 1


async def test_a_factory_gives_every_request_a_fresh_agent(served: Served) -> None:
    made: list[NoteTaker] = []

    def factory() -> NoteTaker:
        made.append(NoteTaker())
        return made[-1]

    server = await serve_agent(factory)
    try:
        for _ in range(2):
            meta = {MCP_CONFIG_URI: served.config("writer"), "config": '{"stars": 2}'}
            task = await send(server.url, "Star it.", meta)
            assert task.status.state == TaskState.TASK_STATE_COMPLETED, reason(task)
    finally:
        await server.stop()
    assert len(made) == 3  # one to read the name for the card, one per request
    assert len({id(a) for a in made}) == 3


async def test_a_default_environment_serves_requests_that_name_none(served: Served) -> None:
    from agentenv.agents.a2a.mcp_tools import McpConfig

    server = await serve_agent(NoteTaker(), mcp=McpConfig.parse(served.config("writer")))
    try:
        card = await fetch_card(server.url)
        task = await send(server.url, "Star it.", {"config": '{"stars": 4}'})
    finally:
        await server.stop()
    assert not card.capabilities.extensions[0].required
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, reason(task)
    assert json.loads(artifact(task, "response"))["role"] == "writer"


# -- what goes wrong ends in a failed task --------------------------------------------------


class Raiser:
    name = "raiser"

    def __init__(self, error: Exception) -> None:
        self.error = error

    async def run_turn(self, turn: AgentTurn) -> str:
        raise self.error


@pytest.mark.parametrize(
    ("error", "expected", "code"),
    [
        (AgentError("I cannot do that"), "I cannot do that", "agent_error"),
        (RuntimeError("boom"), "RuntimeError: boom", "agent_exception"),
    ],
)
async def test_an_agent_that_raises_fails_the_task(
    error: Exception, expected: str, code: str
) -> None:
    server = await serve_agent(Raiser(error))
    try:
        task = await send(server.url, "Go.", {})
    finally:
        await server.stop()
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert reason(task) == expected
    # what upstream's task runner reads from a failed task's status message
    assert error_data(task) == {
        "error_type": "agent_error",
        "error_code": code,
        "error_message": expected,
    }


BAD_METADATA = [
    ({MCP_CONFIG_URI: {"url": "ftp://x"}}, "'url' must be an http(s) URL"),
    ({MCP_CONFIG_URI: {"token": "t"}}, "url is required"),
    ({MCP_CONFIG_URI: {"url": "http://127.0.0.1:1/mcp", "x": 1}}, "unknown field 'x'"),
    ({MCP_CONFIG_URI: [{"url": "http://h/mcp"}, {"url": "http://i/mcp"}]}, "distinct 'env_id's"),
    ({PEER_AGENTS_URI: ["not", "a", "map"]}, "must map names to A2A URLs"),
    ({"history": "nope"}, "'history' must be a list"),
    ({"config": "{not json"}, "'config' is not valid JSON text"),
    ({"solution": '{"calls": 3}'}, "'solution' is not a solution turn"),
    ({"max_turns": -2}, "'max_turns' must be a whole number"),
]


async def test_bad_metadata_fails_the_task_naming_the_key() -> None:
    server = await serve_agent(NoteTaker())
    try:
        for metadata, expected in BAD_METADATA:
            task = await send(server.url, "Go.", metadata)
            assert task.status.state == TaskState.TASK_STATE_FAILED, metadata
            assert expected in reason(task), (metadata, reason(task))
    finally:
        await server.stop()


async def test_a_wrong_token_fails_the_task_before_the_agent_runs(served: Served) -> None:
    ran: list[str] = []

    class Recorder(NoteTaker):
        async def run_turn(self, turn: AgentTurn) -> str:
            ran.append(turn.prompt)
            return "ok"

    server = await serve_agent(Recorder())
    try:
        task = await send(
            server.url, "Go.", {MCP_CONFIG_URI: served.config("writer", token="forged")}
        )
    finally:
        await server.stop()
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert reason(task) == (
        f"cannot use the environment's MCP server at {served.server.url}/mcp: "
        "HTTP 401: unknown bearer token"
    )
    assert error_data(task)["error_type"] == "infra_error"
    assert error_data(task)["error_code"] == "environment_unreachable"
    assert ran == []
    assert [r for r in served.gateway.instance().trajectory if r.kind == "call"] == []


async def test_an_unreachable_environment_fails_the_task() -> None:
    server = await serve_agent(NoteTaker())
    try:
        task = await send(server.url, "Go.", {MCP_CONFIG_URI: {"url": "http://127.0.0.1:1/mcp"}})
        # (nothing listens on port 1)
    finally:
        await server.stop()
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert "cannot use the environment's MCP server at http://127.0.0.1:1/mcp" in reason(task)


async def test_a_message_with_no_text_fails_the_task() -> None:
    server = await serve_agent(NoteTaker())
    try:
        task = await send(server.url, "   ", {})
    finally:
        await server.stop()
    assert task.status.state == TaskState.TASK_STATE_FAILED
    assert reason(task) == "the message has no text: send the prompt as a text part"


async def test_a_plain_json_rpc_client_gets_a_task(tmp_path: Path) -> None:
    """No SDK on the client side: SendMessage over HTTP, as another implementation sends it."""
    server = await serve_agent(OracleAgent())
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "m-1",
                "role": "ROLE_USER",
                "parts": [{"text": "Answer."}],
                "metadata": {"solution": json.dumps({"calls": [], "response": "42"})},
            }
        },
    }
    try:
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            answer = await http.post(
                server.url + JSONRPC_PATH, json=body, headers={"A2A-Version": "1.0"}
            )
    finally:
        await server.stop()
    assert answer.status_code == 200, answer.text
    task = answer.json()["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["name"] == "response"
    assert task["artifacts"][0]["parts"] == [{"text": "42"}]
