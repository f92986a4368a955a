"""A2A 0.3 interop, against the real thing: upstream-era clients (a2a-sdk 0.3, run in its
own virtualenv as a separate process) call the agents we serve, and our client calls an
agent built on upstream's own A2A framework. Also the wire upstream's task runner speaks
to an agent: mcp-config `add` before the prompt, JSON-RPC `message/send` (non-blocking)
to `<agent>/a2a`, `tasks/get` until the task ends, the answer in `status.message`."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import json
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentenv import Environment, Gateway
from agentenv.agents import AgentError, AgentTurn
from agentenv.agents.a2a import MCP_CONFIG_URI
from agentenv.agents.a2a.client import RemoteA2AAgent, fetch_card, send_instruction
from agentenv.agents.a2a.mcp_tools import McpConfig, NoTools
from agentenv.agents.a2a.server import serve_agent
from agentenv.serve.background import BackgroundServer
from agentenv.serve.server import make_server


def _helper() -> Any:
    """tests/agents/a2a_v03/upstream.py (pytest imports test files by path, so by path)."""
    path = Path(__file__).parent / "a2a_v03" / "upstream.py"
    spec = importlib.util.spec_from_file_location("agentenv_a2a_v03_upstream", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "drive"):
        spec.loader.exec_module(module)
    return module


_up = _helper()
drive, echo_agent, upstream_python = _up.drive, _up.echo_agent, _up.upstream_python
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
    - {id: n1, text: hello}
tools:
  - name: add_note
    crud: {collection: notes, op: create}
  - name: list_notes
    crud: {collection: notes, op: list}
"""


@pytest.fixture(scope="session")
def upstream() -> Path:
    return upstream_python()


@pytest.fixture(scope="module")
def notes_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder = tmp_path_factory.mktemp("a2a-v03-notes")
    (folder / "env.yaml").write_text(textwrap.dedent(NOTES_ENV))
    return Environment.load(folder)


class Served:
    """A gateway served with one token per role."""

    def __init__(self, gateway: Gateway, server: BackgroundServer, tokens: dict[str, str]):
        self.gateway = gateway
        self.server = server
        self.tokens = tokens
        self.mcp_url = server.url + "/mcp"

    def calls(self) -> list[Any]:
        return [r for r in self.gateway.instance().trajectory if r.kind == "call"]


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


class Lister:
    """Lists the notes through its tools and says what it saw."""

    name = "lister"

    async def run_turn(self, turn: AgentTurn) -> str:
        listed = await turn.tools.call("list_notes", {})
        ids = sorted(n["id"] for n in listed.value["notes"]) if listed.ok else None
        return json.dumps({"prompt": turn.prompt, "ids": ids, "role": turn.role})


class Teller:
    """Says what its turn was told (no tools)."""

    name = "teller"

    async def run_turn(self, turn: AgentTurn) -> str:
        return json.dumps(
            {
                "agent_name": turn.agent_name,
                "role": turn.role,
                "system_prompt": turn.system_prompt,
                "model": turn.model,
                "max_turns": turn.max_turns,
            }
        )


@pytest.fixture
async def lister() -> AsyncIterator[str]:
    server = await serve_agent(Lister())
    try:
        yield server.url
    finally:
        await server.stop()


# -- an a2a-sdk 0.3 client calls our agent ----------------------------------------------------


