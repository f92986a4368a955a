"""The WebSocket session transport over a real uvicorn server and real WebSocket clients
(the `websockets` library, and our `WebSocketSession` over it).

What is proven here: a call over `/ws` answers exactly what `POST /step` answers for the
same call on a twin gateway (every result and error kind), tool lists match REST's for
each role, calls are recorded under the connection's session id, bad frames get error
frames and the connection goes on, `reset` forks an instance the connection owns, and
`close` (or a dropped connection) ends the session cleanly. The handshake's refusals are
in test_ws_handshake.py.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosedOK

from agentenv import Gateway
from agentenv.serve._http import DEFAULT_MAX_BODY
from agentenv.serve.ws_client import WebSocketError, WebSocketSession, ws_url
from agentenv.spec.limits import BODY_DEPTH, MAX_JSON_DEPTH


def nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


# Every kind of answer a call can get: results, tool errors, refusals, timeouts.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("get_ticket", {"id": "T-1"}),
    ("get_ticket", {"id": "T-404"}),
    ("get_ticket", {}),
    ("get_ticket", {"id": 5}),
    ("create_ticket", {"id": "T-3", "subject": "New one", "priority": 2}),
    ("create_ticket", {"id": "T-4"}),
    ("update_ticket", {"id": "T-1", "status": "closed"}),
    ("add_note", {"ticket_id": "T-1", "text": "hi", "minutes": 3}),
    ("add_note", {"ticket_id": "T-1", "text": nested(MAX_JSON_DEPTH + 2)}),
    ("explode", {"ticket_id": "T-1"}),
    ("refuse", {"reason": "not today"}),
    ("tag_set", {"ticket_id": "T-2"}),
    ("slow", {"ticket_id": "T-2", "seconds": 5}),
    ("close_ticket", {"ticket_id": "T-1"}),
    ("no_such_tool", {}),
    ("ticket_ids", {}),
    ("list_tickets", {}),
    ("get_ticket", {"id": "T-3"}),
]


@pytest.fixture
def server(desk_env, live_server) -> Iterator[tuple[Gateway, str]]:
    """A fresh gateway over the desk environment, served; (gateway, base URL)."""
    gateway = Gateway(desk_env)
    with live_server(gateway) as url:
        yield gateway, url


@pytest.fixture
async def ws(server) -> AsyncIterator[ClientConnection]:
    """A raw WebSocket connection to the server's `/ws`."""
    async with connect(ws_url(server[1]), compression=None) as connection:
        yield connection


async def exchange(connection: ClientConnection, frame: Any) -> dict[str, Any]:
    """Send a frame (a dict as JSON, or text/bytes as they are) and read its answer."""
    await connection.send(frame if isinstance(frame, (str, bytes)) else json.dumps(frame))
    answer: dict[str, Any] = json.loads(await connection.recv())
    return answer


def step(tool: str, arguments: dict[str, Any], **extra: Any) -> dict[str, Any]:
    data = {"type": "call_tool", "tool_name": tool, "arguments": arguments}
    return {"type": "step", "data": data, **extra}


# -- the same answers as /step ---------------------------------------------------------------


