"""RequestGuard: what a browser page could forge is refused before any route runs.

Served by a real uvicorn server on 127.0.0.1 (trusted local mode), as `agent-env serve`
runs it; the guard's own switches (`loopback`, `trusted`) also on a bare app in process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentenv import Gateway
from agentenv.serve._guard import RequestGuard, authority_name, is_json_type

RESET = {"jsonrpc": "2.0", "id": 1, "method": "data/reset"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.fixture(scope="module")
def served(desk_env, live_server, http_client) -> Iterator[httpx.Client]:
    """A client of a real server of the desk app (trusted local mode); every test leaves
    its state as it found it (the refusals are what is tested)."""
    with live_server(Gateway(desk_env)) as url, http_client(url) as client:
        yield client


def port_of(client: httpx.Client) -> int:
    port = client.base_url.port
    assert port is not None
    return port


def tickets(client: httpx.Client) -> list[dict[str, Any]]:
    r = client.post("/agentenv", json={"jsonrpc": "2.0", "id": 9, "method": "data/get"})
    return r.json()["result"]["parts"][0]["data"]["tickets"]


def refused(r: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    """The one error shape, with a message and a hint saying what to do instead."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["ok"] is False
    error = body["error"]
    assert error["kind"] == kind
    assert error["applied"] == "no" and error["retryable"] is False
    assert error["message"] and error["hint"]
    return error


# -- the attack: a web page wipes a local server -------------------------------------


def test_a_cross_site_text_plain_reset_is_refused_and_the_state_kept(
    served: httpx.Client,
) -> None:
    """What a page on any site can send without a CORS preflight: a text/plain POST."""
    before = tickets(served)
    assert before
    r = served.post(
        "/agentenv",
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "data/reset"}',
        headers={"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"},
    )
    error = refused(r, 403, "foreign_origin")
    assert "http://evil.example" in error["message"]
    assert error["code"] == "permission_denied"
    # Without the Origin (an old browser, a stripped header) the content type still refuses.
    r = served.post(
        "/agentenv",
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "data/reset"}',
        headers={"Content-Type": "text/plain"},
    )
    assert "text/plain" in refused(r, 415, "unsupported_media_type")["message"]
    assert tickets(served) == before
    assert served.get("/trajectory").text == ""


# -- Content-Type -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=x",
        "text/json",
        "application/json-seq",
        "application/jsonx",
        "",
    ],
)
def test_non_json_content_types_are_415(served: httpx.Client, content_type: str) -> None:
    before = tickets(served)
    r = served.post("/agentenv", content=b"{}", headers={"Content-Type": content_type})
    error = refused(r, 415, "unsupported_media_type")
    assert "application/json" in error["message"]
    assert "--json" in error["hint"]  # what curl users need: -d alone sends a form
    assert tickets(served) == before


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "APPLICATION/JSON;CHARSET=UTF-8",
        "application/vnd.agentenv+json",
        None,  # not a browser: a body without a type is read as JSON
    ],
)
def test_json_content_types_and_none_are_served(
    served: httpx.Client, content_type: str | None
) -> None:
    headers = {"Content-Type": content_type} if content_type is not None else {}
    r = served.post("/step", content=b'{"action": "list_tools"}', headers=headers)
    assert r.request.headers.get("content-type") == content_type
    assert r.status_code == 200, r.text
    assert r.json()["tools"]


def test_a_get_with_any_content_type_is_served(served: httpx.Client) -> None:
    r = served.get("/state", headers={"Content-Type": "text/plain"})
    assert r.status_code == 200


# -- Origin ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "https://evil.example:443",
        "http://127.0.0.1.evil.example",  # a prefix of an allowed origin is not that origin
        "http://localhost.evil.example:8765",
        "http://evil.example@localhost",
        "null",  # sandboxed frames and file: pages
        "file://",
        "chrome-extension://abcdef",
    ],
)
def test_foreign_origins_are_refused_on_every_method(served: httpx.Client, origin: str) -> None:
    headers = {"Origin": origin}
    refused(served.get("/state", headers=headers), 403, "foreign_origin")
    r = served.post("/step", json={"action": "list_tools"}, headers=headers)
    refused(r, 403, "foreign_origin")
    r = served.post("/instances", json={"id": "planted"}, headers=headers)
    refused(r, 403, "foreign_origin")
    assert served.get("/instances").json()["instances"] == ["default"]


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:{port}", "http://localhost:3000", "https://localhost", "http://[::1]:8080"],
)
def test_loopback_origins_are_served(served: httpx.Client, origin: str) -> None:
    headers = {"Origin": origin.format(port=port_of(served))}
    r = served.post("/step", json={"action": "list_tools"}, headers=headers)
    assert r.status_code == 200, r.text


# -- Host (DNS rebinding) -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1.evil.example:{port}",
        "localhost:{port}@evil.example",
        "localhost:nope",
        "[::1",
        "10.1.2.3:{port}",
    ],
)
def test_a_foreign_host_is_421(served: httpx.Client, host: str) -> None:
    before = tickets(served)
    headers = {"Host": host.format(port=port_of(served))}
    error = refused(served.post("/agentenv", json=RESET, headers=headers), 421, "misdirected_host")
    assert "DNS rebinding" in error["message"]
    refused(served.get("/state", headers=headers), 421, "misdirected_host")
    assert tickets(served) == before


