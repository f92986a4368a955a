"""The backend registry: names, the factory, and the card probe that tells an AgentEnv
server from a plain MCP server at a `url` (real servers on free ports)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from agentenv.env.servers import loop
from agentenv.env.servers.agentenv import AgentEnvChild
from agentenv.env.servers.base import ServerError
from agentenv.env.servers.http import HttpBackend
from agentenv.env.servers.registry import (
    BACKENDS,
    AutoUrlBackend,
    backend_for,
    backend_names,
    card_base,
)
from agentenv.env.servers.stdio import StdioBackend
from agentenv.spec.server import ServerSpec

_spec = importlib.util.spec_from_file_location(
    "http_servers_procs", Path(__file__).parent / "http_servers" / "procs.py"
)
procs = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(procs)  # type: ignore[union-attr]
SERVERS = Path(__file__).parent / "http_servers"


def test_builtin_names() -> None:
    assert BACKENDS.group == "agentenv.env_backends" and BACKENDS.config_key == "env_backends"
    assert backend_names()[:3] == ["stdio", "http", "agentenv"]


def test_factory_by_name(tmp_path: Path) -> None:
    assert isinstance(backend_for(ServerSpec(command=["x"]), tmp_path, None), StdioBackend)
    spec = ServerSpec(url="http://127.0.0.1:1", backend="http")
    assert isinstance(backend_for(spec, tmp_path, None), HttpBackend)
    assert isinstance(backend_for(ServerSpec(url="http://h"), tmp_path, None), AutoUrlBackend)


def test_unknown_backend_lists_the_names(tmp_path: Path) -> None:
    spec = ServerSpec(backend="carrier-pigeon", url="http://h")
    with pytest.raises(ServerError, match=r"env.yaml: server.backend: unknown env backend") as e:
        backend_for(spec, tmp_path, tmp_path / "env.yaml")
    assert "'carrier-pigeon'" in str(e.value) and "stdio, http, agentenv" in str(e.value)


def test_card_base() -> None:
    assert card_base("http://h:1/mcp/") == "http://h:1"
    assert card_base("http://h:1/svc/x") == "http://h:1/svc/x"


def test_a_url_with_a_card_is_agentenv(tmp_path: Path) -> None:
    port = procs.free_port()
    argv = ["agent-env", "serve", "examples/envs/support-desk", "--port", str(port)]
    with procs.serving(argv, port) as base:
        backend = backend_for(ServerSpec(url=base + "/mcp"), tmp_path, None)
        child = loop.run(backend.start(tmp_path))
        try:
            assert isinstance(child, AgentEnvChild) and child.has_data_plane
            assert child.card is not None and child.card["name"] == "support-desk"
        finally:
            loop.run(child.close())


def test_a_url_without_a_card_is_http(tmp_path: Path) -> None:
    port = procs.free_port()
    with procs.serving([sys.executable, str(SERVERS / "mcp_http.py"), str(port)], port) as base:
        backend = backend_for(ServerSpec(url=base), tmp_path, None)
        child = loop.run(backend.start(tmp_path))
        try:
            assert not isinstance(child, AgentEnvChild) and child.card is None
            assert [t.name for t in loop.run(child.list_tools())] == ["add"]
        finally:
            loop.run(child.close())
        assert isinstance(backend.chosen, HttpBackend)
