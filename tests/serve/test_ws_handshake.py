"""The WebSocket handshake: who may open a session, over a real uvicorn server.

A raw handshake is written on a socket here, so each test sets Host and Origin to what a
hostile page or a rebinding attack would send. The cross-site checks are RequestGuard's,
applied to `websocket` scopes (`serve/_ws_guard.py`): one test sends the same
headers to an HTTP route and to `/ws` and checks both get the same verdict.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
import uvicorn
from starlette.applications import Starlette
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from agentenv import Gateway
from agentenv.gateway.auth import Authenticator
from agentenv.serve.ws import websocket_routes
from agentenv.serve.ws_client import WebSocketError, WebSocketSession, ws_url

TOKENS = {"s1": "agent", "s2": "admin"}


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def raw_request(
    url: str, path: str, headers: dict[str, str], *, upgrade: bool
) -> tuple[int, dict[str, str], bytes]:
    """One request on a fresh socket, with exactly these headers (Host included): a
    WebSocket handshake with `upgrade`, else a plain GET. Returns status, headers, body."""
    parts = urlsplit(url)
    assert parts.hostname and parts.port
    lines = [f"GET {path} HTTP/1.1"]
    sent = {"Host": f"{parts.hostname}:{parts.port}", **headers}
    if upgrade:
        key = base64.b64encode(os.urandom(16)).decode()
        sent |= {
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": key,
            "Sec-WebSocket-Version": "13",
        }
    lines += [f"{name}: {value}" for name, value in sent.items()]
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        found = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            found[name.strip().lower()] = value.strip()
        status = int(status_line.split(" ")[1])
        length = int(found.get("content-length", "0")) if status != 101 else 0
        while len(body) < length:
            chunk = sock.recv(65536)
            if not chunk:
                break
            body += chunk
    return status, found, body


def refused(answer: tuple[int, dict[str, str], bytes], status: int, kind: str) -> dict[str, Any]:
    """The handshake's refusal: an HTTP answer in the one REST error shape."""
    got, headers, body = answer
    assert got == status, body
    assert headers["content-type"] == "application/json"
    parsed = json.loads(body)
    assert parsed["ok"] is False and parsed["error"]["kind"] == kind
    error: dict[str, Any] = parsed["error"]
    return error


@pytest.fixture(scope="module")
def trusted(desk_env, live_server) -> Iterator[tuple[Gateway, str]]:
    """A served desk gateway in trusted local mode (loopback, no tokens)."""
    gateway = Gateway(desk_env)
    with live_server(gateway) as url:
        yield gateway, url


@pytest.fixture(scope="module")
def tokened(desk_env, live_server) -> Iterator[tuple[Gateway, str]]:
    """A served desk gateway with tokens s1 (agent) and s2 (admin)."""
    gateway = Gateway(desk_env)
    with live_server(gateway, tokens=TOKENS) as url:
        yield gateway, url


# -- cross-site handshakes in trusted local mode ---------------------------------------------------

FOREIGN_ORIGINS = [
    "http://evil.example",
    "https://evil.example:443",
    "http://127.0.0.1.evil.example",
    "http://localhost.evil.example:8765",
    "http://evil.example@localhost",
    "null",
    "file://",
    "chrome-extension://abcdef",
]
LOCAL_ORIGINS = [
    "http://127.0.0.1:{port}",
    "http://localhost:3000",
    "https://localhost",
    "http://[::1]:8080",
]
FOREIGN_HOSTS = [
    "evil.example",
    "evil.example:{port}",
    "127.0.0.1.evil.example:{port}",
    "localhost:{port}@evil.example",
    "localhost:nope",
    "[::1",
    "10.1.2.3:{port}",
]
LOCAL_HOSTS = [
    "127.0.0.1:{port}",
    "localhost:{port}",
    "LOCALHOST",
    "127.0.0.1",
    "[::1]:{port}",
    "localhost.",
]