@pytest.mark.parametrize(
    "host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST", "127.0.0.1", "[::1]:{port}"]
)
def test_loopback_hosts_are_served(served: httpx.Client, host: str) -> None:
    r = served.get("/state", headers={"Host": host.format(port=port_of(served))})
    assert r.status_code == 200, r.text


def test_the_clock_url_the_server_hands_out_never_carries_a_forged_host(
    served: httpx.Client,
) -> None:
    """`env_get_time_url` is built from Host: a value like `localhost:1@evil` is refused."""
    r = served.put("/clock/set-time", json={"virtual_time": "2026-03-02T09:00:00Z"})
    assert r.status_code == 200, r.text
    r = served.get("/clock/state", headers={"Host": "localhost:1@evil.example"})
    refused(r, 421, "misdirected_host")
    url = served.get("/clock/state").json()["env_get_time_url"]
    assert url == f"http://127.0.0.1:{port_of(served)}/clock/time"


# -- MCP: the same refusals, as JSON-RPC errors its clients show -------------------------------


@pytest.mark.parametrize(
    ("headers", "status", "kind"),
    [
        ({"Host": "evil.example"}, 421, "misdirected_host"),
        ({"Origin": "http://evil.example"}, 403, "foreign_origin"),
        ({"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
    ],
)
def test_mcp_refusals_are_json_rpc_errors(
    served: httpx.Client, headers: dict[str, str], status: int, kind: str
) -> None:
    r = served.post("/mcp", json=LIST_TOOLS, headers={**MCP_HEADERS, **headers})
    assert r.status_code == status, r.text
    body = r.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == -32600
    assert body["error"]["data"]["code"] == kind
    assert body["error"]["data"]["detail"] == body["error"]["message"]
    assert body["error"]["data"]["hint"]
    r = served.post("/mcp", json=LIST_TOOLS, headers=MCP_HEADERS)
    assert r.status_code == 200, r.text


# -- the guard's switches, on a bare app ---------------------------------------------------------


def bare_app(**options: bool) -> Starlette:
    async def echo(request: Request) -> JSONResponse:
        return JSONResponse({"length": len(await request.body())})

    return Starlette(
        routes=[Route("/echo", echo, methods=["GET", "POST"])],
        middleware=[Middleware(RequestGuard, **options)],
    )


async def post(app: Starlette, base_url: str, **headers: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url=base_url) as client:
        return await client.post("/echo", content=b"{}", headers=headers)


async def test_in_process_transports_are_answered_as_the_host_they_name() -> None:
    """httpx's ASGITransport and Starlette's TestClient reach the app as `testserver`: the
    address the connection reached, not a forged name, so loopback apps serve them."""
    app = bare_app(loopback=True)
    assert (await post(app, "http://testserver")).status_code == 200
    assert (await post(app, "http://testserver", origin="http://testserver")).status_code == 200
    r = await post(app, "http://testserver", host="evil.example")
    assert r.status_code == 421


async def test_beyond_loopback_the_host_is_not_checked() -> None:
    app = bare_app(loopback=False)
    assert (await post(app, "http://10.0.0.5:8765", host="envs.example.org")).status_code == 200


async def test_with_tokens_the_host_is_left_to_the_bearer() -> None:
    # A reverse proxy in front of a loopback bind may pass on the client's Host; a
    # rebinding page has no token, so only trusted mode needs the check.
    host = "envs.example.org"
    assert (await post(bare_app(trusted=True), "http://127.0.0.1", host=host)).status_code == 421
    r = await post(bare_app(loopback=True, trusted=False), "http://127.0.0.1", host=host)
    assert r.status_code == 200


async def test_with_tokens_a_foreign_origin_is_left_to_the_bearer() -> None:
    origin = "https://dashboard.example.org"
    assert (
        await post(bare_app(trusted=True), "http://127.0.0.1", origin=origin)
    ).status_code == 403
    r = await post(bare_app(trusted=False), "http://127.0.0.1", origin=origin)
    assert r.status_code == 200


@pytest.mark.parametrize(
    ("authority", "name"),
    [
        (b"localhost", b"localhost"),
        (b"LocalHost:8765", b"localhost"),
        (b"[::1]:80", b"[::1]"),
        (b"localhost.:8765", b"localhost"),
        (b"127.0.0.1:", None),
        (b"[::1]x", None),
        (b"a@b", None),
        (b"", None),
    ],
)
def test_authority_names(authority: bytes, name: bytes | None) -> None:
    assert authority_name(authority) == name


@pytest.mark.parametrize(
    ("content_type", "json"),
    [
        (b"application/json", True),
        (b"application/problem+json; charset=utf-8", True),
        (b"application/json-rpc", True),
        (b"application/+json", False),
        (b"text/plain; application/json", False),
    ],
)
def test_json_types(content_type: bytes, json: bool) -> None:
    assert is_json_type(content_type) is json
