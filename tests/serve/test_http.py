"""HTTP plumbing: the request body limit (declared and streamed, in process and over real
sockets) and the one error shape every failing route answers with."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentenv import Gateway
from agentenv.serve._guard import BodyLimit
from agentenv.spec.limits import BODY_DEPTH, MAX_JSON_DEPTH, depth_message

LIMIT = 64


def echo_app() -> tuple[Starlette, list[int]]:
    """A plain Starlette app behind BodyLimit, installed as create_app installs it; the
    route reads the whole body, and `seen` collects the sizes it read."""
    seen: list[int] = []

    async def echo(request: Request) -> JSONResponse:
        body = await request.body()
        seen.append(len(body))
        return JSONResponse({"length": len(body)})

    app = Starlette(
        routes=[Route("/echo", echo, methods=["POST"])],
        middleware=[Middleware(BodyLimit, max_bytes=LIMIT)],
    )
    return app, seen


def assert_too_large(r: httpx.Response, limit: int) -> None:
    assert r.status_code == 413, r.text
    assert r.headers["content-type"].startswith("application/json")
    assert r.json() == {
        "ok": False,
        "error": {
            "code": "too_large",
            "message": f"request body over the limit of {limit} bytes",
            "retryable": False,
            "applied": "no",
            "kind": "too_large",
            "hint": "send less, or start the server with a larger body limit",
        },
    }


async def chunks(total: int, size: int = 16):
    sent = 0
    while sent < total:
        n = min(size, total - sent)
        yield b"x" * n
        sent += n


# -- BodyLimit on its own -------------------------------------------------------------------


@pytest.mark.parametrize("size", [0, 1, LIMIT - 1, LIMIT])
async def test_bodies_up_to_the_limit_pass(app_client, size: int) -> None:
    app, seen = echo_app()
    async with app_client(app) as c:
        r = await c.post("/echo", content=b"x" * size)
        assert r.status_code == 200
        assert r.json() == {"length": size}
        r = await c.post("/echo", content=chunks(size))
        assert r.json() == {"length": size}
    assert seen == [size, size]


async def test_a_declared_length_over_the_limit_never_reaches_the_app(app_client) -> None:
    app, seen = echo_app()
    async with app_client(app) as c:
        r = await c.post("/echo", content=b"x" * (LIMIT + 1))
        assert r.request.headers["content-length"] == str(LIMIT + 1)
        assert_too_large(r, LIMIT)
    assert seen == []


@pytest.mark.parametrize("size", [LIMIT + 1, 10 * LIMIT])
async def test_a_streamed_body_over_the_limit_is_413(app_client, size: int) -> None:
    app, seen = echo_app()
    async with app_client(app) as c:
        r = await c.post("/echo", content=chunks(size))
        assert "content-length" not in r.request.headers
        assert_too_large(r, LIMIT)
        # The next request on the same app is served as usual.
        r = await c.post("/echo", content=b"ok")
        assert r.json() == {"length": 2}
    assert seen == [2]


async def test_a_lying_content_length_is_still_caught_while_streaming(app_client) -> None:
    app, seen = echo_app()
    async with app_client(app) as c:
        r = await c.post("/echo", content=chunks(LIMIT * 3), headers={"content-length": str(LIMIT)})
        assert_too_large(r, LIMIT)
    assert seen == []


async def test_a_non_numeric_content_length_falls_back_to_counting(app_client) -> None:
    app, seen = echo_app()
    async with app_client(app) as c:
        r = await c.post("/echo", content=chunks(8), headers={"content-length": "lots"})
        assert r.json() == {"length": 8}
    assert seen == [8]


async def test_non_http_scopes_pass_through() -> None:
    calls: list[str] = []

    async def inner(scope: dict[str, Any], receive: Any, send: Any) -> None:
        calls.append(scope["type"])

    limit = BodyLimit(inner, max_bytes=1)
    await limit({"type": "lifespan"}, None, None)
    await limit({"type": "websocket", "headers": [(b"content-length", b"100")]}, None, None)
    assert calls == ["lifespan", "websocket"]


# -- the limit in the served app, over real sockets -----------------------------------------


@pytest.fixture(scope="module")
def small_server(desk_env, live_server, http_client):
    """A real server of the desk app with a body limit of 200 bytes."""
    with live_server(Gateway(desk_env), max_body=200) as url, http_client(url) as c:
        yield c


def test_over_real_sockets_a_declared_oversized_body_is_413(small_server: httpx.Client) -> None:
    before = small_server.get("/state").json()["state_hash"]
    r = small_server.post("/step", content=b'{"action": "list_tools"}' + b" " * 500)
    assert_too_large(r, 200)
    assert small_server.get("/state").json()["state_hash"] == before
    r = small_server.post("/step", json={"action": "list_tools"})
    assert r.status_code == 200


def test_over_real_sockets_a_chunked_oversized_body_is_413(small_server: httpx.Client) -> None:
    def body():
        yield b'{"action": "list_tools", "pad": "'
        for _ in range(40):
            yield b" " * 50
        yield b'"}'

    r = small_server.post("/step", content=body())
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert_too_large(r, 200)
    r = small_server.post("/step", json={"action": "list_tools"})
    assert r.status_code == 200


def test_over_real_sockets_a_chunked_body_under_the_limit_is_served(
    small_server: httpx.Client,
) -> None:
    def body():
        yield b'{"action": "call_tool", '
        yield b'"tool_name": "get_ticket", '
        yield b'"arguments": {"id": "T-2"}}'

    r = small_server.post("/step", content=body())
    assert r.status_code == 200
    assert r.json()["structuredContent"]["id"] == "T-2"


# -- the error shape ------------------------------------------------------------------------


# Our kinds that answer with one of upstream's codes; every other kind is its own code.
CODES = {"bad_request": "invalid_params", "malformed_json": "invalid_params"}


def assert_error(r: httpx.Response, status: int, kind: str) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    # Upstream's error body (`ok`, `error.{code, message, retryable, applied}`) plus our kind.
    assert list(body) == ["ok", "error"] and body["ok"] is False
    assert sorted(body["error"]) == ["applied", "code", "kind", "message", "retryable"]
    assert body["error"]["kind"] == kind
    assert body["error"]["code"] == CODES.get(kind, kind)
    assert body["error"]["applied"] == "no" and body["error"]["retryable"] is False
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]["message"]


async def test_an_unknown_path_is_404_in_the_error_shape(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/no/such/thing"), 404, "not_found")


async def test_a_wrong_method_is_405_in_the_error_shape(client: httpx.AsyncClient) -> None:
    assert_error(await client.get("/step"), 405, "method_not_allowed")
    assert_error(await client.delete("/clock/time"), 405, "method_not_allowed")


async def test_a_bad_query_parameter_is_400_naming_it(client: httpx.AsyncClient) -> None:
    assert "since" in assert_error(await client.get("/trajectory?since=x"), 400, "bad_request")


async def test_malformed_json_is_400_with_where_it_broke(client: httpx.AsyncClient) -> None:
    message = assert_error(
        await client.post("/step", content=b'{"action": }'), 400, "malformed_json"
    )
    assert "column" in message


async def test_an_empty_body_is_400(client: httpx.AsyncClient) -> None:
    assert "body" in assert_error(await client.post("/step"), 400, "bad_request")
    assert "body" in assert_error(await client.put("/clock/set-time"), 400, "bad_request")


@pytest.mark.parametrize(
    ("url", "body", "names"),
    [
        ("/step", {"action": "call_tool", "tool_name": 5}, "tool_name"),
        ("/clock/set-time", {"virtual_time": "2026-03-02T09:00:00Z", "speed": 2}, "speed"),
        ("/tools/disable", {"role": "agent", "tools": "*", "why": "x"}, "why"),
        ("/triggers/remove", {"ids": "t1"}, "ids"),
    ],
)
async def test_a_wrong_shape_is_400_naming_the_field(
    client: httpx.AsyncClient, url: str, body: dict[str, Any], names: str
) -> None:
    method = "PUT" if url == "/clock/set-time" else "POST"
    r = await client.request(method, url, json=body)
    assert names in assert_error(r, 400, "bad_request")


async def test_unauthenticated_is_401_with_a_bearer_challenge(
    token_client: httpx.AsyncClient,
) -> None:
    r = await token_client.get("/state")
    assert "bearer" in assert_error(r, 401, "unauthenticated").lower()
    assert r.headers["www-authenticate"] == "Bearer"


# -- what the body parser refuses -------------------------------------------------------------


async def test_a_body_nested_past_the_limit_is_400_with_a_hint(client: httpx.AsyncClient) -> None:
    over = BODY_DEPTH + 1
    r = await client.post("/step", content=b"[" * over + b"]" * over)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["kind"] == "too_deep" and error["code"] == "invalid_params"
    assert error["message"] == f"the request body is {depth_message(BODY_DEPTH)}"
    assert f"{BODY_DEPTH}" in error["hint"] and f"{MAX_JSON_DEPTH}" in error["hint"]


async def test_a_body_at_the_limit_is_parsed(client: httpx.AsyncClient) -> None:
    # Parsed, then refused as the wrong shape: the depth was fine.
    r = await client.post("/step", content=b"[" * BODY_DEPTH + b"]" * BODY_DEPTH)
    assert_error(r, 400, "bad_request")


async def test_a_number_past_pythons_digit_limit_is_400(client: httpx.AsyncClient) -> None:
    message = assert_error(await client.post("/step", content=b"7" * 5000), 400, "malformed_json")
    assert "digits" in message


async def test_utf8_encoded_surrogates_are_not_utf8(client: httpx.AsyncClient) -> None:
    body = (
        b'{"action": "call_tool", "tool_name": "add_note", "arguments": {"text": "\xed\xa0\x80"}}'
    )
    message = assert_error(await client.post("/step", content=body), 400, "malformed_json")
    assert "not UTF-8" in message
