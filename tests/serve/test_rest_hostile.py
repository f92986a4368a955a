"""Hostile input over REST, against a real uvicorn server on 127.0.0.1: deep nesting, huge
bodies and numbers, bytes that are not UTF-8, lone surrogates, NUL, wrong content types,
foreign Origin and Host, reserved roles.

What holds for every answer (the conftest's client checks it): no 5xx, no traceback. What
each test adds: the answer says what was wrong, nothing was applied, the server goes on.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentenv import Gateway
from agentenv.serve._http import BODY_DEPTH
from agentenv.spec.limits import MAX_JSON_DEPTH, depth_message

TOO_DEEP = f"the request body is {depth_message(BODY_DEPTH)}"

JSON = {"Content-Type": "application/json"}

# Every route that reads a body, with a minimal valid body.
BODY_ROUTES = [
    ("POST", "/step", {"action": "list_tools"}),
    ("PUT", "/clock/set-time", {"virtual_time": "2026-03-02T09:00:00Z"}),
    ("POST", "/clock/advance", {"seconds": 1}),
    ("POST", "/triggers/register", {"triggers": []}),
    ("POST", "/triggers/remove", {"ids": ["t1"]}),
    ("POST", "/tools/disable", {"role": "agent", "tools": ["add_note"]}),
    ("POST", "/tools/enable", {"role": "agent", "tools": ["add_note"]}),
    ("POST", "/instances", {"id": "ep"}),
    ("POST", "/instances/default/step", {"action": "list_tools"}),
]
ROUTE_IDS = [f"{m} {p}" for m, p, _ in BODY_ROUTES]


@pytest.fixture(scope="module")
def served(desk_env, live_server, http_client) -> Iterator[httpx.Client]:
    """One real server for the module: every test here is refused or adds a note only."""
    with live_server(Gateway(desk_env)) as url, http_client(url) as client:
        yield client


def snapshot(client: httpx.Client) -> tuple[str, int, list[str]]:
    """What must not move when a request is refused: the state, the trajectory, instances."""
    state = client.get("/state").json()["state_hash"]
    calls = len(client.get("/trajectory").text.splitlines())
    return state, calls, client.get("/instances").json()["instances"]


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def step_call(tool: str, arguments: Any) -> dict[str, Any]:
    return {"action": "call_tool", "tool_name": tool, "arguments": arguments}


def error_of(r: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["ok"] is False and body["error"]["kind"] == kind, body
    return body["error"]


# -- nesting ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), BODY_ROUTES, ids=ROUTE_IDS)
def test_a_body_nested_a_thousand_levels_is_400_on_every_route(
    served: httpx.Client, method: str, path: str, body: dict[str, Any]
) -> None:
    before = snapshot(served)
    deep = "[" * 1000 + "]" * 1000
    error = error_of(served.request(method, path, content=deep, headers=JSON), 400, "too_deep")
    assert error["message"] == TOO_DEEP
    assert error["code"] == "invalid_params"
    assert snapshot(served) == before  # nothing moved, and the server still answers


def test_step_arguments_nested_500_levels_are_400_and_never_reach_the_tool(
    served: httpx.Client,
) -> None:
    before = snapshot(served)
    body = step_call("add_note", {"ticket_id": "T-1", "text": nested(500)})
    r = served.post("/step", content=json.dumps(body), headers=JSON)
    assert error_of(r, 400, "too_deep")["message"] == TOO_DEEP
    assert snapshot(served) == before


@pytest.mark.parametrize(
    "body",
    [
        b"[" * 200_000,  # never closed: a parser would recurse before it found it malformed
        b'{"a":' * 50_000,
        b"]" * 100 + b"[" * 100,
    ],
    ids=["open-arrays", "open-objects", "inside-out"],
)
def test_unterminated_deep_nesting_is_400(served: httpx.Client, body: bytes) -> None:
    r = served.post("/step", content=body, headers=JSON)
    assert r.status_code == 400
    assert r.json()["error"]["kind"] in ("too_deep", "malformed_json")


def test_arguments_past_the_gateways_limit_are_a_recorded_tool_error(
    served: httpx.Client,
) -> None:
    """Between the two limits the body is read and the gateway refuses the arguments, as
    over MCP: `invalid_arguments` naming where, recorded, nothing written."""
    state = served.get("/state").json()["state_hash"]
    deep = step_call("add_note", {"ticket_id": "T-1", "text": nested(MAX_JSON_DEPTH + 1)})
    r = served.post("/step", json=deep)
    assert r.status_code == 200, r.text
    error = r.json()["error"]
    assert error["kind"] == "invalid_arguments"
    assert depth_message() in error["message"] and "text" in error["message"]
    assert served.get("/state").json()["state_hash"] == state
    last = json.loads(served.get("/trajectory?format=records").text.splitlines()[-1])
    assert last["tool"] == "add_note" and last["error"]["kind"] == "invalid_arguments"


def test_a_body_at_the_limit_is_read_and_one_level_more_is_not(served: httpx.Client) -> None:
    def body(lists: int) -> str:  # the body's object, `arguments`, then `lists` levels
        value = "[" * lists + "]" * lists
        return '{"action": "call_tool", "tool_name": "add_note", "arguments": {"a": ' + value + "}}"

    r = served.post("/step", content=body(BODY_DEPTH - 2), headers=JSON)
    assert r.status_code == 200, r.text
    assert r.json()["error"]["kind"] == "invalid_arguments"  # read, then refused by the gateway
    r = served.post("/step", content=body(BODY_DEPTH - 1), headers=JSON)
    assert error_of(r, 400, "too_deep")["message"] == TOO_DEEP


def test_brackets_inside_strings_are_not_nesting(served: httpx.Client) -> None:
    text = "[" * 5000 + "{" * 5000 + '\\"]'
    r = served.post("/step", json=step_call("add_note", {"ticket_id": "T-1", "text": text}))
    assert r.status_code == 200, r.text
    assert r.json()["structuredContent"]["text"] == text


# -- what a parser chokes on -------------------------------------------------------------------


def test_a_number_with_ten_thousand_digits_is_400(served: httpx.Client) -> None:
    body = b'{"action": "call_tool", "tool_name": "add_note", "arguments": {"minutes": '
    body += b"9" * 10_000 + b', "ticket_id": "T-1", "text": "x"}}'
    before = snapshot(served)
    message = error_of(served.post("/step", content=body, headers=JSON), 400, "malformed_json")[
        "message"
    ]
    assert "digits" in message
    assert snapshot(served) == before


@pytest.mark.parametrize(
    "raw",
    [b"\xff\xfe", b"\xed\xa0\x80", b"\xc0\xaf", b"\x80"],
    ids=["bom-bytes", "encoded-surrogate", "overlong-slash", "lone-continuation"],
)
def test_bytes_that_are_not_utf8_are_400(served: httpx.Client, raw: bytes) -> None:
    body = b'{"action": "call_tool", "tool_name": "add_note", "arguments": '
    body += b'{"ticket_id": "T-1", "text": "' + raw + b'"}}'
    before = snapshot(served)
    message = error_of(served.post("/step", content=body, headers=JSON), 400, "malformed_json")[
        "message"
    ]
    assert "UTF-8" in message
    assert snapshot(served) == before


def test_a_huge_body_is_413_before_it_is_parsed(served: httpx.Client) -> None:
    before = snapshot(served)
    deep_and_huge = b"[" * 600_000 + b"]" * 600_000
    error_of(served.post("/step", content=deep_and_huge, headers=JSON), 413, "too_large")
    assert snapshot(served) == before


def test_a_wide_shallow_body_is_read(served: httpx.Client) -> None:
    wide = step_call("add_note", {"ticket_id": "T-1", "text": "x", "extra": [[0]] * 50_000})
    r = served.post("/step", json=wide)
    assert r.status_code == 200, r.text
    assert r.json()["error"]["kind"] == "invalid_arguments"  # the tool takes no `extra`


# -- strings JSON can spell but UTF-8 cannot, and NUL ---------------------------------------


def test_nul_in_arguments_round_trips(served: httpx.Client) -> None:
    text = "before\x00after\x00"
    r = served.post("/step", json=step_call("add_note", {"ticket_id": "T-1", "text": text}))
    assert r.status_code == 200, r.text
    assert r.json()["structuredContent"]["text"] == text
    last = json.loads(served.get("/trajectory?format=records").text.splitlines()[-1])
    assert last["args"]["text"] == text


def test_a_lone_surrogate_in_arguments_is_never_a_server_error(served: httpx.Client) -> None:
    """Valid JSON (`\\ud800` is an escape), not valid Unicode: the call is answered, and the
    server answers every read after it (what the gateway keeps of it is its own rule)."""
    body = b'{"action": "call_tool", "tool_name": "add_note", '
    body += b'"arguments": {"ticket_id": "T-1", "text": "\\ud800 and \\udfff"}}'
    r = served.post("/step", content=body, headers=JSON)
    assert r.status_code == 200, r.text
    assert served.get("/state").status_code == 200
    assert served.get("/trajectory").status_code == 200
    assert served.post("/step", json={"action": "list_tools"}).status_code == 200


def test_nul_in_an_instance_id_is_refused(served: httpx.Client) -> None:
    r = served.post("/instances/%00/step", json={"action": "list_tools"})
    assert r.status_code in (400, 404), r.text
    assert r.json()["ok"] is False


# -- what a browser page could send -------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "body"), BODY_ROUTES, ids=ROUTE_IDS)
def test_a_form_content_type_is_415_on_every_route(
    served: httpx.Client, method: str, path: str, body: dict[str, Any]
) -> None:
    before = snapshot(served)
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    r = served.request(method, path, content=json.dumps(body), headers=headers)
    error_of(r, 415, "unsupported_media_type")
    assert snapshot(served) == before


@pytest.mark.parametrize("path", ["/clock/clear", "/triggers/clear"])
def test_a_text_plain_post_without_a_body_is_415(served: httpx.Client, path: str) -> None:
    r = served.post(path, headers={"Content-Type": "text/plain"})
    error_of(r, 415, "unsupported_media_type")


def test_a_foreign_origin_is_403_and_a_foreign_host_421(served: httpx.Client) -> None:
    before = snapshot(served)
    body = step_call("add_note", {"ticket_id": "T-1", "text": "planted"})
    r = served.post("/step", json=body, headers={"Origin": "https://evil.example"})
    error_of(r, 403, "foreign_origin")
    r = served.post("/step", json=body, headers={"Host": "rebound.evil.example"})
    error_of(r, 421, "misdirected_host")
    r = served.request("DELETE", "/instances/default", headers={"Origin": "null"})
    error_of(r, 403, "foreign_origin")
    assert snapshot(served) == before


# -- reserved roles ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/step", step_call("add_note", {"ticket_id": "T-1", "text": "as system"})),
        ("POST", "/tools/disable", {"role": "agent", "tools": "*"}),
        ("POST", "/agentenv", {"jsonrpc": "2.0", "id": 1, "method": "data/reset"}),
        ("GET", "/trajectory", None),
    ],
    ids=["step", "tools-disable", "data-reset", "trajectory"],
)
def test_the_system_role_header_is_refused(
    served: httpx.Client, method: str, path: str, body: Any
) -> None:
    """`system` is the gateway's own role (triggers, seeding): no caller may claim it."""
    before = snapshot(served)
    r = served.request(method, path, json=body, headers={"AgentEnv-Role": "system"})
    assert "system" in error_of(r, 401, "unauthenticated")["message"]
    assert snapshot(served) == before