@pytest.mark.parametrize("origin", FOREIGN_ORIGINS)
def test_a_foreign_origin_cannot_open_a_session(trusted, origin: str) -> None:
    gateway, url = trusted
    for path in ("/ws", "/instances/default/ws"):
        error = refused(
            raw_request(url, path, {"Origin": origin}, upgrade=True), 403, "foreign_origin"
        )
        assert "trusted local mode" in error["message"] and "--token" in error["hint"]
    assert gateway.instance().trajectory.calls() == []


@pytest.mark.parametrize("host", FOREIGN_HOSTS)
def test_a_rebinding_host_cannot_open_a_session(trusted, host: str) -> None:
    _, url = trusted
    port = urlsplit(url).port
    answer = raw_request(url, "/ws", {"Host": host.format(port=port)}, upgrade=True)
    assert "DNS rebinding" in refused(answer, 421, "misdirected_host")["message"]


@pytest.mark.parametrize("origin", LOCAL_ORIGINS)
def test_a_loopback_origin_opens_a_session(trusted, origin: str) -> None:
    _, url = trusted
    port = urlsplit(url).port
    status, headers, _ = raw_request(url, "/ws", {"Origin": origin.format(port=port)}, upgrade=True)
    assert status == 101 and len(headers["agentenv-session"]) == 32


@pytest.mark.parametrize("host", LOCAL_HOSTS)
def test_a_loopback_host_opens_a_session(trusted, host: str) -> None:
    _, url = trusted
    port = urlsplit(url).port
    status, _, _ = raw_request(url, "/ws", {"Host": host.format(port=port)}, upgrade=True)
    assert status == 101


def test_the_handshake_and_http_refuse_the_same_headers(trusted) -> None:
    """The WebSocket checks are a copy of RequestGuard's: the same headers get the same
    verdict (status and error kind) on `GET /state` and on the `/ws` handshake."""
    _, url = trusted
    port = urlsplit(url).port
    cases: list[dict[str, str]] = [{}]
    cases += [{"Origin": o.format(port=port)} for o in FOREIGN_ORIGINS + LOCAL_ORIGINS]
    cases += [{"Host": h.format(port=port)} for h in FOREIGN_HOSTS + LOCAL_HOSTS]
    cases += [
        {"Host": "evil.example", "Origin": "http://evil.example"},
        {"Host": "localhost", "Origin": "http://evil.example"},
        {"Origin": "HTTP://LOCALHOST:1"},
        {"Origin": "http://localhost:1/path"},
        {"Origin": "ws://localhost"},
        {"Origin": " http://localhost "},
        {"Host": "[::1]:x"},
        {"Host": f"127.0.0.1:{port}", "Origin": "http://127.0.0.1:1"},
    ]
    for headers in cases:
        http_status, _, http_body = raw_request(url, "/state", headers, upgrade=False)
        ws_status, _, ws_body = raw_request(url, "/ws", headers, upgrade=True)
        if http_status == 200:
            assert ws_status == 101, (headers, ws_body)
        else:
            assert ws_status == http_status, (headers, ws_body)
            http_kind = json.loads(http_body)["error"]["kind"]
            assert json.loads(ws_body)["error"] == json.loads(http_body)["error"], headers
            assert http_kind in {"foreign_origin", "misdirected_host"}


# -- credentials ----------------------------------------------------------------------------------


def test_with_tokens_a_session_needs_a_bearer(tokened) -> None:
    gateway, url = tokened
    answer = raw_request(url, "/ws", {}, upgrade=True)
    assert "bearer token is required" in refused(answer, 401, "unauthenticated")["message"]
    assert answer[1]["www-authenticate"] == "Bearer"
    answer = raw_request(url, "/ws", {"Authorization": "Bearer nope"}, upgrade=True)
    assert "unknown bearer token" in refused(answer, 401, "unauthenticated")["message"]
    # The role header grants nothing once tokens exist.
    answer = raw_request(url, "/ws", {"AgentEnv-Role": "admin"}, upgrade=True)
    refused(answer, 401, "unauthenticated")
    assert gateway.instance().trajectory.calls() == []