@pytest.mark.parametrize(
    ("transport", "streaming"),
    [("JSONRPC", False), ("JSONRPC", True), ("HTTP+JSON", False), ("HTTP+JSON", True)],
)
async def test_an_a2a_03_client_gets_our_agents_answer(
    upstream: Path, served: Served, lister: str, transport: str, streaming: bool
) -> None:
    mcp = {
        "url": served.mcp_url,
        "token": served.tokens["reader"],
        "role": "reader",
        "env_id": "notes",
    }
    out = await drive(
        upstream,
        url=lister,
        transport=transport,
        streaming=streaming,
        text="what notes are there?",
        metadata={MCP_CONFIG_URI: mcp, "prompt_id": "p-03"},
    )
    card = out["card"]
    assert (card["name"], card["url"], card["preferred_transport"]) == (
        "lister",
        lister + "/a2a",
        "JSONRPC",
    )
    assert card["protocol_version"].startswith("0.3")
    assert [lister + "/a2a/rest", "HTTP+JSON"] in card["additional"]
    assert MCP_CONFIG_URI in card["extensions"]
    task = out["task"]
    assert (task["state"], task["fetched_state"]) == ("completed", "completed")
    [answer] = task["artifacts"]["response"]
    assert json.loads(answer) == {
        "prompt": "what notes are there?",
        "ids": ["n1"],
        "role": "reader",
    }
    assert task["status_text"] == [answer]  # where upstream's task runner reads it
    [call] = served.calls()
    assert (call.tool, call.role, call.session) == ("list_notes", "reader", "p-03")


async def test_an_a2a_03_client_sees_a_bad_request_as_a_failed_task(
    upstream: Path, lister: str
) -> None:
    out = await drive(
        upstream, url=lister, text="hi", metadata={MCP_CONFIG_URI: {"url": "ftp://nowhere"}}
    )
    assert out["task"]["state"] == "failed"
    [reason] = out["task"]["status_text"]
    assert MCP_CONFIG_URI in reason and "http(s) URL" in reason


# -- upstream's task runner's wire, against our agent -----------------------------------------