async def test_every_call_answers_what_step_answers_on_a_twin_gateway(
    desk_env, live_server, http_client
) -> None:
    rest_gw, ws_gw = Gateway(desk_env), Gateway(desk_env)
    with live_server(rest_gw) as rest_url, live_server(ws_gw) as ws_base:
        with http_client(rest_url) as rest:
            expected = []
            for tool, args in CALLS:
                r = rest.post(
                    "/step", json={"action": "call_tool", "tool_name": tool, "arguments": args}
                )
                expected.append((r.status_code, r.json()))
        async with connect(ws_url(ws_base), compression=None) as connection:
            for (tool, args), (status, body) in zip(CALLS, expected, strict=True):
                answer = await exchange(connection, step(tool, args))
                assert answer["type"] == "observation", answer
                data = answer["data"]
                assert (data["reward"], data["done"]) == (None, False)
                observation = data["observation"]
                assert observation["tool_name"] == tool
                assert observation["result"] == body, (tool, args)
                # A refused call (a non-200 /step) is marked as /step marks it.
                assert ("ok" in observation["result"]) == (status != 200)
                error = observation["error"]
                if "error" not in body:
                    assert error is None
                else:
                    assert error["message"] == body["error"]["message"]
                    assert error["error_type"] in {
                        "execution_error",
                        "invalid_args",
                        "tool_not_found",
                        "timeout",
                    }
    kinds = {b["error"]["kind"] for _, b in expected if "error" in b}
    assert kinds == {
        "tool_error",
        "invalid_arguments",
        "invalid_result",
        "timeout",
        "denied",
        "unknown_tool",
    }
    # Both gateways recorded the same calls and ended in the same state.
    rest_calls, ws_calls = (
        rest_gw.instance().trajectory.calls(),
        ws_gw.instance().trajectory.calls(),
    )
    assert [(c.tool, c.args, c.error) for c in ws_calls] == [
        (c.tool, c.args, c.error) for c in rest_calls
    ]
    assert ws_gw.instance().state.hash() == rest_gw.instance().state.hash()


@pytest.mark.parametrize("role", [None, "agent", "supervisor", "stranger"])
async def test_tool_lists_are_what_step_lists_for_each_role(
    server, http_client, role: str | None
) -> None:
    _, url = server
    headers = {"AgentEnv-Role": role} if role else {}
    with http_client(url) as rest:
        listed = rest.post("/step", json={"action": "list_tools"}, headers=headers).json()["tools"]
    async with connect(ws_url(url), additional_headers=headers, compression=None) as connection:
        # OpenEnv's ListToolsAction and the /step body itself both list.
        for data in ({"type": "list_tools"}, {"action": "list_tools"}):
            answer = await exchange(connection, {"type": "step", "data": data})
            assert answer["data"]["observation"]["tools"] == listed
    names = {t["name"] for t in listed}
    assert ("close_ticket" in names) == (role == "supervisor")


async def test_a_step_frame_may_carry_the_step_body_itself(ws) -> None:
    body = {"action": "call_tool", "tool_name": "get_ticket", "arguments": {"id": "T-2"}}
    answer = await exchange(ws, {"type": "step", "data": body})
    assert answer["data"]["observation"]["result"]["structuredContent"]["id"] == "T-2"
    # OpenEnv's Action carries `metadata`; it is accepted and ignored.
    answer = await exchange(ws, step("get_ticket", {"id": "T-1"}) | {"id": 7})
    assert answer["id"] == 7


# -- sessions and the trajectory ---------------------------------------------------------------


async def test_calls_are_recorded_under_the_connections_session(server) -> None:
    gateway, url = server
    async with connect(ws_url(url), compression=None) as first:
        given = first.response.headers["AgentEnv-Session"]
        await exchange(first, step("get_ticket", {"id": "T-1"}))
        state = (await exchange(first, {"type": "state"}))["data"]
    headers = {"AgentEnv-Session": "episode-42"}
    async with connect(ws_url(url), additional_headers=headers, compression=None) as second:
        assert second.response.headers["AgentEnv-Session"] == "episode-42"
        await exchange(second, step("ticket_ids", {}))
        await exchange(second, step("ticket_ids", {}))
    sessions = [c.session for c in gateway.instance().trajectory.calls()]
    assert sessions == [given, "episode-42", "episode-42"]
    assert len(given) == 32 and state["episode_id"] == given
    assert (state["step_count"], state["instance"]) == (1, "default")


async def test_state_tells_the_changelog_id_and_hash_as_get_state_does(server, http_client) -> None:
    gateway, url = server
    async with connect(ws_url(url), compression=None) as connection:
        await exchange(connection, step("create_ticket", {"id": "T-9", "subject": "x"}))
        state = await exchange(connection, {"type": "state", "id": "s"})
    with http_client(url) as rest:
        expected = rest.get("/state").json()
    assert state["id"] == "s" and state["type"] == "state"
    assert state["data"]["changelog_id"] == expected["changelog_id"]
    assert state["data"]["state_hash"] == expected["state_hash"] == gateway.instance().state.hash()


