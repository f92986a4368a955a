"""The REST surface over HTTP: /step, clock, triggers, tool access, trajectory, state,
instances and auth, with the exact shapes of the AgentEnv protocol (PROTOCOL.md).

Most cases run in process (httpx.ASGITransport); the last ones run a real uvicorn server
(`make_server`) because they need the app's lifespan or real sockets.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from agentenv import Gateway
from agentenv.gateway.auth import Authenticator
from agentenv.serve import create_app

AGENT_TOOLS = [
    "get_ticket",
    "list_tickets",
    "create_ticket",
    "update_ticket",
    "add_note",
    "explode",
    "refuse",
    "tag_set",
    "slow",
    "ticket_ids",
]
SUPERVISOR_TOOLS = [*AGENT_TOOLS, "close_ticket"]
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
ERROR_KEYS = {"code", "message", "retryable", "applied", "kind"}
# Our kinds that answer with one of upstream's codes; every other kind is its own code.
CODES = {
    "bad_request": "invalid_params",
    "malformed_json": "invalid_params",
    "invalid_arguments": "invalid_params",
    "forbidden": "permission_denied",
    "denied": "permission_denied",
}


# -- helpers --------------------------------------------------------------------------------


def call_body(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"action": "call_tool", "tool_name": tool, "arguments": arguments}


async def call(
    client: httpx.AsyncClient, tool: str, prefix: str = "", role: str | None = None, **args: Any
) -> httpx.Response:
    headers = {"AgentEnv-Role": role} if role else {}
    return await client.post(f"{prefix}/step", json=call_body(tool, **args), headers=headers)


async def tool_names(
    client: httpx.AsyncClient, role: str | None = None, prefix: str = ""
) -> list[str]:
    headers = {"AgentEnv-Role": role} if role else {}
    r = await client.post(f"{prefix}/step", json={"action": "list_tools"}, headers=headers)
    assert r.status_code == 200
    return [t["name"] for t in r.json()["tools"]]


async def state_of(client: httpx.AsyncClient, prefix: str = "") -> dict[str, Any]:
    r = await client.get(f"{prefix}/state")
    assert r.status_code == 200
    return r.json()


async def trajectory(client: httpx.AsyncClient, prefix: str = "", since: int | None = None):
    """Our trajectory records (GET /trajectory?format=records), from record `since` on."""
    url = f"{prefix}/trajectory?format=records" + (f"&since={since}" if since is not None else "")
    r = await client.get(url)
    assert r.status_code == 200
    return [json.loads(line) for line in r.text.splitlines()]


async def ticket(client: httpx.AsyncClient, key: str, prefix: str = "") -> dict[str, Any]:
    r = await call(client, "get_ticket", prefix, id=key)
    assert r.status_code == 200 and r.json()["isError"] is False, r.text
    return r.json()["structuredContent"]


def assert_error_body(r: httpx.Response, status: int, kind: str) -> str:
    """The one error shape of the REST surface; returns the message."""
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"ok", "error"} and body["ok"] is False
    assert ERROR_KEYS <= set(body["error"]) <= {*ERROR_KEYS, "hint"}  # a hint where it helps
    assert body["error"]["kind"] == kind
    assert body["error"]["code"] == CODES.get(kind, kind)
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body["error"]["message"]


def assert_failed_call(r: httpx.Response, status: int, kind: str) -> str:
    """A failed tool call: MCP CallToolResult with isError, plus our `error`."""
    assert r.status_code == status, r.text
    body = r.json()
    keys = {"content", "isError", "structuredContent", "changelog_id", "error"}
    assert set(body) == (keys if status == 200 else {"ok", *keys})
    assert body.get("ok", False) is False
    assert body["isError"] is True
    assert body["structuredContent"] is None
    assert set(body["error"]) == ERROR_KEYS
    assert body["error"]["kind"] == kind
    assert body["error"]["code"] == CODES.get(kind, kind)
    [content] = body["content"]
    assert content["type"] == "text"
    assert body["error"]["message"] in content["text"]
    return body["error"]["message"]


# -- /step: list_tools and call_tool --------------------------------------------------------


async def test_list_tools_answers_upstreams_tool_shape(client: httpx.AsyncClient) -> None:
    r = await client.post("/step", json={"action": "list_tools"})
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"tools"}
    assert [t["name"] for t in body["tools"]] == AGENT_TOOLS
    for t in body["tools"]:
        # Upstream's name, description, parameters; MCP's inputSchema kept beside them.
        assert list(t)[:3] == ["name", "description", "parameters"]
        assert set(t) == {"name", "description", "parameters", "inputSchema"}
        assert t["parameters"] == t["inputSchema"]
        assert t["parameters"]["type"] == "object"
    add_note = next(t for t in body["tools"] if t["name"] == "add_note")
    assert add_note["description"].startswith("Add a note to a ticket.")
    schema = add_note["parameters"]
    assert set(schema["properties"]) == {"ticket_id", "text", "minutes"}
    assert sorted(schema["required"]) == ["text", "ticket_id"]
    assert schema["properties"]["minutes"]["type"] == "integer"
    assert schema["properties"]["text"]["description"] == "What to write."


async def test_list_tools_is_filtered_by_the_role_header(client: httpx.AsyncClient) -> None:
    assert await tool_names(client) == AGENT_TOOLS  # no header: the default role (agent)
    assert await tool_names(client, role="agent") == AGENT_TOOLS
    assert await tool_names(client, role="supervisor") == SUPERVISOR_TOOLS


async def test_call_tool_answers_a_call_tool_result(client: httpx.AsyncClient) -> None:
    r = await call(client, "get_ticket", id="T-1")
    assert r.status_code == 200
    body = r.json()
    assert set(body) == {"content", "isError", "structuredContent", "changelog_id"}
    assert body["isError"] is False
    expected = {"id": "T-1", "subject": "Printer on fire", "priority": 1, "status": "open"}
    assert body["structuredContent"] == expected
    [content] = body["content"]
    assert content["type"] == "text"
    assert json.loads(content["text"]) == expected
    assert body["changelog_id"] == (await state_of(client))["changelog_id"]


async def test_a_result_that_is_not_an_object_is_wrapped_in_structured_content(
    client: httpx.AsyncClient,
) -> None:
    r = await call(client, "ticket_ids")
    assert r.status_code == 200
    assert r.json()["structuredContent"] == {"result": ["T-1", "T-2"]}
    assert json.loads(r.json()["content"][0]["text"]) == ["T-1", "T-2"]


async def test_a_write_moves_the_changelog_and_the_state_hash(client: httpx.AsyncClient) -> None:
    before = await state_of(client)
    r = await call(client, "add_note", ticket_id="T-2", text="called back", minutes=5)
    assert r.status_code == 200 and r.json()["isError"] is False
    note = r.json()["structuredContent"]
    assert note == {"id": "N-1", "ticket_id": "T-2", "text": "called back", "minutes": 5}
    after = await state_of(client)
    assert after["changelog_id"] == r.json()["changelog_id"] > before["changelog_id"]
    assert after["state_hash"] != before["state_hash"]


async def test_a_role_may_call_its_own_tools(client: httpx.AsyncClient) -> None:
    r = await call(client, "close_ticket", role="supervisor", ticket_id="T-2")
    assert r.status_code == 200 and r.json()["isError"] is False
    assert (await ticket(client, "T-2"))["status"] == "closed"


# Each bad call: (id, tool, arguments, role, HTTP status, error kind, text the message names)
BAD_CALLS = [
    ("unknown-tool", "no_such_tool", {}, None, 404, "unknown_tool", "no_such_tool"),
    (
        "wrong-type",
        "add_note",
        {"ticket_id": "T-1", "text": "x", "minutes": "lots"},
        None,
        200,
        "invalid_arguments",
        "minutes",
    ),
    ("missing-arg", "add_note", {"ticket_id": "T-1"}, None, 200, "invalid_arguments", "text"),
    (
        "unknown-arg",
        "get_ticket",
        {"id": "T-1", "colour": "red"},
        None,
        200,
        "invalid_arguments",
        "colour",
    ),
    ("tool-raises", "explode", {"ticket_id": "T-1"}, None, 200, "tool_error", "kaboom"),
    ("tool-error", "refuse", {"reason": "not today"}, None, 200, "tool_error", "not today"),
    ("missing-record", "get_ticket", {"id": "T-404"}, None, 200, "tool_error", "T-404"),
    ("not-json", "tag_set", {"ticket_id": "T-1"}, None, 200, "invalid_result", "JSON"),
    ("denied", "close_ticket", {"ticket_id": "T-1"}, "agent", 403, "denied", "close_ticket"),
    ("timeout", "slow", {"ticket_id": "T-1"}, None, 504, "timeout", "slow"),
]


@pytest.mark.parametrize(
    ("tool", "arguments", "role", "status", "kind", "names"),
    [case[1:] for case in BAD_CALLS],
    ids=[case[0] for case in BAD_CALLS],
)
async def test_a_bad_call_answers_a_structured_error_and_changes_nothing(
    client: httpx.AsyncClient,
    tool: str,
    arguments: dict[str, Any],
    role: str | None,
    status: int,
    kind: str,
    names: str,
) -> None:
    before = await state_of(client)
    headers = {"AgentEnv-Role": role} if role else {}
    r = await client.post(
        "/step",
        json={"action": "call_tool", "tool_name": tool, "arguments": arguments},
        headers=headers,
    )
    message = assert_failed_call(r, status, kind)
    assert names in message
    assert r.json()["changelog_id"] == before["changelog_id"]
    after = await state_of(client)
    assert after["state_hash"] == before["state_hash"]
    assert after["changelog_id"] == before["changelog_id"]
    # The call is on the record...
    last = (await trajectory(client))[-1]
    assert (last["kind"], last["tool"], last["error"]["kind"]) == ("call", tool, kind)
    assert last["denied"] is (kind == "denied")
    # ...and the server keeps serving; the tools that wrote before failing left no trace.
    assert (await ticket(client, "T-1"))["status"] == "open"


async def test_a_denied_call_is_recorded_as_denied(client: httpx.AsyncClient) -> None:
    r = await call(client, "close_ticket", role="agent", ticket_id="T-1")
    assert r.status_code == 403
    [record] = [x for x in await trajectory(client) if x["tool"] == "close_ticket"]
    assert record["denied"] is True
    assert record["role"] == "agent"
    assert record["args"] == {"ticket_id": "T-1"}
    assert record["error"]["kind"] == "denied"
    assert record["result"] is None


# Each bad body: (id, raw body, status, error kind, text the message names)
BAD_BODIES = [
    ("malformed-json", b'{"action": "list_tools"', 400, "malformed_json", "JSON"),
    ("empty", b"", 400, "bad_request", "body"),
    ("not-utf8", b'{"action": "\xff"}', 400, "malformed_json", "JSON"),
    ("not-an-object", b"[1, 2]", 400, "bad_request", "dictionary"),
    ("unknown-action", b'{"action": "dance"}', 400, "bad_request", "action"),
    ("no-tool-name", b'{"action": "call_tool"}', 400, "bad_request", "tool_name"),
    (
        "arguments-not-object",
        b'{"action": "call_tool", "tool_name": "get_ticket", "arguments": [1]}',
        400,
        "bad_request",
        "arguments",
    ),
    ("unknown-field", b'{"action": "list_tools", "page": 2}', 400, "bad_request", "page"),
    (
        "oversized",
        b'{"action": "list_tools", "pad": "' + b" " * (1024 * 1024) + b'"}',
        413,
        "too_large",
        "limit",
    ),
]


@pytest.mark.parametrize(
    ("raw", "status", "kind", "names"),
    [case[1:] for case in BAD_BODIES],
    ids=[case[0] for case in BAD_BODIES],
)
async def test_a_bad_body_answers_the_error_shape_and_changes_nothing(
    client: httpx.AsyncClient, raw: bytes, status: int, kind: str, names: str
) -> None:
    before = await state_of(client)
    r = await client.post("/step", content=raw, headers={"content-type": "application/json"})
    assert names in assert_error_body(r, status, kind)
    after = await state_of(client)
    assert after["state_hash"] == before["state_hash"]
    assert await trajectory(client) == []  # never reached the gateway
    assert (await ticket(client, "T-1"))["status"] == "open"


async def test_a_streamed_oversized_body_is_refused_with_413(client: httpx.AsyncClient) -> None:
    async def chunks():
        yield b'{"action": "call_tool", "tool_name": "add_note", "arguments": {"text": "'
        for _ in range(80):
            yield b"x" * 16384
        yield b'", "ticket_id": "T-1"}}'

    before = await state_of(client)
    r = await client.post("/step", content=chunks())
    assert "content-length" not in r.request.headers
    assert_error_body(r, 413, "too_large")
    assert (await state_of(client))["state_hash"] == before["state_hash"]
    assert (await call(client, "ticket_ids")).status_code == 200


async def test_a_body_under_the_limit_is_served(gateway: Gateway, app_client) -> None:
    body = json.dumps(call_body("add_note", ticket_id="T-1", text="n" * 200)).encode()
    async with app_client(create_app(gateway, max_body=len(body))) as c:
        r = await c.post("/step", content=body)
        assert r.status_code == 200 and r.json()["isError"] is False
        r = await c.post("/step", content=body + b" ")
        assert_error_body(r, 413, "too_large")


# -- clock ----------------------------------------------------------------------------------


async def set_time(
    client: httpx.AsyncClient, when: datetime = T0, prefix: str = "", **extra: Any
) -> httpx.Response:
    return await client.put(
        f"{prefix}/clock/set-time", json={"virtual_time": when.isoformat(), **extra}
    )


async def clock_time(client: httpx.AsyncClient) -> datetime:
    r = await client.get("/clock/time")
    assert r.status_code == 200, r.text
    assert set(r.json()) == {"virtual_time"}
    return datetime.fromisoformat(r.json()["virtual_time"])


async def test_an_unarmed_clock_answers_404(client: httpx.AsyncClient) -> None:
    assert_error_body(await client.get("/clock/time"), 404, "clock_not_armed")
    r = await client.get("/clock/state")
    assert r.status_code == 200
    assert r.json()["armed"] is False
    assert "virtual_time" not in r.json() and "t0" not in r.json()
    assert "get_time" not in await tool_names(client)


async def test_set_time_arms_the_clock_and_adds_get_time(client: httpx.AsyncClient) -> None:
    r = await set_time(client, virtual_seconds_per_real_second=0)
    assert r.status_code == 200
    assert r.json()["armed"] is True
    assert r.json()["virtual_seconds_per_real_second"] == 0
    assert datetime.fromisoformat(r.json()["virtual_time"]) == T0
    assert await clock_time(client) == T0
    assert await tool_names(client) == [*AGENT_TOOLS, "get_time"]
    got = await call(client, "get_time")
    assert got.status_code == 200 and got.json()["isError"] is False
    assert got.json()["structuredContent"]["current_time"] == "2026-03-02T09:00:00Z"
    assert (await state_of(client))["clock_armed"] is True


async def test_clock_state_reports_mode_rate_and_time(client: httpx.AsyncClient) -> None:
    await set_time(client, mode="wall", virtual_seconds_per_real_second=0)
    r = await client.get("/clock/state")
    assert r.status_code == 200
    body = r.json()
    assert body["armed"] is True
    assert body["mode"] == "wall"
    assert body["virtual_seconds_per_real_second"] == 0
    assert body["virtual_time"] == body["t0"] == "2026-03-02T09:00:00Z"
    assert body["env_get_time_url"] == "http://testserver/clock/time"


async def test_reading_a_frozen_clock_never_moves_it(client: httpx.AsyncClient) -> None:
    await set_time(client, mode="wall", virtual_seconds_per_real_second=0)
    assert [await clock_time(client) for _ in range(3)] == [T0] * 3


async def test_a_stepped_clock_moves_only_with_tool_calls(client: httpx.AsyncClient) -> None:
    await set_time(client, mode="stepped")
    assert await clock_time(client) == await clock_time(client) == T0
    assert (await call(client, "get_ticket", id="T-1")).status_code == 200
    assert await clock_time(client) == T0 + timedelta(seconds=1)  # the default duration


async def test_advance_moves_an_armed_clock(client: httpx.AsyncClient) -> None:
    await set_time(client, mode="stepped")
    r = await client.post("/clock/advance", json={"seconds": 90})
    assert r.status_code == 200
    assert datetime.fromisoformat(r.json()["virtual_time"]) == T0 + timedelta(seconds=90)
    assert await clock_time(client) == T0 + timedelta(seconds=90)


async def test_clear_disarms_the_clock_and_removes_get_time(client: httpx.AsyncClient) -> None:
    await set_time(client)
    r = await client.post("/clock/clear")
    assert r.status_code == 200
    assert (r.json()["ok"], r.json()["armed"]) == (True, False)
    assert_error_body(await client.get("/clock/time"), 404, "clock_not_armed")
    assert "get_time" not in await tool_names(client)
    assert_failed_call(await call(client, "get_time"), 404, "unknown_tool")


@pytest.mark.parametrize(
    ("method", "url", "body", "names"),
    [
        (
            "PUT",
            "/clock/set-time",
            {"virtual_time": "2026-03-02T09:00:00Z", "virtual_seconds_per_real_second": 86401},
            "virtual_seconds_per_real_second",
        ),
        (
            "PUT",
            "/clock/set-time",
            {"virtual_time": "2026-03-02T09:00:00Z", "virtual_seconds_per_real_second": -1},
            "virtual_seconds_per_real_second",
        ),
        ("PUT", "/clock/set-time", {"virtual_time": "2026-03-02T09:00:00"}, "timezone"),
        ("PUT", "/clock/set-time", {"virtual_time": "soon"}, "virtual_time"),
        ("PUT", "/clock/set-time", {}, "virtual_time"),
        ("PUT", "/clock/set-time", {"virtual_time": "2026-03-02T09:00:00Z", "mode": "x"}, "mode"),
        ("POST", "/clock/advance", {"seconds": 60}, "not armed"),
        ("POST", "/clock/advance", {"seconds": 0}, "seconds"),
    ],
    ids=[
        "rate-too-high",
        "rate-negative",
        "naive",
        "not-a-time",
        "empty",
        "mode",
        "unarmed",
        "zero",
    ],
)
async def test_a_bad_clock_request_is_400_and_leaves_the_clock_alone(
    client: httpx.AsyncClient, method: str, url: str, body: dict[str, Any], names: str
) -> None:
    before = (await client.get("/clock/state")).json()
    r = await client.request(method, url, json=body)
    assert names in assert_error_body(r, 400, "bad_request")
    assert (await client.get("/clock/state")).json() == before


async def test_advancing_the_clock_by_an_absurd_amount_is_400(client: httpx.AsyncClient) -> None:
    await set_time(client, mode="stepped")
    r = await client.post("/clock/advance", json={"seconds": 1e20})
    assert "seconds" in assert_error_body(r, 400, "bad_request")
    assert await clock_time(client) == T0


async def test_a_call_at_the_end_of_time_is_still_answered(client: httpx.AsyncClient) -> None:
    await set_time(client, datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC), mode="stepped")
    r = await call(client, "get_ticket", id="T-1")
    assert r.status_code == 200


async def test_the_rate_cap_itself_is_allowed(client: httpx.AsyncClient) -> None:
    r = await set_time(client, virtual_seconds_per_real_second=86400)
    assert r.status_code == 200
    assert r.json()["virtual_seconds_per_real_second"] == 86400


async def test_a_clock_armed_by_the_document_answers_at_once(
    clocked_client: httpx.AsyncClient,
) -> None:
    assert await clock_time(clocked_client) == T0
    assert "get_time" in await tool_names(clocked_client)
    assert (await clocked_client.get("/clock/state")).json()["mode"] == "stepped"


async def test_the_trajectory_is_stamped_with_virtual_time_while_armed(
    client: httpx.AsyncClient,
) -> None:
    await call(client, "get_ticket", id="T-1")
    await set_time(client, mode="stepped")
    await call(client, "get_ticket", id="T-2")
    calls = [x for x in await trajectory(client) if x["kind"] == "call"]
    assert [c["args"]["id"] for c in calls] == ["T-1", "T-2"]
    assert calls[0]["virtual_time"] is None
    assert datetime.fromisoformat(calls[1]["virtual_time"]) == T0


# -- triggers -------------------------------------------------------------------------------


def note_trigger(trigger_id: str, text: str = "auto", **extra: Any) -> dict[str, Any]:
    """An action trigger: after add_note on a ticket, mark that ticket 'noted'."""
    return {
        "id": trigger_id,
        "when": {"type": "action", "tool": "add_note"},
        "actions": [
            {
                "type": "tool",
                "tool": "update_ticket",
                "args": {"id": "${args.ticket_id}", "status": text},
            }
        ],
        **extra,
    }


async def register(client: httpx.AsyncClient, *triggers: dict[str, Any], prefix: str = ""):
    return await client.post(f"{prefix}/triggers/register", json={"triggers": list(triggers)})


async def triggers_state(client: httpx.AsyncClient) -> dict[str, Any]:
    r = await client.get("/triggers/state")
    assert r.status_code == 200
    assert set(r.json()) == {"config", "triggers", "events", "events_dropped"}
    return r.json()


async def test_register_adds_triggers_by_id(client: httpx.AsyncClient) -> None:
    r = await register(client, note_trigger("t1"))
    assert r.status_code == 200
    assert r.json() == {"ok": True, "added": ["t1"], "all": ["t1"]}
    r = await register(client, note_trigger("t2"))
    assert r.json() == {"ok": True, "added": ["t2"], "all": ["t1", "t2"]}
    state = await triggers_state(client)
    assert [(t["id"], t["type"], t["status"]) for t in state["triggers"]] == [
        ("t1", "action", "armed"),
        ("t2", "action", "armed"),
    ]
    # The same spec again changes nothing; a different one under the same id is a 400.
    r = await register(client, note_trigger("t1"))
    assert r.json() == {"ok": True, "added": ["t1"], "all": ["t1", "t2"]}
    r = await register(client, note_trigger("t1", description="second version"))
    assert "already registered with a different spec" in assert_error_body(r, 400, "bad_request")
    state = await triggers_state(client)
    assert [t["id"] for t in state["triggers"]] == ["t1", "t2"]
    assert state["triggers"][0]["description"] == ""
    assert [(e["trigger_id"], e["kind"]) for e in state["events"][:2]] == [
        ("t1", "added"),
        ("t2", "added"),
    ]


async def test_an_action_trigger_fires_after_a_matching_call(client: httpx.AsyncClient) -> None:
    await register(client, note_trigger("noted", text="noted"))
    r = await call(client, "add_note", ticket_id="T-2", text="hello")
    assert r.status_code == 200 and r.json()["isError"] is False
    assert (await ticket(client, "T-2"))["status"] == "noted"
    assert (await ticket(client, "T-1"))["status"] == "open"
    state = await triggers_state(client)
    [info] = state["triggers"]
    assert (info["status"], info["fire_count"]) == ("fired", 1)
    assert info["detected_at"] and info["fired_at"]
    assert [e["kind"] for e in state["events"]] == ["added", "detected", "action_ok", "fired"]
    records = [x for x in await trajectory(client) if x["kind"] != "control"]
    assert [(x["kind"], x["tool"], x["trigger_id"], x["event"]) for x in records[:3]] == [
        ("call", "add_note", None, None),
        ("trigger", "update_ticket", "noted", None),
        ("trigger", None, "noted", "fired"),
    ]


async def test_a_trigger_whose_action_fails_is_marked_failed(client: httpx.AsyncClient) -> None:
    trigger = {
        "id": "doomed",
        "when": {"type": "action", "tool": "ticket_ids"},
        "actions": [{"type": "tool", "tool": "refuse", "args": {"reason": "no way"}}],
    }
    assert (await register(client, trigger)).status_code == 200
    before = await state_of(client)
    r = await call(client, "ticket_ids")
    assert r.status_code == 200 and r.json()["isError"] is False  # the call itself is fine
    [info] = (await triggers_state(client))["triggers"]
    assert (info["status"], info["failure_count"]) == ("armed", 1)  # a failure re-arms it
    assert "no way" in info["error"]
    events = [e["kind"] for e in (await triggers_state(client))["events"]]
    assert events[-2:] == ["action_failed", "failed"]
    assert (await state_of(client))["state_hash"] == before["state_hash"]


async def test_a_time_trigger_fires_when_the_clock_reaches_it(client: httpx.AsyncClient) -> None:
    await set_time(client, mode="stepped")
    trigger = {
        "id": "wake",
        "when": {"type": "time", "after": "PT1H"},
        "actions": [
            {"type": "tool", "tool": "update_ticket", "args": {"id": "T-1", "status": "woken"}}
        ],
    }
    assert (await register(client, trigger)).status_code == 200
    [info] = (await triggers_state(client))["triggers"]
    assert info["status"] == "armed"
    assert info["next_mark"] == "2026-03-02T10:00:00Z"
    await client.post("/clock/advance", json={"seconds": 1800})
    assert (await triggers_state(client))["triggers"][0]["status"] == "armed"
    await client.post("/clock/advance", json={"seconds": 1800})
    [info] = (await triggers_state(client))["triggers"]
    assert (info["status"], info["fire_count"]) == ("fired", 1)
    assert (await ticket(client, "T-1"))["status"] == "woken"
    fired = [x for x in await trajectory(client) if x["kind"] == "trigger" and x["event"]]
    assert fired[-1]["event"] == "fired"
    assert datetime.fromisoformat(fired[-1]["virtual_time"]) == T0 + timedelta(hours=1)


BAD_TRIGGERS = [
    (
        "unknown-action-tool",
        {
            "id": "bad",
            "when": {"type": "action", "tool": "add_note"},
            "actions": [{"type": "tool", "tool": "no_such_tool"}],
        },
        "no_such_tool",
    ),
    (
        "unknown-watched-tool",
        {
            "id": "bad",
            "when": {"type": "action", "tool": "no_such_tool"},
            "actions": [{"type": "tool", "tool": "ticket_ids"}],
        },
        "no_such_tool",
    ),
    (
        "two-predicates",
        {
            "id": "bad",
            "when": {
                "type": "action",
                "tool": "add_note",
                "where": [{"path": "args.text", "regex": "x", "equals": "x"}],
            },
            "actions": [{"type": "tool", "tool": "ticket_ids"}],
        },
        "exactly one",
    ),
    (
        "actions-not-a-list",
        {"id": "bad", "when": {"type": "action", "tool": "add_note"}, "actions": {}},
        "actions",
    ),
    (
        "unknown-when",
        {"id": "bad", "when": {"type": "sometimes"}, "actions": [{"type": "tool", "tool": "x"}]},
        "when",
    ),
    (
        "delay-unarmed",
        {
            "id": "bad",
            "when": {"type": "action", "tool": "add_note", "delay": "PT1H"},
            "actions": [{"type": "tool", "tool": "ticket_ids"}],
        },
        "armed clock",
    ),
]


@pytest.mark.parametrize(
    ("bad", "names"), [c[1:] for c in BAD_TRIGGERS], ids=[c[0] for c in BAD_TRIGGERS]
)
async def test_a_bad_trigger_fails_loudly_and_registers_nothing(
    client: httpx.AsyncClient, bad: dict[str, Any], names: str
) -> None:
    await register(client, note_trigger("kept"))
    r = await register(client, note_trigger("good"), bad)
    assert names in assert_error_body(r, 400, "bad_request")
    state = await triggers_state(client)
    assert [t["id"] for t in state["triggers"]] == ["kept"]
    assert [e["trigger_id"] for e in state["events"]] == ["kept"]


async def test_remove_and_clear_triggers(client: httpx.AsyncClient) -> None:
    await register(client, note_trigger("a"), note_trigger("b"), note_trigger("c"))
    r = await client.post("/triggers/remove", json={"ids": ["b"]})
    assert r.status_code == 200
    assert r.json() == {"ok": True, "removed": ["b"]}
    state = await triggers_state(client)
    assert [t["id"] for t in state["triggers"]] == ["a", "c"]
    assert (state["events"][-1]["trigger_id"], state["events"][-1]["kind"]) == ("b", "removed")
    # A removed trigger no longer fires; removing an unknown id is no error.
    await call(client, "add_note", ticket_id="T-1", text="hi")
    assert [
        e["trigger_id"] for e in (await triggers_state(client))["events"] if e["kind"] == "fired"
    ] == ["a", "c"]
    r = await client.post("/triggers/remove", json={"ids": ["a", "nope"]})
    assert r.json() == {"ok": True, "removed": ["a"]}
    r = await client.post("/triggers/remove", json={"ids": []})
    assert r.json() == {"ok": True, "removed": []}

    r = await client.post("/triggers/clear")
    assert (r.status_code, r.json()) == (200, {"ok": True})
    state = await triggers_state(client)
    assert (state["triggers"], state["events"]) == ([], [])  # clear forgets the log too


@pytest.mark.parametrize(
    ("body", "status", "names"),
    [({"ids": [""]}, 400, "ids"), ({}, 400, "ids"), ({"ids": "a"}, 400, "ids")],
    ids=["empty-id", "missing", "not-a-list"],
)
async def test_a_bad_remove_removes_nothing(
    client: httpx.AsyncClient, body: dict[str, Any], status: int, names: str
) -> None:
    await register(client, note_trigger("a"))
    r = await client.post("/triggers/remove", json=body)
    assert names in assert_error_body(r, status, "bad_request")
    assert [t["id"] for t in (await triggers_state(client))["triggers"]] == ["a"]


async def test_a_document_trigger_is_armed_and_fires(clocked_client: httpx.AsyncClient) -> None:
    [info] = (await triggers_state(clocked_client))["triggers"]
    assert (info["id"], info["status"]) == ("escalate", "armed")
    r = await call(clocked_client, "update_ticket", id="T-1", priority=2)
    assert r.status_code == 200 and r.json()["isError"] is False
    assert (await triggers_state(clocked_client))["triggers"][0]["status"] == "armed"
    r = await call(clocked_client, "update_ticket", id="T-1", priority=1)
    assert r.status_code == 200 and r.json()["isError"] is False
    assert (await triggers_state(clocked_client))["triggers"][0]["status"] == "fired"
    data = await clocked_client.post(
        "/agentenv", json={"jsonrpc": "2.0", "id": 1, "method": "data/get"}
    )
    notes = data.json()["result"]["parts"][0]["data"]["notes"]
    assert notes == [{"id": "esc-T-1", "ticket_id": "T-1", "text": "escalated"}]


# -- tool access ----------------------------------------------------------------------------


async def test_disable_hides_and_refuses_tools_for_one_role(client: httpx.AsyncClient) -> None:
    r = await client.post(
        "/tools/disable", json={"role": "agent", "tools": ["add_note", "explode"]}
    )
    assert r.status_code == 200
    assert r.json() == {
        "role": "agent",
        "disabled": ["add_note", "explode"],
        "allowed": [],
        "role_rules": {"agent": {"add_note": False, "explode": False}},  # ours: every role
    }
    assert await tool_names(client, "agent") == [
        t for t in AGENT_TOOLS if t not in ("add_note", "explode")
    ]
    assert_failed_call(await call(client, "add_note", ticket_id="T-1", text="x"), 403, "denied")
    assert await tool_names(client, "supervisor") == SUPERVISOR_TOOLS  # others unaffected
    assert (await state_of(client))["role_rules"] == r.json()["role_rules"]

    r = await client.post("/tools/enable", json={"role": "agent", "tools": ["add_note"]})
    assert r.status_code == 200
    assert (r.json()["role"], r.json()["disabled"], r.json()["allowed"]) == (
        "agent",
        ["explode"],
        ["add_note"],
    )
    assert (await state_of(client))["roles"] == {
        "agent": {"disabled": ["explode"], "allowed": ["add_note"]}
    }
    assert await tool_names(client, "agent") == [t for t in AGENT_TOOLS if t != "explode"]
    r = await call(client, "add_note", ticket_id="T-1", text="x")
    assert r.status_code == 200 and r.json()["isError"] is False


async def test_disable_star_hides_every_tool(client: httpx.AsyncClient) -> None:
    r = await client.post("/tools/disable", json={"role": "agent", "tools": "*"})
    assert r.status_code == 200
    assert await tool_names(client, "agent") == []
    assert_failed_call(await call(client, "get_ticket", id="T-1"), 403, "denied")
    assert await tool_names(client, "supervisor") == SUPERVISOR_TOOLS


async def test_disable_for_the_wildcard_role_applies_to_every_role(
    client: httpx.AsyncClient,
) -> None:
    r = await client.post("/tools/disable", json={"role": "*", "tools": ["ticket_ids"]})
    assert r.status_code == 200
    assert "ticket_ids" not in await tool_names(client, "agent")
    assert "ticket_ids" not in await tool_names(client, "supervisor")


async def test_enable_star_after_disable_star_gives_back_the_same_tools(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/tools/disable", json={"role": "agent", "tools": "*"})
    r = await client.post("/tools/enable", json={"role": "agent", "tools": "*"})
    assert r.status_code == 200
    assert set(AGENT_TOOLS) <= set(await tool_names(client, "agent"))
    r = await call(client, "get_ticket", id="T-1")
    assert r.status_code == 200 and r.json()["isError"] is False


async def test_enable_star_does_not_grant_tools_declared_for_other_roles(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/tools/disable", json={"role": "agent", "tools": "*"})
    await client.post("/tools/enable", json={"role": "agent", "tools": "*"})
    assert await tool_names(client, "agent") == AGENT_TOOLS
    assert (await call(client, "close_ticket", role="agent", ticket_id="T-1")).status_code == 403


@pytest.mark.parametrize(
    ("body", "names"),
    [
        ({"role": "agent", "tools": ["add_note", "no_such_tool"]}, "no_such_tool"),
        ({"role": "agent", "tools": "all"}, "tools"),
        ({"tools": ["add_note"]}, "role"),
        ({"role": "", "tools": ["add_note"]}, "role"),  # upstream: a role is a non-empty string
    ],
    ids=["unknown-tool", "bad-tools", "no-role", "empty-role"],
)
async def test_a_bad_access_change_is_400_and_changes_nothing(
    client: httpx.AsyncClient, body: dict[str, Any], names: str
) -> None:
    r = await client.post("/tools/disable", json=body)
    assert names in assert_error_body(r, 400, "bad_request")
    assert (await state_of(client))["role_rules"] == {}
    assert await tool_names(client, "agent") == AGENT_TOOLS


# -- trajectory and state -------------------------------------------------------------------


async def test_the_trajectory_is_jsonl_of_every_call(client: httpx.AsyncClient) -> None:
    await call(client, "get_ticket", id="T-1")
    await call(client, "add_note", ticket_id="T-1", text="hi")
    await call(client, "refuse", reason="no")
    r = await client.get("/trajectory")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/jsonl")
    events = [json.loads(line) for line in r.text.splitlines()]
    assert [e["tool_call"]["function_name"] for e in events if e["event_type"] == "tool_call"] == [
        "get_ticket",
        "add_note",
        "refuse",
    ]
    r = await client.get("/trajectory?format=records")
    assert r.headers["content-type"].startswith("application/jsonl")
    assert r.text.endswith("\n")
    records = [json.loads(line) for line in r.text.splitlines()]
    assert [x["seq"] for x in records] == [0, 1, 2]
    assert [x["tool"] for x in records] == ["get_ticket", "add_note", "refuse"]
    first = records[0]
    assert first["kind"] == "call"
    assert first["role"] == "agent"
    assert first["args"] == {"id": "T-1"}
    assert first["result"]["subject"] == "Printer on fire"
    assert first["error"] is None
    assert records[1]["changelog_id"] > records[0]["changelog_id"]
    assert records[1]["state_hash"] == (await state_of(client))["state_hash"]
    assert records[2]["error"] == {"kind": "tool_error", "message": "no"}
    for x in records:
        datetime.fromisoformat(x["wall_time"])


async def test_trajectory_since_returns_the_later_records(client: httpx.AsyncClient) -> None:
    for key in ("T-1", "T-2", "T-1"):
        await call(client, "get_ticket", id=key)
    assert [x["seq"] for x in await trajectory(client, since=1)] == [1, 2]
    assert [x["seq"] for x in await trajectory(client, since=2)] == [2]
    assert await trajectory(client, since=3) == []
    assert [x["seq"] for x in await trajectory(client, since=0)] == [0, 1, 2]
    assert_error_body(await client.get("/trajectory?since=soon"), 400, "bad_request")
    # Over events (the default form), `since` counts the events a reader already has.
    r = await client.get("/trajectory?since=4")
    assert [json.loads(x)["event_id"] for x in r.text.splitlines()] == ["event_5", "event_6"]


async def test_control_operations_are_on_the_trajectory(client: httpx.AsyncClient) -> None:
    await set_time(client)
    await client.post("/tools/disable", json={"role": "agent", "tools": ["explode"]})
    records = await trajectory(client)
    assert [(x["kind"], x["event"]) for x in records] == [
        ("control", "clock_set"),
        ("control", "tools_disable"),
    ]


async def test_state_reports_servers_tools_changelog_and_rules(client: httpx.AsyncClient) -> None:
    body = await state_of(client)
    # Upstream's keys first, then ours.
    assert list(body)[:4] == ["mcp_servers", "changelog_id", "roles", "tool_name_clashes"]
    [served] = body["mcp_servers"]
    assert served["name"] == "test-desk"
    assert [t["name"] for t in served["tools"]] == sorted(SUPERVISOR_TOOLS)
    for t in served["tools"]:
        assert set(t) == {"name", "description", "parameters"}
        assert t["parameters"]["type"] == "object"
    assert body["roles"] == {}
    assert body["tool_name_clashes"] == {}
    assert set(body) >= {"servers", "tools", "changelog_id", "role_rules"}
    assert body["name"] == "test-desk"
    assert body["version"] == "1.2.3"
    assert body["instance"] == "default"
    assert body["tools"] == sorted(SUPERVISOR_TOOLS)
    [server] = body["servers"]
    assert (server["name"], server["tools"]) == ("test-desk", sorted(SUPERVISOR_TOOLS))
    assert body["declared_roles"] == ["agent", "supervisor"]
    assert body["role_rules"] == {}
    assert body["clock_armed"] is False
    assert body["instances"] == 1
    assert isinstance(body["changelog_id"], int)
    assert isinstance(body["state_hash"], str) and body["state_hash"]
    await set_time(client)
    armed = await state_of(client)
    assert armed["tools"] == [*sorted(SUPERVISOR_TOOLS), "get_time"]
    assert armed["mcp_servers"][-1]["name"] == "gateway"  # upstream lists get_time so
    assert [t["name"] for t in armed["mcp_servers"][-1]["tools"]] == ["get_time"]


# -- instances ------------------------------------------------------------------------------


async def new_instance(client: httpx.AsyncClient, **body: Any) -> str:
    r = await client.post("/instances", json=body) if body else await client.post("/instances")
    assert r.status_code == 201, r.text
    assert set(r.json()) == {"id", "url"}
    assert r.json()["url"] == f"/instances/{r.json()['id']}"
    return r.json()["id"]


async def test_instances_are_isolated_from_each_other(client: httpx.AsyncClient) -> None:
    await call(client, "update_ticket", id="T-1", status="default-only")
    inst = await new_instance(client)
    prefix = f"/instances/{inst}"
    r = await client.get("/instances")
    assert r.json() == {"instances": ["default", inst]}
    # A new instance starts from the seed, not from the default instance's state.
    assert (await ticket(client, "T-1", prefix))["status"] == "open"
    await call(client, "update_ticket", prefix, id="T-2", status="instance-only")
    assert (await ticket(client, "T-2", prefix))["status"] == "instance-only"
    assert (await ticket(client, "T-2"))["status"] == "open"
    assert (await ticket(client, "T-1"))["status"] == "default-only"
    # Each has its own record, clock and rules.
    assert [x["args"]["id"] for x in await trajectory(client, prefix) if x["kind"] == "call"] == [
        "T-1",
        "T-2",
        "T-2",
    ]
    await set_time(client, prefix=prefix)
    assert (await client.get(f"{prefix}/clock/time")).status_code == 200
    assert (await client.get("/clock/time")).status_code == 404
    await client.post(f"{prefix}/tools/disable", json={"role": "agent", "tools": ["explode"]})
    assert "explode" not in await tool_names(client, prefix=prefix)
    assert "explode" in await tool_names(client)
    assert (await state_of(client, prefix))["instance"] == inst


async def test_an_instance_can_be_named_and_dropped(client: httpx.AsyncClient) -> None:
    assert await new_instance(client, id="episode-7") == "episode-7"
    assert_error_body(await client.post("/instances", json={"id": "episode-7"}), 400, "bad_request")
    assert_error_body(await client.post("/instances", json={"id": "a/b"}), 400, "bad_request")
    r = await client.delete("/instances/episode-7")
    assert r.status_code == 200
    assert r.json() == {"dropped": "episode-7"}
    assert (await client.get("/instances")).json() == {"instances": ["default"]}
    assert_error_body(await client.get("/instances/episode-7/state"), 404, "not_found")


async def test_the_default_instance_cannot_be_dropped(client: httpx.AsyncClient) -> None:
    assert_error_body(await client.delete("/instances/default"), 400, "bad_request")
    assert (await client.get("/instances")).json() == {"instances": ["default"]}


@pytest.mark.parametrize(
    ("method", "url", "body"),
    [
        ("POST", "/instances/nope/step", {"action": "list_tools"}),
        ("POST", "/instances/nope/step", call_body("ticket_ids")),
        ("GET", "/instances/nope/state", None),
        ("GET", "/instances/nope/trajectory", None),
        ("GET", "/instances/nope/clock/state", None),
        ("GET", "/instances/nope/.well-known/agent-env.json", None),
        ("DELETE", "/instances/nope", None),
    ],
)
async def test_an_unknown_instance_is_404(
    client: httpx.AsyncClient, method: str, url: str, body: Any
) -> None:
    r = await client.request(method, url, json=body)
    assert "nope" in assert_error_body(r, 404, "not_found")


async def test_openapi_describes_the_routes(client: httpx.AsyncClient) -> None:
    r = await client.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["info"]["title"] == "agentenv: test-desk"
    paths = doc["paths"]
    for path in (
        "/.well-known/agent-env.json",
        "/step",
        "/clock/set-time",
        "/triggers/register",
        "/tools/disable",
        "/trajectory",
        "/state",
        "/agentenv",
        "/instances",
        "/instances/{instance_id}/step",
    ):
        assert path in paths, path
    # The body schemas are components (tests/serve/test_openapi.py checks the whole document).
    step = doc["components"]["schemas"]["StepRequest"]
    assert step["properties"]["action"]["enum"] == ["list_tools", "call_tool"]


async def test_the_index_says_where_things_are(client: httpx.AsyncClient) -> None:
    r = await client.get("/")
    assert r.status_code == 200
    assert r.json()["card"] == "/.well-known/agent-env.json"
    assert r.json()["step"] == "/step"


# -- auth -----------------------------------------------------------------------------------


BEARER_AGENT = {"Authorization": "Bearer s1"}
BEARER_ADMIN = {"Authorization": "Bearer s2"}


@pytest.mark.parametrize(
    "headers",
    [{}, {"AgentEnv-Role": "admin"}, {"Authorization": "Bearer wrong"}, {"Authorization": "s1"}],
    ids=["none", "role-header-only", "unknown-token", "not-bearer"],
)
@pytest.mark.parametrize(
    ("method", "url"),
    [("POST", "/step"), ("GET", "/state"), ("GET", "/trajectory"), ("GET", "/clock/state")],
)
async def test_without_a_known_token_the_answer_is_401(
    token_client: httpx.AsyncClient, headers: dict[str, str], method: str, url: str
) -> None:
    body = {"action": "list_tools"} if method == "POST" else None
    r = await token_client.request(method, url, json=body, headers=headers)
    assert_error_body(r, 401, "unauthenticated")
    assert r.headers["www-authenticate"] == "Bearer"


async def test_a_token_gives_its_role_and_the_header_grants_nothing(
    token_client: httpx.AsyncClient,
) -> None:
    r = await token_client.post("/step", json={"action": "list_tools"}, headers=BEARER_AGENT)
    assert r.status_code == 200
    assert [t["name"] for t in r.json()["tools"]] == AGENT_TOOLS
    r = await token_client.post(
        "/step",
        json=call_body("close_ticket", ticket_id="T-1"),
        headers={**BEARER_AGENT, "AgentEnv-Role": "supervisor"},
    )
    assert_failed_call(r, 403, "denied")
    r = await token_client.post(
        "/step", json=call_body("get_ticket", id="T-1"), headers={"authorization": "bearer s1"}
    )
    assert r.status_code == 200 and r.json()["isError"] is False
    r = await token_client.get("/trajectory?format=records", headers=BEARER_AGENT)
    [*_, last] = r.text.splitlines()
    assert json.loads(last)["principal"] == "token:agent"


CONTROL_CALLS = [
    ("PUT", "/clock/set-time", {"virtual_time": "2026-03-02T09:00:00Z"}),
    ("POST", "/clock/clear", None),
    ("POST", "/triggers/register", {"triggers": []}),
    ("POST", "/triggers/clear", None),
    ("POST", "/tools/disable", {"role": "agent", "tools": ["explode"]}),
    ("POST", "/tools/enable", {"role": "agent", "tools": ["explode"]}),
    ("POST", "/instances", None),
]


@pytest.mark.parametrize(("method", "url", "body"), CONTROL_CALLS)
async def test_an_agent_token_cannot_use_the_control_plane(
    token_client: httpx.AsyncClient, method: str, url: str, body: Any
) -> None:
    before = (await token_client.get("/state", headers=BEARER_ADMIN)).json()
    r = await token_client.request(method, url, json=body, headers=BEARER_AGENT)
    assert_error_body(r, 403, "forbidden")
    assert (await token_client.get("/state", headers=BEARER_ADMIN)).json() == before


@pytest.mark.parametrize(("method", "url", "body"), CONTROL_CALLS)
async def test_an_admin_token_can_use_the_control_plane(
    token_client: httpx.AsyncClient, method: str, url: str, body: Any
) -> None:
    r = await token_client.request(method, url, json=body, headers=BEARER_ADMIN)
    assert r.status_code in (200, 201), r.text


async def test_the_card_is_public_when_tokens_are_required(
    token_client: httpx.AsyncClient,
) -> None:
    r = await token_client.get("/.well-known/agent-env.json")
    assert r.status_code == 200
    assert [t["name"] for t in r.json()["capabilities"]["tools"]] == AGENT_TOOLS


async def test_a_server_beyond_loopback_without_tokens_refuses_everyone(
    gateway: Gateway, app_client
) -> None:
    auth = Authenticator.for_host("0.0.0.0", default_role="agent")
    async with app_client(create_app(gateway, auth=auth)) as c:
        r = await c.post("/step", json={"action": "list_tools"}, headers={"AgentEnv-Role": "agent"})
        assert_error_body(r, 401, "unauthenticated")


# -- a real server --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_server(desk_env, live_server, http_client):
    """One uvicorn server for this module's real-HTTP tests (each uses its own instance)."""
    with live_server(Gateway(desk_env)) as url, http_client(url) as c:
        yield c


