"""The AgentEnv backend against real servers: our own `agent-env serve`, and an env written
with upstream's protocol SDK in its own virtualenv; plus the bad cards."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.env.servers.children import child_tasks

from agentenv.env.servers import loop
from agentenv.env.servers.agentenv import AgentEnvBackend, connect_agentenv, invoke_extension
from agentenv.env.servers.base import ServerError
from agentenv.spec.server import ServerSpec

_spec = importlib.util.spec_from_file_location(
    "http_servers_procs", Path(__file__).parent / "http_servers" / "procs.py"
)
procs = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(procs)  # type: ignore[union-attr]
SERVERS = Path(__file__).parent / "http_servers"


@pytest.fixture(scope="module")
def ours() -> Iterator[str]:
    port = procs.free_port()
    argv = ["agent-env", "serve", "examples/envs/support-desk", "--port", str(port)]
    with procs.serving(argv, port) as base:
        yield base


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    if not procs.UPSTREAM_PYTHON.is_file():
        pytest.skip(f"no upstream protocol SDK virtualenv at {procs.UPSTREAM_PYTHON}")
    port = procs.free_port()
    env = {"MCP_HOST": "127.0.0.1", "MCP_PORT": str(port)}
    argv = [str(procs.UPSTREAM_PYTHON), str(SERVERS / "upstream_env.py")]
    with procs.serving(argv, port, env=env) as base:
        yield base


def test_our_server_card_tools_and_data_plane(ours: str, tmp_path: Path) -> None:
    child = loop.run(AgentEnvBackend(ServerSpec(url=ours), tmp_path, None).start(tmp_path))
    try:
        assert child.card is not None and child.card["name"] == "support-desk"
        uris = [e["uri"] for e in child.card["capabilities"]["extensions"]]
        assert "urn:agentenv:clock/v1" in uris
        assert child.has_data_plane and child.data_url == ours + "/agentenv"
        names = [t.name for t in loop.run(child.list_tools())]
        assert "list_tickets" in names
        answer = loop.run(child.call_tool("list_tickets", {}, None, 30))
        assert not answer.is_error

        seeded = loop.run(child.data("data/get"))
        assert seeded["parts"] and seeded["parts"][0]["kind"] == "data"
        assert loop.run(child.data("data/reset")) == {}
        emptied = loop.run(child.data("data/get"))
        assert emptied != seeded
        assert loop.run(child.data("data/add", {"parts": seeded["parts"]})) == {}
        assert loop.run(child.data("data/get")) == seeded

        now = loop.run(invoke_extension(child, "urn:agentenv:clock/v1", "get_time", {}))
        assert isinstance(now, dict) and now
        with pytest.raises(ServerError, match="has no method 'nope'"):
            loop.run(invoke_extension(child, "urn:agentenv:clock/v1", "nope", {}))
        with pytest.raises(ServerError, match="no extension urn:x"):
            loop.run(invoke_extension(child, "urn:x", "get", {}))
    finally:
        loop.run(child.close())
    assert child_tasks() == []


def test_upstream_sdk_env(upstream: str, tmp_path: Path) -> None:
    spec = ServerSpec(url=upstream)
    child = loop.run(connect_agentenv(upstream, spec, label="upstream tiny"))
    try:
        assert child.card is not None and child.card["name"] == "tiny"
        assert [t.name for t in loop.run(child.list_tools())] == ["shout"]
        answer = loop.run(child.call_tool("shout", {"text": "hi"}, {"agentenv.io/role": "a"}, 30))
        assert not answer.is_error and answer.content[0]["text"] == "HI"
        # This env declares no data handlers: the server's JSON-RPC error, with its code.
        with pytest.raises(ServerError, match=r"/agentenv: data/get failed with error -32601"):
            loop.run(child.data("data/get"))
    finally:
        loop.run(child.close())
    assert child_tasks() == []


def test_a_url_that_does_not_answer(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{procs.free_port()}"
    with pytest.raises(ServerError, match=rf"{url}/.well-known/agent-env.json: the server did"):
        loop.run(AgentEnvBackend(ServerSpec(url=url), tmp_path, None).start(tmp_path))
    assert child_tasks() == []


@pytest.mark.parametrize(
    ("flag", "message"),
    [("--card-junk", "the card is not JSON"), ("--card-no-mcp", "the card has no MCP interface")],
)
def test_bad_cards(flag: str, message: str, tmp_path: Path) -> None:
    port = procs.free_port()
    argv = [sys.executable, str(SERVERS / "mcp_http.py"), str(port), flag]
    with procs.serving(argv, port) as b:
        where = f"{b}/.well-known/agent-env.json: {message}"
        with pytest.raises(ServerError, match=where):
            loop.run(AgentEnvBackend(ServerSpec(url=b), tmp_path, None).start(tmp_path))
    assert child_tasks() == []