async def test_an_instances_ws_serves_that_instance_only(server, http_client) -> None:
    gateway, url = server
    with http_client(url) as rest:
        assert rest.post("/instances", json={"id": "ep1"}).status_code == 201
    async with connect(ws_url(url, "ep1"), compression=None) as connection:
        await exchange(connection, step("update_ticket", {"id": "T-1", "status": "ep1"}))
        state = (await exchange(connection, {"type": "state"}))["data"]
    assert state["instance"] == "ep1"
    assert gateway.instance("ep1").state.require("tickets", "T-1")["status"] == "ep1"
    assert gateway.instance().state.require("tickets", "T-1")["status"] == "open"
    assert len(gateway.instance("ep1").trajectory.calls()) == 1
    assert gateway.instance().trajectory.calls() == []


async def test_answers_come_back_in_order_when_frames_are_pipelined(ws) -> None:
    for i in range(50):
        await ws.send(json.dumps(step("get_ticket", {"id": "T-1" if i % 2 else "T-2"}, id=i)))
    answers = [json.loads(await ws.recv()) for _ in range(50)]
    assert [a["id"] for a in answers] == list(range(50))
    ids = [a["data"]["observation"]["result"]["structuredContent"]["id"] for a in answers]
    assert ids == ["T-1" if i % 2 else "T-2" for i in range(50)]


# -- reset: a fresh instance per episode -------------------------------------------------------