def test_with_tokens_a_foreign_origin_with_a_bearer_is_served(tokened) -> None:
    # As over HTTP: with tokens the bearer protects (a page has none), not the Origin.
    _, url = tokened
    headers = {"Authorization": "Bearer s1", "Origin": "http://evil.example"}
    status, _, _ = raw_request(url, "/ws", headers, upgrade=True)
    assert status == 101


async def test_a_tokens_role_is_the_sessions_role(tokened) -> None:
    gateway, url = tokened
    async with await WebSocketSession.connect(url, token="s1", role="supervisor") as agent:
        names = [t["name"] for t in await agent.list_tools()]
        assert "close_ticket" not in names  # the token's role, not the header's
        denied = await agent.call("close_ticket", {"ticket_id": "T-1"})
        assert denied["ok"] is False and denied["error"]["kind"] == "denied"
        # Forking an instance is the control plane's: an agent token may not reset.
        with pytest.raises(WebSocketError) as caught:
            await agent.reset()
        assert caught.value.kind == "forbidden" and caught.value.code == "SESSION_ERROR"
        assert (await agent.state())["instance"] == "default"  # the session goes on
    records = gateway.instance().trajectory.calls()
    assert [(r.tool, r.role, r.principal) for r in records] == [
        ("close_ticket", "agent", "token:agent")
    ]
    async with await WebSocketSession.connect(url, token="s2", reset=True) as admin:
        assert admin.instance in gateway.instances
    assert gateway.instances == ["default"]


async def test_the_websockets_client_sees_the_refusal_status(trusted, tokened) -> None:
    _, url = tokened
    with pytest.raises(InvalidStatus) as caught:
        async with connect(ws_url(url)):
            pass
    assert caught.value.response.status_code == 401
    with pytest.raises(InvalidStatus) as caught:
        await WebSocketSession.connect(trusted[1], instance="nope")
    assert caught.value.response.status_code == 404
    assert json.loads(caught.value.response.body)["error"]["message"] == "no instance 'nope'"


# -- the routes' own switches, on a bare app --------------------------------------------------------


@contextlib.contextmanager
def bare_server(gateway: Gateway, **options: Any) -> Iterator[str]:
    """Only the WebSocket routes (`websocket_routes(gateway, auth, **options)`, trusted
    local mode) under uvicorn in a thread; yields the base URL."""
    port = free_port()
    app = Starlette(routes=websocket_routes(gateway, Authenticator(), **options))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def test_off_loopback_the_host_is_not_checked_but_the_origin_still_is(desk_env) -> None:
    with bare_server(Gateway(desk_env), loopback=False) as url:
        assert raw_request(url, "/ws", {"Host": "evil.example"}, upgrade=True)[0] == 101
        answer = raw_request(url, "/ws", {"Origin": "http://evil.example"}, upgrade=True)
        refused(answer, 403, "foreign_origin")
    with bare_server(Gateway(desk_env), loopback=True) as url:
        refused(
            raw_request(url, "/ws", {"Host": "evil.example"}, upgrade=True), 421, "misdirected_host"
        )


async def test_the_frame_limit_is_the_routes_own(desk_env) -> None:
    with bare_server(Gateway(desk_env), max_frame=200) as url:
        async with connect(ws_url(url), compression=None) as connection:
            frame = {"type": "step", "data": {"type": "call_tool", "tool_name": "refuse"}}
            small = json.dumps({**frame, "data": {**frame["data"], "arguments": {"reason": "x"}}})
            big = json.dumps(
                {**frame, "data": {**frame["data"], "arguments": {"reason": "é" * 100}}},
                ensure_ascii=False,
            )
            assert len(big) <= 200 < len(big.encode())  # the limit is in bytes, not characters
            await connection.send(big)
            answer = json.loads(await connection.recv())
            assert answer["data"]["code"] == "TOO_LARGE"
            assert "200 bytes" in answer["data"]["message"]
            await connection.send(small)
            answer = json.loads(await connection.recv())
            assert answer["data"]["observation"]["result"]["error"]["kind"] == "tool_error"
