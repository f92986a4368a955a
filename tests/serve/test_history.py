"""`GET /trajectory` and `GET /changes` over a real uvicorn server, as upstream's client
and harnesses read them."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from agentenv import Gateway
from agentenv.gateway.changes import CHANGES_PAGE_MAX
from agentenv.gateway.events import EVENT_ADAPTER


@pytest.fixture
def http(
    gateway: Gateway, live_server: Callable[..., Any], http_client: Callable[..., httpx.Client]
) -> Iterator[httpx.Client]:
    """A client of a real server over the desk environment."""
    with live_server(gateway) as url, http_client(url) as client:
        yield client


def _call(http: httpx.Client, tool: str, prefix: str = "", **args: Any) -> dict[str, Any]:
    body = {"action": "call_tool", "tool_name": tool, "arguments": args}
    return http.post(f"{prefix}/step", json=body).json()


def _lines(r: httpx.Response) -> list[dict[str, Any]]:
    return [json.loads(line) for line in r.text.splitlines()]


def test_the_trajectory_is_upstreams_jsonl_events(http: httpx.Client) -> None:
    empty = http.get("/trajectory")
    assert empty.status_code == 200 and empty.content == b""
    assert empty.headers["content-type"].startswith("application/jsonl")
    assert empty.headers["X-Trajectory-Total-Bytes"] == "0"

    _call(http, "add_note", ticket_id="T-1", text="hi")
    _call(http, "close_ticket", ticket_id="T-1")  # denied for the agent
    r = http.get("/trajectory")
    assert r.status_code == 200
    assert int(r.headers["X-Trajectory-Total-Bytes"]) == len(r.content)
    events = _lines(r)
    for event in events:
        EVENT_ADAPTER.validate_python(event)
    assert [e["event_type"] for e in events] == [
        "tool_call",
        "tool_call_result",
        "tool_call",
        "tool_call_failed",
    ]
    assert [e["event_id"] for e in events] == ["event_1", "event_2", "event_3", "event_4"]
    assert events[0]["tool_call"] == {
        "function_name": "add_note",
        "arguments": {"ticket_id": "T-1", "text": "hi"},
    }
    assert events[0]["role"] == "agent"
    assert events[1]["changelog_id"] == events[1]["changelog_id_before"] + 1
    assert events[3]["tool_call_event_id"] == "event_3"


def test_since_and_our_records(http: httpx.Client) -> None:
    for _ in range(2):
        _call(http, "get_ticket", id="T-1")
    r = http.get("/trajectory?since=3")
    assert [e["event_id"] for e in _lines(r)] == ["event_4"]
    assert r.headers["X-Trajectory-Next-Since"] == "4"
    assert int(r.headers["X-Trajectory-Total-Bytes"]) == len(r.content)
    assert http.get("/trajectory?since=4").content == b""

    records = _lines(http.get("/trajectory?format=records"))
    assert [(x["seq"], x["kind"], x["tool"]) for x in records] == [
        (0, "call", "get_ticket"),
        (1, "call", "get_ticket"),
    ]
    later = http.get("/trajectory?format=records&since=1")
    assert [x["seq"] for x in _lines(later)] == [1]
    assert later.headers["X-Trajectory-Next-Since"] == "2"


@pytest.mark.parametrize(
    ("query", "named"),
    [("since=soon", "since"), ("since=1.5", "since"), ("format=yaml", "format"),
     ("format=records&since=x", "since")],
)  # fmt: skip
def test_a_bad_trajectory_query_is_a_400_naming_it(
    http: httpx.Client, query: str, named: str
) -> None:
    r = http.get(f"/trajectory?{query}")
    assert r.status_code == 400
    assert r.json()["error"]["message"].startswith(f"{named}: ")


def test_changes_name_each_rows_call_and_role(http: httpx.Client) -> None:
    assert http.get("/changes").json() == {"changes": [], "has_more": False, "dropped": 0}
    _call(http, "update_ticket", id="T-1", status="closed")
    _call(http, "add_note", ticket_id="T-2", text="called back")
    body = http.get("/changes").json()
    assert body["has_more"] is False
    rows = body["changes"]
    assert [(c["table_name"], c["row_id"], c["operation"]) for c in rows] == [
        ("tickets", "T-1", "UPDATE"),
        ("notes", "N-1", "INSERT"),
    ]
    assert rows[0]["changed_fields"] == {"status": {"old": "open", "new": "closed"}}
    assert rows[0]["schema_name"] == "test-desk"
    assert [[(a["kind"], a["tool"], a["role"]) for a in c["actors"]] for c in rows] == [
        [("tool_call", "update_ticket", "agent")],
        [("tool_call", "add_note", "agent")],
    ]
    # the ids are the changelog ids the calls answered
    assert rows[-1]["id"] == http.get("/state").json()["changelog_id"]
    after = http.get("/changes", params={"after_id": rows[0]["id"], "limit": 1}).json()
    assert [c["row_id"] for c in after["changes"]] == ["N-1"] and after["has_more"] is False
    first = http.get("/changes", params={"limit": 1}).json()
    assert [c["row_id"] for c in first["changes"]] == ["T-1"] and first["has_more"] is True


def test_changes_are_per_instance(http: httpx.Client) -> None:
    assert http.post("/instances", json={"id": "ep-1"}).status_code == 201
    _call(http, "add_note", "/instances/ep-1", ticket_id="T-1", text="mine")
    assert http.get("/changes").json()["changes"] == []
    rows = http.get("/instances/ep-1/changes").json()["changes"]
    assert [c["row_id"] for c in rows] == ["N-1"]
    assert http.get("/instances/nope/changes").status_code == 404
    assert http.get("/instances/nope/trajectory").status_code == 404


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("after_id=x", "after_id and limit must be integers"),
        ("limit=ten", "after_id and limit must be integers"),
        ("after_id=-1", f"after_id must be >= 0 and limit between 1 and {CHANGES_PAGE_MAX}"),
        ("limit=0", f"after_id must be >= 0 and limit between 1 and {CHANGES_PAGE_MAX}"),
        (
            f"limit={CHANGES_PAGE_MAX + 1}",
            f"after_id must be >= 0 and limit between 1 and {CHANGES_PAGE_MAX}",
        ),
    ],
)
def test_a_bad_changes_query_gets_upstreams_400(
    http: httpx.Client, query: str, message: str
) -> None:
    r = http.get(f"/changes?{query}")
    assert r.status_code == 400
    assert r.json() == {"ok": False, "error": message}
