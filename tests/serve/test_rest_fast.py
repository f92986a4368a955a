"""The `/step` dispatch in front of FastAPI agrees with the FastAPI route it stands in for.

Two kinds of proof: `step_body` (the plain check of a `/step` body) against the
`StepRequest` model over many generated bodies, same verdict, same values, same message;
and whole answers (status, headers, body) of the dispatch against the FastAPI route, for
the same requests on two gateways built alike, good calls and every way a call is refused.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agentenv import Environment, Gateway
from agentenv.gateway.auth import Authenticator
from agentenv.serve import create_app
from agentenv.serve._http import HttpError, validation_message
from agentenv.serve._step import StepDispatch, step_body
from agentenv.serve.rest import RestApp
from agentenv.spec.wire import StepRequest

# -- step_body against the model ---------------------------------------------------------

_text = st.one_of(
    st.sampled_from(["call_tool", "list_tools", "", "get_ticket", "Call_Tool", "call_tool "]),
    st.text(max_size=6),  # includes lone surrogates, as json.loads can produce
)
_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _text)
_json = st.recursive(
    _leaf,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(_text, inner, max_size=3)),
    max_leaves=8,
)
_bodies = st.one_of(
    _json,
    st.fixed_dictionaries(
        {},
        optional={
            "action": st.one_of(st.sampled_from(["call_tool", "list_tools"]), _json),
            "tool_name": st.one_of(st.none(), _text, _json),
            "arguments": st.one_of(st.dictionaries(_text, _json, max_size=3), _json),
            "extra": _json,
        },
    ),
)


def model_verdict(data: Any) -> tuple[str, str | None, dict[str, Any]] | str:
    try:
        body = StepRequest.model_validate(data)
    except ValidationError as exc:
        return validation_message(exc)
    return body.action, body.tool_name, body.arguments


def fast_verdict(data: Any) -> tuple[str, str | None, dict[str, Any]] | str:
    try:
        return step_body(data)
    except HttpError as exc:
        assert (exc.status, exc.kind) == (400, "bad_request")
        return exc.message


@settings(max_examples=600, deadline=None)
@given(_bodies)
def test_step_body_gives_the_models_verdict(data: Any) -> None:
    assert fast_verdict(data) == model_verdict(data)


@pytest.mark.parametrize(
    "data",
    [
        {"action": "call_tool", "tool_name": "t"},
        {"action": "call_tool", "tool_name": "t", "arguments": {"a": [1, {"b": None}]}},
        {"action": "list_tools"},
        {"action": "list_tools", "tool_name": None, "arguments": {}},
        {"action": "list_tools", "tool_name": ""},
        {"action": "call_tool", "tool_name": "\ud800", "arguments": {"\udfff": 1}},
    ],
)
def test_the_common_bodies_take_the_plain_check(data: dict[str, Any]) -> None:
    # Pins that the plain check, not the model, accepts these: the model returns a new
    # arguments dict, the plain check the parsed one.
    action, tool_name, arguments = step_body(data)
    assert (action, tool_name) == (data["action"], data.get("tool_name"))
    assert arguments is data.get("arguments", arguments)


@pytest.mark.parametrize(
    "data",
    [
        None,
        [],
        {},
        {"action": "call_tool"},
        {"action": "call_tool", "tool_name": ""},
        {"action": "call_tool", "tool_name": None},
        {"action": "call_tool", "tool_name": 3},
        {"action": "list_tools", "arguments": None},
        {"action": "list_tools", "arguments": []},
        {"action": "list_tools", "extra": 1},
        {"action": "dance"},
    ],
)
def test_bad_bodies_are_refused_with_the_models_message(data: Any) -> None:
    verdict = model_verdict(data)
    assert isinstance(verdict, str)
    assert fast_verdict(data) == verdict


# -- whole answers: the dispatch against the FastAPI route ---------------------------------

LIMIT = 4096
JSON = {"content-type": "application/json"}


def both_apps(
    env: Environment, auth: Callable[[], Authenticator | None]
) -> tuple[RestApp, RestApp]:
    """Two apps over two gateways built alike: one answers /step in its dispatch, the
    other (dispatch off) in the FastAPI route."""
    fast = create_app(Gateway(env), auth=auth(), max_body=LIMIT, mcp=False)
    slow = create_app(Gateway(env), auth=auth(), max_body=LIMIT, mcp=False)
    assert isinstance(fast, RestApp) and isinstance(slow, RestApp)
    assert isinstance(fast.step_dispatch, StepDispatch)
    slow.step_dispatch = None
    return fast, slow


@pytest.fixture
async def pair(desk_env: Environment) -> AsyncIterator[tuple[httpx.AsyncClient, ...]]:
    fast, slow = both_apps(desk_env, lambda: None)
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=fast), base_url="http://t") as a,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=slow), base_url="http://t") as b,
    ):
        yield a, b


@pytest.fixture
async def token_pair(desk_env: Environment) -> AsyncIterator[tuple[httpx.AsyncClient, ...]]:
    fast, slow = both_apps(
        desk_env, lambda: Authenticator({"s1": "agent", "s2": "admin"}, default_role="agent")
    )
    async with (
        httpx.AsyncClient(transport=httpx.ASGITransport(app=fast), base_url="http://t") as a,
        httpx.AsyncClient(transport=httpx.ASGITransport(app=slow), base_url="http://t") as b,
    ):
        yield a, b


def call(tool: str, **arguments: Any) -> bytes:
    return json.dumps({"action": "call_tool", "tool_name": tool, "arguments": arguments}).encode()


def chunks(*parts: bytes) -> Any:
    async def stream() -> AsyncIterator[bytes]:
        for part in parts:
            yield part

    return stream()


# (path, body, headers): each sent to both apps, in this order.
CASES: list[tuple[str, Any, dict[str, str]]] = [
    ("/step", b'{"action": "list_tools"}', JSON),
    ("/step", b'{"action": "list_tools"}', {**JSON, "agentenv-role": "supervisor"}),
    ("/step", call("get_ticket", id="T-1"), JSON),
    ("/step", call("get_ticket", id="T-404"), JSON),
    ("/step", call("create_ticket", id="T-3", subject="New"), {**JSON, "agentenv-session": "s"}),
    ("/step", call("create_ticket", id="T-4"), JSON),  # invalid arguments (schema)
    ("/step", call("add_note", ticket_id="T-1", text="hi"), JSON),
    ("/step", call("add_note", ticket_id="T-1"), JSON),  # missing argument
    ("/step", call("close_ticket", ticket_id="T-1"), JSON),  # denied
    ("/step", call("close_ticket", ticket_id="T-1"), {**JSON, "agentenv-role": "supervisor"}),
    ("/step", call("no_such_tool"), JSON),
    ("/step", call("refuse", reason="no"), JSON),
    ("/step", call("explode", ticket_id="T-1"), JSON),
    ("/step", call("tag_set", ticket_id="T-1"), JSON),
    ("/step", call("slow", ticket_id="T-1", seconds=5), JSON),  # timeout
    ("/step", call("ticket_ids"), {}),  # no Content-Type
    ("/step", call("ticket_ids"), {"content-type": "application/vnd.x+json; charset=utf-8"}),
    ("/step", b"", JSON),
    ("/step", b"null", JSON),
    ("/step", b"[]", JSON),
    ("/step", b"{}", JSON),
    ("/step", b'{"action": "call_tool"}', JSON),
    ("/step", b'{"action": "list_tools", "extra": 1}', JSON),
    ("/step", b'{"action": "call_tool", "tool_name": "x"', JSON),
    ("/step", b"\xff\xfe", JSON),
    ("/step", b'{"action": "list_tools", "arguments": {"n": 1' + b"0" * 5000 + b"}}", JSON),
    ("/step", b"[" * 200 + b"]" * 200, JSON),
    ("/step", b'{"action": "list_tools", "arguments": {"pad": "' + b"x" * LIMIT + b'"}}', JSON),
    ("/step", call("ticket_ids"), {"content-type": "text/plain"}),
    ("/step", call("ticket_ids"), {**JSON, "origin": "https://evil.example"}),
    ("/step", call("ticket_ids"), {**JSON, "origin": "http://localhost:3000"}),
    ("/step", call("ticket_ids"), {**JSON, "host": "evil.example"}),
    ("/step", call("ticket_ids"), {**JSON, "agentenv-role": "system"}),
    ("/step", call("ticket_ids"), {**JSON, "agentenv-role": "default"}),
    ("/step", call("ticket_ids"), {**JSON, "content-length": "lots"}),
    ("/instances/default/step", call("get_ticket", id="T-1"), JSON),
    ("/instances/nope/step", call("get_ticket", id="T-1"), JSON),
    ("/instances/nope/step", b"not json", JSON),
    ("/instances/%00/step", b'{"action": "list_tools"}', JSON),
    ("/instances//step", b'{"action": "list_tools"}', JSON),
    ("/instances/a/b/step", b'{"action": "list_tools"}', JSON),
    ("/step/", b'{"action": "list_tools"}', JSON),
    ("/stepx", b'{"action": "list_tools"}', JSON),
]


def answer(response: httpx.Response) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    return response.status_code, response.headers.raw, response.content


async def both(clients: tuple[httpx.AsyncClient, ...], method: str, path: str, **kw: Any) -> Any:
    fast, slow = clients
    one = answer(await fast.request(method, path, **kw))
    two = answer(await slow.request(method, path, **kw))
    assert one == two, (path, kw)
    return one


async def test_the_dispatch_answers_as_the_route(pair: tuple[httpx.AsyncClient, ...]) -> None:
    statuses = set()
    for path, body, headers in CASES:
        status, _, _ = await both(pair, "POST", path, content=body, headers=headers)
        statuses.add(status)
    # The cases reach every kind of answer, so agreement is not agreement on one 200.
    assert {200, 400, 401, 403, 404, 413, 415, 421, 504} <= statuses
    for method in ("GET", "PUT", "DELETE"):
        status, _, _ = await both(pair, method, "/step")
        assert status == 405
    # The two gateways saw the same calls and hold the same state and trajectory.
    for path in ("/state", "/instances"):
        await both(pair, "GET", path)
    recorded = [
        [without_wall_clock(line) for line in (await c.get("/trajectory")).text.splitlines()]
        for c in pair
    ]
    assert recorded[0] == recorded[1] and len(recorded[0]) > 20


def without_wall_clock(line: str) -> dict[str, Any]:
    event = json.loads(line)
    for key in ("timestamp_utc", "duration_ms"):
        event.pop(key, None)
    return event


async def test_streamed_bodies_are_limited_alike(pair: tuple[httpx.AsyncClient, ...]) -> None:
    parts = (b'{"action": "list_tools", ', b'"arguments": {"a": 1}}')
    small = [answer(await c.post("/step", content=chunks(*parts), headers=JSON)) for c in pair]
    assert small[0] == small[1] and small[0][0] == 200
    big = (b'{"action": "list_tools", "arguments": {"pad": "', b"x" * LIMIT, b'"}}')
    over = [answer(await c.post("/step", content=chunks(*big), headers=JSON)) for c in pair]
    assert over[0] == over[1] and over[0][0] == 413
    # A declared length the body then overruns is caught while reading, as BodyLimit does.
    lying = {**JSON, "content-length": "10"}
    over = [answer(await c.post("/step", content=chunks(*big), headers=lying)) for c in pair]
    assert over[0] == over[1] and over[0][0] == 413


async def test_tokens_are_checked_alike(token_pair: tuple[httpx.AsyncClient, ...]) -> None:
    body = call("ticket_ids")
    for headers in (
        JSON,
        {**JSON, "authorization": "Bearer wrong"},
        {**JSON, "authorization": "Bearer s1"},
        {**JSON, "authorization": "Bearer s2", "agentenv-role": "supervisor"},
        {**JSON, "authorization": "Basic s1"},
        {**JSON, "agentenv-role": "supervisor"},
    ):
        await both(token_pair, "POST", "/step", content=body, headers=headers)
    await both(token_pair, "POST", "/step", content=b"", headers=JSON)  # 401 before the body
    status, headers, _ = await both(token_pair, "POST", "/step", content=body, headers=JSON)
    assert status == 401 and (b"www-authenticate", b"Bearer") in headers


async def test_under_a_root_path_the_route_answers(desk_env: Environment) -> None:
    # The dispatch leaves a root_path to the framework, whose route answers the same.
    app = create_app(Gateway(desk_env), mcp=False)
    transport = httpx.ASGITransport(app=app, root_path="/api")
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        r = await client.post("/api/step", content=call("get_ticket", id="T-1"), headers=JSON)
        assert r.status_code == 200, r.text
        assert r.json()["structuredContent"]["id"] == "T-1"