def real_instance(c: httpx.Client) -> str:
    r = c.post("/instances")
    assert r.status_code == 201
    return r.json()["url"]


def test_over_real_http_a_bad_call_leaves_the_server_serving(real_server: httpx.Client) -> None:
    prefix = real_instance(real_server)
    before = real_server.get(f"{prefix}/state").json()
    r = real_server.post(f"{prefix}/step", json=call_body("slow", ticket_id="T-1"))
    assert_failed_call(r, 504, "timeout")
    r = real_server.post(f"{prefix}/step", content=b"{nope")
    assert_error_body(r, 400, "malformed_json")
    assert real_server.get(f"{prefix}/state").json()["state_hash"] == before["state_hash"]
    r = real_server.post(f"{prefix}/step", json=call_body("get_ticket", id="T-1"))
    assert r.status_code == 200
    assert r.json()["structuredContent"]["status"] == "open"


def test_over_real_http_a_wall_clock_time_trigger_fires_on_its_own(
    real_server: httpx.Client,
) -> None:
    """The app's lifespan ticker fires due time triggers with no call to provoke them."""
    prefix = real_instance(real_server)
    r = real_server.put(
        f"{prefix}/clock/set-time",
        json={
            "virtual_time": T0.isoformat(),
            "virtual_seconds_per_real_second": 86400,
            "mode": "wall",
        },
    )
    assert r.status_code == 200
    trigger = {
        "id": "later",
        "when": {"type": "time", "after": "PT1H"},  # 1/24 s of real time at this rate
        "actions": [
            {"type": "tool", "tool": "update_ticket", "args": {"id": "T-2", "status": "late"}}
        ],
    }
    assert (
        real_server.post(f"{prefix}/triggers/register", json={"triggers": [trigger]}).status_code
        == 200
    )
    deadline = time.monotonic() + 15
    while True:
        [info] = real_server.get(f"{prefix}/triggers/state").json()["triggers"]
        if info["status"] != "armed" or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert info["status"] == "fired"
    r = real_server.get(f"{prefix}/trajectory?format=records")
    calls = [json.loads(x) for x in r.text.splitlines()]
    assert [x["tool"] for x in calls if x["kind"] == "call"] == []  # nobody called a tool
    r = real_server.post(f"{prefix}/step", json=call_body("get_ticket", id="T-2"))
    assert r.json()["structuredContent"]["status"] == "late"


def test_make_server_freezes_what_is_alive_once_the_app_is_built(desk_env) -> None:
    import gc

    from agentenv.serve import make_server

    gc.unfreeze()
    try:
        make_server(Gateway(desk_env), port=0, freeze_gc=False)
        assert gc.get_freeze_count() == 0
        gateway = Gateway(desk_env)
        make_server(gateway, port=0)
        assert gc.get_freeze_count() > 0
        # The gateway built before is frozen: it is in none of the generations the
        # collector walks (gc.get_objects lists those).
        walked = {id(o) for o in gc.get_objects()}
        assert id(gateway) not in walked
    finally:
        gc.unfreeze()
