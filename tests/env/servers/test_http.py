"""The Streamable HTTP backend against a real MCP SDK server (uvicorn, a free port)."""

from __future__ import annotations

import importlib.util
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.env.servers.children import child_tasks

from agentenv.env.servers import loop
from agentenv.env.servers.base import ServerError
from agentenv.env.servers.http import HttpBackend
from agentenv.spec.server import ServerSpec

_spec = importlib.util.spec_from_file_location(
    "http_servers_procs", Path(__file__).parent / "http_servers" / "procs.py"
)
procs = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(procs)  # type: ignore[union-attr]
SERVER = str(Path(__file__).parent / "http_servers" / "mcp_http.py")


@pytest.fixture(scope="module")
def guarded() -> Iterator[str]:
    port = procs.free_port()
    with procs.serving([sys.executable, SERVER, str(port), "s3cret"], port) as base:
        yield base


def test_headers_and_token_reach_the_server(guarded: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("T13_TOKEN", "s3cret")
    spec = ServerSpec(url=guarded, headers={"X-Test": "yes"}, token="${T13_TOKEN}")
    child = loop.run(HttpBackend(spec, tmp_path, None).start(tmp_path))
    try:
        assert child.label == guarded + "/mcp"  # the base URL was given: /mcp was found
        assert [t.name for t in loop.run(child.list_tools())] == ["add"]
        answer = loop.run(child.call_tool("add", {"a": 2, "b": 3}, {"agentenv.io/role": "x"}, 10))
        assert not answer.is_error and answer.structured == {"result": 5}
        assert child.alive and not child.has_data_plane
    finally:
        loop.run(child.close())
    assert child_tasks() == []


def test_the_endpoint_itself_works(guarded: str, tmp_path: Path) -> None:
    spec = ServerSpec(url=guarded + "/mcp", headers={"X-Test": "yes"}, token="s3cret")
    child = loop.run(HttpBackend(spec, tmp_path, None).start(tmp_path))
    try:
        assert child.label == guarded + "/mcp"
    finally:
        loop.run(child.close())


def test_a_wrong_token_says_so(guarded: str, tmp_path: Path) -> None:
    spec = ServerSpec(url=guarded + "/mcp", headers={"X-Test": "yes"}, token="wrong")
    with pytest.raises(ServerError, match=r"/mcp: the server refused the request with 401") as e:
        loop.run(HttpBackend(spec, tmp_path, None).start(tmp_path))
    assert "token" in str(e.value)
    assert child_tasks() == []


def test_no_token_says_so(guarded: str, tmp_path: Path) -> None:
    spec = ServerSpec(url=guarded, headers={"X-Test": "yes"})
    with pytest.raises(ServerError, match=r"401.*no token was sent"):
        loop.run(HttpBackend(spec, tmp_path, None).start(tmp_path))
    assert child_tasks() == []


def test_a_url_that_does_not_answer(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{procs.free_port()}"
    spec = ServerSpec(url=url, startup_timeout=5)
    with pytest.raises(ServerError, match=rf"MCP server at {url} did not answer"):
        loop.run(HttpBackend(spec, tmp_path, None).start(tmp_path))
    assert child_tasks() == []


def test_not_an_http_url(tmp_path: Path) -> None:
    with pytest.raises(ServerError, match="not an http"):
        loop.run(HttpBackend(ServerSpec(url="ftp://x"), tmp_path, None).start(tmp_path))


def test_a_server_that_accepts_but_never_answers(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        spec = ServerSpec(url=url, startup_timeout=1)
        with pytest.raises(ServerError, match=rf"{url}: no MCP session could be opened.*within"):
            loop.run(HttpBackend(spec, tmp_path, None).start(tmp_path))
    assert child_tasks() == []
