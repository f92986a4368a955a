"""`GET /trajectory` and `GET /changes` over a real uvicorn server, as upstream's client
and harnesses read them."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
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
     ("format=records&since=x", "since"), ("limit=0", "limit"), ("limit=-2", "limit"),
     ("limit=ten", "limit"), ("format=records&limit=0", "limit")],
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


# -- hostile values, paging, streaming (issue 11, defects 4, 12, 13) ----------------------


def _strict(line: str) -> dict[str, Any]:
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} is not JSON")

    return json.loads(line, parse_constant=refuse)


def _poison(gateway: Gateway) -> None:
    """In-process calls with what JSON cannot carry (before the server runs)."""
    from agentenv import Principal

    agent = Principal("agent", name="ada")
    deep: dict[str, Any] = {}
    for _ in range(300):
        deep = {"d": deep}

    async def calls() -> None:
        await gateway.call(agent, "add_note", {"ticket_id": "T-1", "text": "\ud800"})
        await gateway.call(agent, "add_note", {"ticket_id": "T-1", "text": float("nan")})
        await gateway.call(agent, "add_note", {"ticket_id": "T-1", "text": deep})
        await gateway.call(agent, "add_note", {"ticket_id": "T-1", "text": {1, 2}})

    asyncio.run(calls())
    # What the gateway refuses (deep arguments) never reaches the record; any other
    # recorder's deep value is cut.
    gateway.instance().trajectory.append(
        kind="call",
        wall_time=datetime.now(UTC),
        state_hash="0",
        changelog_id=0,
        tool="t",
        args=deep,
    )


def test_a_poisoned_call_leaves_the_trajectory_readable(
    gateway: Gateway, live_server: Callable[..., Any], http_client: Callable[..., httpx.Client]
) -> None:
    _poison(gateway)
    with live_server(gateway) as url, http_client(url) as http:
        raw = b'{"action": "call_tool", "tool_name": "add_note", '
        raw += b'"arguments": {"ticket_id": "T-1", "text": "x\\udfff"}}'
        http.post("/step", content=raw, headers={"content-type": "application/json"})
        _call(http, "get_ticket", id="T-1")
        for query in ("", "?format=records", "?since=3", "?limit=3"):
            r = http.get(f"/trajectory{query}")  # a 500 for ever after, before
            assert r.status_code == 200, query
            assert int(r.headers["X-Trajectory-Total-Bytes"]) == len(r.content)
            lines = [_strict(line) for line in r.text.splitlines()]
            assert lines, query
        events = _lines(http.get("/trajectory"))
        for event in events:
            EVENT_ADAPTER.validate_python(event)
        whats = {n["what"] for e in events for n in e.get("sanitized", [])}
        assert {"lone_surrogate", "nan", "too_deep", "not_json"} <= whats
        records = _lines(http.get("/trajectory?format=records"))
        assert records[0]["args"]["text"] == "\ufffd"
        assert records[0]["sanitized"] == [{"path": "/args/text", "what": "lone_surrogate"}]
        assert records[1]["args"]["text"] is None
        assert records[1]["sanitized"] == [{"path": "/args/text", "what": "nan"}]
        assert records[-1]["sanitized"] is None and records[-1]["tool"] == "get_ticket"


def test_pages_with_since_and_limit(http: httpx.Client) -> None:
    for i in range(12):
        _call(http, "add_note", ticket_id="T-1", text=f"n{i}")
    whole = http.get("/trajectory")
    assert whole.headers["X-Trajectory-Has-More"] == "false"
    since, pages = 0, []
    while True:
        r = http.get("/trajectory", params={"since": since, "limit": 5})
        assert int(r.headers["X-Trajectory-Total-Bytes"]) == len(r.content)
        pages.append(r.content)
        since = int(r.headers["X-Trajectory-Next-Since"])
        if r.headers["X-Trajectory-Has-More"] == "false":
            break
    assert len(pages) == 5 and since == 24
    assert b"".join(pages) == whole.content
    assert [len(p.splitlines()) for p in pages] == [5, 5, 5, 5, 4]

    first = http.get("/trajectory", params={"format": "records", "limit": 5, "since": 10})
    assert [x["seq"] for x in _lines(first)] == [10, 11]
    assert first.headers["X-Trajectory-Next-Since"] == "12"
    assert first.headers["X-Trajectory-Has-More"] == "false"
    middle = http.get("/trajectory", params={"format": "records", "limit": 3, "since": 4})
    assert [x["seq"] for x in _lines(middle)] == [4, 5, 6]
    assert middle.headers["X-Trajectory-Has-More"] == "true"


def test_a_long_trajectory_is_streamed_whole(
    gateway: Gateway,
    live_server: Callable[..., Any],
    http_client: Callable[..., httpx.Client],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import agentenv.gateway.trajectory as trajectory_module
    import agentenv.serve.history as history
    from agentenv.gateway.events import to_jsonl, trajectory_events

    monkeypatch.setattr(trajectory_module, "HOT_RECORDS", 16)
    monkeypatch.setattr(history, "SPOOL_BYTES", 2048)
    monkeypatch.setattr(history, "STREAM_CHUNK", 1000)
    with live_server(gateway) as url, http_client(url) as http:
        for i in range(60):
            _call(http, "add_note", ticket_id="T-1", text=f"note {i}")
        traj = gateway.instance().trajectory
        assert traj.spilled > 0
        r = http.get("/trajectory")
        assert "chunked" not in r.headers.get("transfer-encoding", "")
        assert int(r.headers["content-length"]) == len(r.content) > 2048
        assert int(r.headers["X-Trajectory-Total-Bytes"]) == len(r.content)
        assert r.content == to_jsonl(trajectory_events(traj))
        records = http.get("/trajectory?format=records")
        assert records.text == traj.to_jsonl()
        assert [x["seq"] for x in _lines(records)] == list(range(60))


def test_the_trajectory_query_is_in_the_openapi_document(http: httpx.Client) -> None:
    operation = http.get("/openapi.json").json()["paths"]["/trajectory"]["get"]
    params = {p["name"]: p for p in operation["parameters"] if p.get("in") == "query"}
    assert set(params) == {"since", "limit", "format"}
    assert params["limit"]["schema"] == {"type": "integer", "minimum": 1}
    assert params["format"]["schema"]["enum"] == ["events", "records"]
    ok = operation["responses"]["200"]
    assert "application/jsonl" in ok["content"]
    assert "X-Trajectory-Total-Bytes" in ok["headers"]