async def wait_for(condition: Any, what: str) -> None:
    """Wait (at most 10 s) for the server thread to do what a closed connection makes it do."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.01)


async def test_reset_forks_an_instance_the_connection_owns_and_drops(server) -> None:
    gateway, url = server
    async with connect(ws_url(url), compression=None) as connection:
        await exchange(connection, step("update_ticket", {"id": "T-1", "status": "before"}))
        reset = await exchange(
            connection, {"type": "reset", "data": {"episode_id": "ep-a"}, "id": 1}
        )
        first = reset["data"]["observation"]
        assert reset["id"] == 1 and first["episode_id"] == "ep-a"
        assert first["url"] == f"/instances/{first['instance']}"
        answer = await exchange(connection, step("get_ticket", {"id": "T-1"}))
        # The fork is of the seeded snapshot, not of the instance the connection was on.
        assert answer["data"]["observation"]["result"]["structuredContent"]["status"] == "open"
        await exchange(connection, step("update_ticket", {"id": "T-1", "status": "in-a"}))
        state = (await exchange(connection, {"type": "state"}))["data"]
        assert (state["instance"], state["episode_id"], state["step_count"]) == (
            first["instance"],
            "ep-a",
            2,
        )
        assert [c.session for c in gateway.instance(first["instance"]).trajectory.calls()] == [
            "ep-a",
            "ep-a",
        ]
        second = (await exchange(connection, {"type": "reset"}))["data"]["observation"]
        assert first["instance"] not in gateway.instances  # the previous episode's is dropped
        assert second["instance"] in gateway.instances and second["episode_id"] != "ep-a"
        await connection.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosedOK):
            await connection.recv()
    assert connection.close_code == 1000
    await wait_for(lambda: gateway.instances == ["default"], "the owned instance was not dropped")
    assert gateway.instance().state.require("tickets", "T-1")["status"] == "before"


async def test_a_kept_instance_outlives_its_connection(server) -> None:
    gateway, url = server
    session = await WebSocketSession.connect(url, reset=True, keep=True)
    assert session.instance is not None
    await session.call("update_ticket", {"id": "T-2", "status": "kept"})
    await session.close()
    assert session.instance in gateway.instances
    assert gateway.instance(session.instance).state.require("tickets", "T-2")["status"] == "kept"


async def test_a_dropped_connection_ends_its_session_and_drops_its_instance(server) -> None:
    gateway, url = server
    connection = await connect(ws_url(url), compression=None)
    owned = (await exchange(connection, {"type": "reset"}))["data"]["observation"]["instance"]
    assert owned in gateway.instances
    connection.transport.abort()  # no close frame, no closing handshake
    await wait_for(lambda: owned not in gateway.instances, "the instance outlived its connection")


async def test_an_instance_dropped_under_a_session_is_an_error_frame(server, http_client) -> None:
    _, url = server
    with http_client(url) as rest:
        rest.post("/instances", json={"id": "gone"})
        async with connect(ws_url(url, "gone"), compression=None) as connection:
            assert rest.delete("/instances/gone").status_code == 200
            answer = await exchange(connection, step("ticket_ids", {}))
            assert answer["type"] == "error"
            assert answer["data"]["code"] == "SESSION_ERROR"
            assert answer["data"]["error"]["kind"] == "not_found"
            # A reset gives the session a fresh instance and it goes on.
            await exchange(connection, {"type": "reset"})
            answer = await exchange(connection, step("ticket_ids", {}))
            assert answer["data"]["observation"]["result"]["structuredContent"] == {
                "result": ["T-1", "T-2"]
            }


async def test_concurrent_sessions_each_play_their_own_episode(server) -> None:
    gateway, url = server

    async def episode(n: int) -> tuple[str, Any]:
        async with await WebSocketSession.connect(url, reset=True, keep=True) as session:
            await session.call("update_ticket", {"id": "T-1", "status": f"s{n}"})
            result = await session.call("get_ticket", {"id": "T-1"})
            assert session.instance is not None
            return session.instance, result["structuredContent"]["status"]

    done = await asyncio.gather(*(episode(n) for n in range(8)))
    assert [status for _, status in done] == [f"s{n}" for n in range(8)]
    for n, (instance, _) in enumerate(done):
        assert gateway.instance(instance).state.require("tickets", "T-1")["status"] == f"s{n}"
    assert len({instance for instance, _ in done}) == 8


# -- bad frames: an error frame, and the session goes on ------------------------------------------

BAD_FRAMES: list[tuple[Any, str, str]] = [
    ("{bad", "INVALID_JSON", "malformed_json"),
    ("", "INVALID_JSON", "bad_request"),
    (b"\xff\xfe{}", "INVALID_JSON", "malformed_json"),
    ("[1, 2]", "VALIDATION_ERROR", "bad_request"),
    ('"step"', "VALIDATION_ERROR", "bad_request"),
    ({"data": {}}, "UNKNOWN_TYPE", "bad_request"),
    ({"type": "jump"}, "UNKNOWN_TYPE", "bad_request"),
    ({"type": 3}, "UNKNOWN_TYPE", "bad_request"),
    ({"type": "mcp", "data": {"jsonrpc": "2.0"}}, "UNKNOWN_TYPE", "bad_request"),
    ({"type": "state", "extra": 1}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "state", "id": True}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "state", "id": 1.5}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "state", "id": {"a": 1}}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "step"}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "step", "data": [1]}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "step", "data": {"type": "call_tool"}}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "step", "data": {"type": "dance"}}, "VALIDATION_ERROR", "bad_request"),
    (
        {"type": "step", "data": {"type": "list_tools", "action": "call_tool"}},
        "VALIDATION_ERROR",
        "bad_request",
    ),
    (
        {"type": "step", "data": {"type": "call_tool", "tool_name": "x", "arguments": []}},
        "VALIDATION_ERROR",
        "bad_request",
    ),
    (
        {"type": "step", "data": {"type": "call_tool", "tool_name": "x", "extra": 1}},
        "VALIDATION_ERROR",
        "bad_request",
    ),
    ({"type": "reset", "data": "fresh"}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "reset", "data": {"episode_id": ""}}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "reset", "data": {"episode_id": "x" * 256}}, "VALIDATION_ERROR", "bad_request"),
    ({"type": "reset", "data": {"keep": "yes"}}, "VALIDATION_ERROR", "bad_request"),
    (json.dumps({"type": "step", "data": nested(BODY_DEPTH)}), "INVALID_JSON", "too_deep"),
    ("[" * 100_000, "INVALID_JSON", "too_deep"),
]


async def test_bad_frames_get_error_frames_and_the_session_goes_on(server) -> None:
    gateway, url = server
    async with connect(ws_url(url), compression=None) as connection:
        for frame, code, kind in BAD_FRAMES:
            answer = await exchange(connection, frame)
            assert answer["type"] == "error", (frame, answer)
            data = answer["data"]
            assert (data["code"], data["error"]["kind"]) == (code, kind), (frame, data)
            assert data["message"] == data["error"]["message"] and data["message"]
            assert "Traceback" not in data["message"]
        answer = await exchange(connection, step("get_ticket", {"id": "T-1"}))
        assert answer["data"]["observation"]["result"]["isError"] is False
    assert gateway.instances == ["default"]  # no bad reset forked anything
    assert len(gateway.instance().trajectory.calls()) == 1


async def test_error_frames_echo_the_frame_id_and_say_what_to_do(ws) -> None:
    answer = await exchange(ws, {"type": "mcp", "id": "m1", "data": {}})
    assert answer["id"] == "m1"
    assert "/mcp" in answer["data"]["error"]["hint"]
    answer = await exchange(ws, {"type": "step", "id": 3, "data": {"type": "call_tool"}})
    assert answer["id"] == 3 and "tool_name" in answer["data"]["message"]


async def test_a_frame_over_the_body_limit_is_refused_and_the_next_is_served(ws) -> None:
    big = step("add_note", {"ticket_id": "T-1", "text": "x" * DEFAULT_MAX_BODY})
    answer = await exchange(ws, big)
    assert (answer["data"]["code"], answer["data"]["error"]["kind"]) == ("TOO_LARGE", "too_large")
    answer = await exchange(ws, step("add_note", {"ticket_id": "T-1", "text": "x" * 1000}))
    assert answer["data"]["observation"]["result"]["isError"] is False, answer


async def test_arguments_nested_past_the_value_limit_are_a_recorded_invalid_call(server) -> None:
    gateway, url = server
    async with connect(ws_url(url), compression=None) as connection:
        answer = await exchange(
            connection, step("add_note", {"ticket_id": "T-1", "text": nested(MAX_JSON_DEPTH)})
        )
    result = answer["data"]["observation"]["result"]
    assert result["error"]["kind"] == "invalid_arguments"
    assert answer["data"]["observation"]["error"]["error_type"] == "invalid_args"
    assert gateway.instance().trajectory.calls()[0].error is not None


# -- the client -----------------------------------------------------------------------------------


async def test_the_client_plays_an_episode(server) -> None:
    gateway, url = server
    async with await WebSocketSession.connect(url, session="run-1") as session:
        assert session.session_id == "run-1"
        names = [t["name"] for t in await session.list_tools()]
        assert "get_ticket" in names and "close_ticket" not in names
        created = await session.call("create_ticket", {"id": "T-7", "subject": "Via ws"})
        assert created["isError"] is False and created["structuredContent"]["id"] == "T-7"
        failed = await session.call("refuse", {"reason": "no"})
        assert failed["isError"] is True and failed["error"]["kind"] == "tool_error"
        state = await session.state()
        assert state["state_hash"] == gateway.instance().state.hash()
        with pytest.raises(WebSocketError) as caught:
            await session.request({"type": "jump"})
        assert (caught.value.code, caught.value.kind) == ("UNKNOWN_TYPE", "bad_request")
        assert (await session.state())["step_count"] == 3  # still open after the error
    assert [c.session for c in gateway.instance().trajectory.calls()] == ["run-1", "run-1"]


async def test_the_client_as_a_supervisor_sees_the_supervisors_tools(server) -> None:
    _, url = server
    async with await WebSocketSession.connect(url + "/", role="supervisor") as session:
        assert "close_ticket" in [t["name"] for t in await session.list_tools()]
        closed = await session.call("close_ticket", {"ticket_id": "T-1"})
        assert closed["structuredContent"]["status"] == "closed"


def test_ws_url_from_a_base_url() -> None:
    assert ws_url("http://127.0.0.1:8765") == "ws://127.0.0.1:8765/ws"
    assert ws_url("https://env.example/") == "wss://env.example/ws"
    assert ws_url("http://h:1", "ep1") == "ws://h:1/instances/ep1/ws"
    assert ws_url("ws://h:1/instances/x/ws", "ignored") == "ws://h:1/instances/x/ws"