async def rpc(http: httpx.AsyncClient, url: str, method: str, params: dict[str, Any]) -> Any:
    answer = await http.post(
        url + "/a2a", json={"jsonrpc": "2.0", "id": "1", "method": method, "params": params}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert "error" not in body, body
    return body["result"]


async def test_registered_mcp_servers_serve_every_later_prompt(served: Served, lister: str) -> None:
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        card = (await http.get(lister + "/.well-known/agent.json")).json()
        mcp_ext = next(e for e in card["capabilities"]["extensions"] if e["uri"] == MCP_CONFIG_URI)
        endpoint = lister + mcp_ext["params"]["endpoint"]
        headers = {"Authorization": f"Bearer {served.tokens['writer']}", "X-Extra": "kept"}
        added = await http.post(endpoint, json={"url": served.mcp_url, "headers": headers})
        assert added.status_code == 200, added.text
        assert added.json()["status"] == "added" and added.json()["url"] == served.mcp_url
        [(name, listed)] = (await http.get(endpoint)).json()["mcp_servers"].items()
        assert listed == {"url": served.mcp_url, "has_headers": True}
        assert name == added.json()["name"]
        message = {
            "messageId": uuid.uuid4().hex,
            "role": "user",
            "parts": [{"kind": "text", "text": "list"}],
        }
        sent = await rpc(
            http, lister, "message/send", {"message": message, "configuration": {"blocking": False}}
        )
        task: dict[str, Any] = sent
        while task["status"]["state"] not in ("completed", "failed", "canceled", "rejected"):
            task = await rpc(http, lister, "tasks/get", {"id": sent["id"]})
        assert task["status"]["state"] == "completed", task
        [part, usage] = task["status"]["message"]["parts"]
        assert part["kind"] == "text"
        assert usage == {"kind": "data", "data": {"usage": {"tool_call_count": 1}}}
        assert json.loads(part["text"])["ids"] == ["n1"]
        trajectory = await http.post(lister + "/ext/trajectory", json={"task_id": sent["id"]})
        assert trajectory.status_code == 200
        [logged] = trajectory.json()["trajectory"]["calls"]
        assert logged["tool"] == "list_notes"
    [call] = served.calls()
    assert call.role == "writer"  # the server took it from the registered bearer token


async def test_agent_config_sets_what_later_turns_are_told() -> None:
    server = await serve_agent(Teller())
    try:
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            card = (await http.get(server.url + "/.well-known/agent-card.json")).json()
            ext = next(
                e
                for e in card["capabilities"]["extensions"]
                if e["uri"] == "urn:agentenv:agent-config/v1"
            )
            supported = ext["params"]["methods"]["set"]["request"]["supported"]
            assert {"name", "role", "system_prompt", "model", "max_turns"} <= set(supported)
            endpoint = server.url + ext["params"]["endpoint"]
            settings = {"name": "t1", "role": "teller", "system_prompt": "Be kind.", "max_turns": 4}
            assert (await http.post(endpoint, json=settings)).json() == {"status": "updated"}
            assert (await http.get(endpoint)).json() == {"config": settings}
            refused = await http.post(endpoint, json={"effort": "high"})
            assert refused.status_code == 400 and "effort" in refused.json()["detail"]
            bad = await http.post(endpoint, json={"max_turns": 0})
            assert bad.status_code == 400 and "max_turns" in bad.json()["detail"]
            message = {
                "messageId": uuid.uuid4().hex,
                "role": "user",
                "parts": [{"kind": "text", "text": "who are you?"}],
            }
            told = await rpc(http, server.url, "message/send", {"message": message})
            [part, _] = told["status"]["message"]["parts"]
            # a message's own metadata wins over the configuration
            message = {**message, "messageId": uuid.uuid4().hex, "metadata": {"model": "m2"}}
            again = await rpc(http, server.url, "message/send", {"message": message})
            [part2, _] = again["status"]["message"]["parts"]
    finally:
        await server.stop()
    assert json.loads(part["text"]) == {
        "agent_name": "t1",
        "role": "teller",
        "system_prompt": "Be kind.",
        "model": None,
        "max_turns": 4,
    }
    assert json.loads(part2["text"])["model"] == "m2"


async def test_the_extension_endpoints_refuse_what_upstream_refuses(lister: str) -> None:
    async with httpx.AsyncClient(timeout=WAIT_S) as http:
        mcp = lister + "/ext/mcp-config"
        unknown = await http.post(mcp, json={"url": "http://127.0.0.1:1/mcp", "token": "x"})
        assert unknown.status_code == 400 and "token" in unknown.json()["detail"]
        missing = await http.post(mcp, json={"headers": {}})
        assert missing.status_code == 400 and "url" in missing.json()["detail"]
        garbage = await http.post(mcp, content=b"{not json")
        assert garbage.status_code == 400 and "JSON" in garbage.json()["detail"]
        not_http = await http.post(mcp, json={"url": "ftp://x/mcp"})
        assert not_http.status_code == 400 and "http(s)" in not_http.json()["detail"]
        first = await http.post(mcp, json={"url": "http://127.0.0.1:1/mcp", "name": "a"})
        assert first.status_code == 200
        again = await http.post(mcp, json={"url": "http://127.0.0.1:1/mcp", "name": "b"})
        assert again.status_code == 409 and "'a'" in again.json()["detail"]
        same_name = await http.post(mcp, json={"url": "http://127.0.0.1:2/mcp", "name": "a"})
        assert same_name.status_code == 409
        peers = lister + "/ext/peer-agents"
        twice = {"peers": [{"name": "p", "url": "http://x"}, {"name": "p", "url": "http://y"}]}
        assert (await http.post(peers, json=twice)).status_code == 400
        ok = await http.post(peers, json={"peers": [{"name": "p", "url": "http://x"}]})
        assert ok.json() == {"status": "updated", "peers": 1}
        assert (await http.get(peers)).json() == {"peers": [{"name": "p", "url": "http://x"}]}
        nothing = await http.post(lister + "/ext/trajectory", json={"task_id": "nope"})
        assert nothing.status_code == 404 and "nope" in nothing.json()["detail"]


# -- our client calls an agent built on upstream's framework ----------------------------------


async def test_our_client_reads_an_upstream_agents_card_and_gets_its_answer(
    upstream: Path,
) -> None:
    async with echo_agent(upstream) as url:
        card = await fetch_card(url)
        # upstream names its endpoint by path; it resolves against the agent's address
        assert [i.url for i in card.supported_interfaces] == [url + "/a2a"]
        answer = json.loads(await send_instruction(url, "hello there", timeout=WAIT_S))
    assert answer["prompt"] == "hello there"
    assert answer["servers"] == {}


async def test_a_bound_remote_agent_registers_its_environment_and_acts_in_it(
    upstream: Path, served: Served
) -> None:
    async with echo_agent(upstream) as url:
        config = McpConfig(url=served.mcp_url, token=served.tokens["writer"], env_id="notes")
        agent = RemoteA2AAgent(url, timeout=30).bind([config])
        turn = AgentTurn(
            prompt_id="p1",
            prompt='call add_note {"record": {"id": "n2", "text": "from upstream"}}',
            tools=NoTools(),  # the remote agent has its own
            agent_name="echo",
            role="writer",
            system_prompt="Be brief.",
            max_turns=3,  # not among the fields its card supports: never sent
        )
        first = json.loads(await agent.run_turn(turn))
        # a second turn, and a rebound agent, register nothing new
        again = RemoteA2AAgent(url, timeout=30).bind([config])
        second = json.loads(await again.run_turn(dataclasses.replace(turn, prompt="look")))
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            listed = (await http.get(url + "/ext/mcp-config")).json()["mcp_servers"]
    listed.pop("peer_agents", None)  # upstream's SDK serves the peers as one more server
    assert listed == {"notes": {"url": served.mcp_url, "has_headers": True}}
    assert first["servers"]["notes"]["tools"] == ["add_note", "list_notes"]
    assert first["servers"]["notes"]["is_error"] is False, first
    assert ["Authorization", f"Bearer {served.tokens['writer']}"] in first["headers"]["notes"]
    assert second["servers"]["notes"]["tools"] == ["add_note", "list_notes"]
    # agent-config `set`: only what its card supports (name, role, system_prompt here)
    assert first["config"] == {
        "name": "echo",
        "role": "writer",
        "system_prompt": "Be brief.",
        "timeout_seconds": 600,
    }
    assert served.gateway.instance().state.get("notes", "n2")["text"] == "from upstream"
    [call] = served.calls()
    assert (call.tool, call.role) == ("add_note", "writer")


async def test_a_slow_upstream_agent_times_out_and_its_task_is_canceled(
    upstream: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "canceled"
    async with echo_agent(upstream) as url:
        agent = RemoteA2AAgent(url, timeout=2)
        turn = AgentTurn(
            prompt_id="p", prompt=f"sleep 60 {marker}", tools=NoTools(), agent_name="a", role="r"
        )
        with pytest.raises(AgentError, match=r"did not finish within 2 s"):
            await agent.run_turn(turn)
        # it cannot stream, so it was polled: the task id was known, and the task canceled
        for _ in range(200):
            if marker.exists():
                break
            await asyncio.sleep(0.05)
    assert marker.read_text() == "canceled"


async def test_an_upstream_agent_that_refuses_the_registration_fails_the_turn(
    upstream: Path,
) -> None:
    async with echo_agent(upstream) as url:
        # upstream's SDK keeps the name peer_agents for its own server: a 409 that is not ours
        config = McpConfig(url="http://127.0.0.1:9/mcp", env_id="peer_agents")
        agent = RemoteA2AAgent(url, timeout=30).bind([config])
        turn = AgentTurn(prompt_id="p", prompt="hi", tools=NoTools(), agent_name="a", role="r")
        with pytest.raises(AgentError, match=r"refused POST /ext/mcp-config \(HTTP 409\)"):
            await agent.run_turn(turn)
