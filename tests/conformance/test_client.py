"""Upstream's protocol client (agentenv_protocol.client) against `agent-env serve`.

One driver run (drivers/client_probe.py, in the upstream virtualenv) makes every call in a
fixed order against a fresh support-desk server; each test below checks one protocol point
of what the client got back. Expected values are upstream's: its gateway's card extensions
come from upstream's own constants (read by the driver from the framework sdist), the
response shapes from upstream's gateway, clock, trigger and changelog modules.

Test ids start with the area of the point: card_rest, roles, triggers_clock,
trajectory_changes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envs"

RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
UPSTREAM_METHODS = [
    ("urn:agentenv:disable-tool/v1", "disable"),
    ("urn:agentenv:enable-tool/v1", "enable"),
    ("urn:agentenv:triggers/v1", "register"),
    ("urn:agentenv:triggers/v1", "remove"),
    ("urn:agentenv:triggers/v1", "clear"),
    ("urn:agentenv:triggers/v1", "state"),
    ("urn:agentenv:clock/v1", "get_time"),
    ("urn:agentenv:clock/v1", "set_time"),
    ("urn:agentenv:clock/v1", "clear"),
    ("urn:agentenv:clock/v1", "state"),
    ("urn:agentenv:trajectory/v1", "get"),
    ("urn:agentenv:step/v1", "step"),
    ("urn:agentenv:state/v1", "get"),
    ("urn:agentenv:changes/v1", "get"),
]
"""Every method upstream's gateway card advertises (checked against upstream's constants below)."""

TRIGGER_ENTRY_KEYS = {
    "id", "type", "when", "status", "detected_at", "fired_at", "fire_count", "failure_count",
    "last_failure_at", "barrier", "pending", "waiting", "next_mark",
}  # fmt: skip
CHANGE_ROW_KEYS = {"id", "timestamp", "schema_name", "table_name", "operation", "row_id", "summary",
                   "changed_fields", "actors"}  # fmt: skip

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def check(area: str, name: str) -> Callable[[Callable[[Probes], None]], Callable[[Probes], None]]:
    """Register one protocol point, tested on its own."""

    def register(fn: Callable[[Probes], None]) -> Callable[[Probes], None]:
        CHECKS.append((area, name, fn))
        return fn

    return register


def expected(p: Probes) -> dict[str, Any]:
    """The expected values the driver read from upstream's gateway constants."""
    return p.value("expected")


def upstream_keys(answer: dict[str, Any], want: dict[str, Any]) -> bool:
    """Whether `answer` holds upstream's keys with upstream's values (added keys are ours, allowed)."""
    got = {key: answer.get(key) for key in want}
    assert got == want, f"upstream's keys of {answer!r}"
    return True


def tool_payload(result: dict[str, Any]) -> Any:
    """What a tool answered: its structured content, else its first text block as JSON."""
    if isinstance(result.get("structuredContent"), dict):
        return result["structuredContent"]
    texts = [b["text"] for b in result.get("content") or [] if b.get("type") == "text"]
    assert texts, f"no text content in {result!r}"
    return json.loads(texts[0])


def step_tool_names(exchange: dict[str, Any]) -> list[str]:
    """The tool names a /step list_tools exchange answered (which must be 200)."""
    assert exchange["status"] == 200, exchange["text"][:500]
    return [t["name"] for t in exchange["json"]["tools"]]


# -- card and extension methods -------------------------------------------------------------


@check("card_rest", "card fields")
def _(p: Probes) -> None:
    card = p.value("card")
    assert (card["protocolVersion"], card["url"], card["preferredTransport"]) == (
        "1.0",
        "/agentenv",
        "JSONRPC",
    )
    assert card["name"] == "support-desk"


@check("card_rest", "card validates as EnvironmentCard")
def _(p: Probes) -> None:
    p.value("card_model")


@check("card_rest", "mcp_path")
def _(p: Probes) -> None:
    assert p.value("mcp_path") == "/mcp"


@check("card_rest", "find_child on a leaf card")
def _(p: Probes) -> None:
    assert p.value("find_child_leaf") is None


@check("card_rest", "upstream method list is current")
def _(p: Probes) -> None:
    assert sorted(expected(p)["methods"]) == sorted(f"{u} {m}" for u, m in UPSTREAM_METHODS)


@check("card_rest", "all eight gateway extensions advertised")
def _(p: Probes) -> None:
    wanted = {ext["uri"] for ext in expected(p)["extensions"]}
    missing = wanted - set(p.value("advertised_uris"))
    assert not missing, f"not on our card: {sorted(missing)}"


def method_check(uri: str, method: str) -> Callable[[Probes], None]:
    """The check of one extension method against upstream's advertisement of it."""

    def run(p: Probes) -> None:
        want = expected(p)["methods"][f"{uri} {method}"]
        got = p.value(f"method {uri} {method}")
        assert got is not None, f"find_extension_method found no {method!r} under {uri}"
        assert (got["method"], got["endpoint"]) == (want["method"], want["endpoint"])
        if "request" in want:
            request = got.get("request")
            assert isinstance(request, dict) and request.get("type") == "object", (
                f"request schema: {request!r}"
            )
            ours = set(request.get("properties") or {})
            assert set(want["request"].get("properties") or {}) <= ours, (
                f"properties: {sorted(ours)}"
            )
            extra_required = set(request.get("required") or []) - set(
                want["request"].get("required") or []
            )
            assert not extra_required, f"we require more than upstream: {sorted(extra_required)}"

    return run


for _uri, _method in UPSTREAM_METHODS:
    check("card_rest", f"find_extension_method {_uri.split(':')[2]} {_method}")(
        method_check(_uri, _method)
    )


@check("card_rest", "triggers features declared")
def _(p: Probes) -> None:
    features = p.value("triggers_params").get("features")
    assert isinstance(features, list), (
        f"params.features missing: {p.value('triggers_params').keys()}"
    )
    assert set(features) <= set(expected(p)["trigger_features"]), features
    assert "website" not in features, (
        "website triggers are declared but website environments do not exist"
    )


# -- step/v1 and state/v1 -------------------------------------------------------------------


@check("card_rest", "step list_tools shape")
def _(p: Probes) -> None:
    tools = p.value("step list_tools")["tools"]
    assert tools and all(
        isinstance(t["name"], str)
        and isinstance(t["description"], str)
        and isinstance(t["parameters"], dict)
        for t in tools
    ), tools[:2]
    assert "get_customer" in {t["name"] for t in tools}


@check("card_rest", "invoke_extension without method uses the first")
def _(p: Probes) -> None:
    assert p.value("step first_method")["tools"]


@check("card_rest", "step call_tool shape")
def _(p: Probes) -> None:
    result = p.value("step call_tool")
    assert result["isError"] is False and "changelog_id" in result
    assert tool_payload(result)["id"] == "C-001"


@check("card_rest", "step unknown tool is 404 with error.code")
def _(p: Probes) -> None:
    assert isinstance(p.error("step unknown_tool", 404)["code"], str)


@check("card_rest", "step call_tool without tool_name is 400 with error.code")
def _(p: Probes) -> None:
    assert isinstance(p.error("step missing_tool_name", 400)["code"], str)


@check("card_rest", "step unknown action is 400 with error.code")
def _(p: Probes) -> None:
    assert isinstance(p.error("step bad_action", 400)["code"], str)


@check("card_rest", "state get shape")
def _(p: Probes) -> None:
    state = p.value("state get")
    assert {"mcp_servers", "changelog_id", "roles", "tool_name_clashes"} <= set(state)
    server = state["mcp_servers"][0]
    assert isinstance(server["name"], str)
    assert {"name", "description", "parameters"} <= set(server["tools"][0])
    assert isinstance(state["roles"], dict) and state["tool_name_clashes"] == {}


# -- tool access and roles ------------------------------------------------------------------


@check("card_rest", "disable answers {role, disabled, allowed}")
def _(p: Probes) -> None:
    assert upstream_keys(
        p.value("disable any_role"),
        {
            "role": "auditor",
            "disabled": ["get_order"],
            "allowed": [],
        },
    )


@check("card_rest", "enable answers {role, disabled, allowed}")
def _(p: Probes) -> None:
    assert upstream_keys(
        p.value("enable any_role"),
        {
            "role": "auditor",
            "disabled": [],
            "allowed": ["get_order"],
        },
    )


@check("card_rest", "disable without role is 400 with error.code")
def _(p: Probes) -> None:
    assert isinstance(p.error("disable missing_role", 400)["code"], str)


@check("card_rest", "disable with bad tools is 400 with error.code")
def _(p: Probes) -> None:
    assert isinstance(p.error("disable bad_tools", 400)["code"], str)


@check("roles", "rules take any role string")
def _(p: Probes) -> None:
    names = step_tool_names(p.raw("roles any_role list"))
    assert "list_tickets" in names and "get_order" not in names, names


@check("roles", "a disabled tool is 403 for that role, with error.code")
def _(p: Probes) -> None:
    exchange = p.raw("roles any_role call_disabled")
    assert exchange["status"] == 403, exchange["text"][:500]
    assert isinstance(exchange["error_fields"]["code"], str), exchange["text"][:500]


@check("roles", "role default rules apply to role-less calls")
def _(p: Probes) -> None:
    assert upstream_keys(
        p.value("disable default"),
        {
            "role": "default",
            "disabled": ["get_order"],
            "allowed": [],
        },
    )
    names = step_tool_names(p.raw("roles default no_role list"))
    assert "get_order" not in names and "list_tickets" in names, names


@check("roles", "AgentEnv-Role default is the same as no role")
def _(p: Probes) -> None:
    assert step_tool_names(p.raw("roles default header list")) == step_tool_names(
        p.raw("roles default no_role list")
    )


@check("roles", "a role-less call works")
def _(p: Probes) -> None:
    exchange = p.raw("roles no_role call")
    assert exchange["status"] == 200 and exchange["json"]["isError"] is False, exchange["text"][
        :500
    ]


@check("roles", "a * role rule applies to every role")
def _(p: Probes) -> None:
    assert "list_refunds" not in step_tool_names(p.raw("roles wildcard_role list"))


@check("roles", "state lists the rules of each role")
def _(p: Probes) -> None:
    roles = p.value("state after_rules")["roles"]
    assert (
        "get_order" in roles["auditor"]["allowed"]
        and "get_order" not in roles["auditor"]["disabled"]
    ), roles
    assert "get_order" in roles["default"]["allowed"], roles


# -- clock/v1 and get_time ------------------------------------------------------------------


@check("triggers_clock", "clock get_time answers {virtual_time}")
def _(p: Probes) -> None:
    assert RFC3339_UTC.match(p.value("clock get_time")["virtual_time"])


@check("triggers_clock", "clock state while armed")
def _(p: Probes) -> None:
    state = p.value("clock state")
    assert state["armed"] is True and {
        "t0",
        "virtual_seconds_per_real_second",
        "virtual_time",
    } <= set(state)


@check("triggers_clock", "clock set_time answers the armed state")
def _(p: Probes) -> None:
    state = p.value("clock set_time")
    assert state["armed"] is True and state["t0"] == "2026-03-02T09:00:00Z", state
    assert state["virtual_seconds_per_real_second"] == 1 and RFC3339_UTC.match(
        state["virtual_time"]
    ), state


@check("triggers_clock", "clock set_time with a bad time is 400")
def _(p: Probes) -> None:
    p.error("clock set_time bad", 400)


@check("triggers_clock", "clock set_time above the rate cap is 400")
def _(p: Probes) -> None:
    p.error("clock set_time bad_rate", 400)


@check("triggers_clock", "clock clear answers {ok, armed}")
def _(p: Probes) -> None:
    assert upstream_keys(p.value("clock clear"), {"ok": True, "armed": False})


@check("triggers_clock", "clock get_time unarmed is 404")
def _(p: Probes) -> None:
    p.error("clock get_time unarmed", 404)


@check("triggers_clock", "clock state unarmed")
def _(p: Probes) -> None:
    assert p.value("clock state unarmed")["armed"] is False
    assert p.value("clock set_time rearm")["armed"] is True


@check("card_rest", "get_time tool answers {current_time}")
def _(p: Probes) -> None:
    result = p.value("get_time tool")
    assert result["isError"] is False
    assert RFC3339_UTC.match(tool_payload(result)["current_time"]), result


@check("card_rest", "get_time tool takes time_zone")
def _(p: Probes) -> None:
    payload = tool_payload(p.value("get_time tool time_zone"))
    assert payload["time_zone"] == "Asia/Tokyo" and payload["local_time"].endswith("+09:00"), (
        payload
    )
    assert RFC3339_UTC.match(payload["current_time"]), payload


@check("card_rest", "get_time tool refuses an unknown time zone")
def _(p: Probes) -> None:
    assert p.value("get_time tool bad_zone")["isError"] is True


# -- triggers/v1 ----------------------------------------------------------------------------


@check("triggers_clock", "register answers {ok, added, all}")
def _(p: Probes) -> None:
    answer = p.value("triggers register")
    assert answer["ok"] is True and answer["added"] == ["conf-t1"] and "conf-t1" in answer["all"], (
        answer
    )


@check("triggers_clock", "a trigger with no actions registers")
def _(p: Probes) -> None:
    assert p.value("triggers register no_actions")["added"] == ["conf-t0"]


@check("triggers_clock", "re-registering the same spec is a no-op")
def _(p: Probes) -> None:
    assert p.value("triggers register same")["ok"] is True


@check("triggers_clock", "re-registering an id with another spec is 400")
def _(p: Probes) -> None:
    p.error("triggers register conflict", 400)


@check("triggers_clock", "register with triggers not a list is 400")
def _(p: Probes) -> None:
    p.error("triggers register bad", 400)


@check("triggers_clock", "register naming an unknown tool is 400")
def _(p: Probes) -> None:
    p.error("triggers register unknown_tool", 400)


@check("triggers_clock", "state layout")
def _(p: Probes) -> None:
    state = p.value("triggers state")
    assert set(state["config"]) >= {"watch_roles", "executor_configured", "executors"}, state[
        "config"
    ]
    assert isinstance(state["events"], list) and isinstance(state["events_dropped"], int)
    for trigger in state["triggers"]:
        assert set(trigger) >= TRIGGER_ENTRY_KEYS, sorted(TRIGGER_ENTRY_KEYS - set(trigger))
        assert trigger["status"] in expected(p)["trigger_statuses"], trigger["status"]


@check("triggers_clock", "an action trigger fires on a role-less call")
def _(p: Probes) -> None:
    mine = [t for t in p.value("triggers state")["triggers"] if t["id"] == "conf-t1"]
    assert mine and mine[0]["status"] == "fired" and mine[0]["fire_count"] == 1, mine
    assert mine[0]["detected_at"] and mine[0]["fired_at"], mine


@check("triggers_clock", "remove answers {ok, removed}, and again removes nothing")
def _(p: Probes) -> None:
    assert upstream_keys(p.value("triggers remove"), {"ok": True, "removed": ["conf-t1"]})
    assert upstream_keys(p.value("triggers remove again"), {"ok": True, "removed": []})


@check("triggers_clock", "remove with ids not a list is 400")
def _(p: Probes) -> None:
    p.error("triggers remove bad", 400)


@check("triggers_clock", "clear answers {ok} and empties the state")
def _(p: Probes) -> None:
    assert upstream_keys(p.value("triggers clear"), {"ok": True})
    assert p.value("triggers state cleared")["triggers"] == []


# -- trajectory/v1 and changes/v1 -----------------------------------------------------------


def trajectory_events(p: Probes) -> list[dict[str, Any]]:
    """The events of the /trajectory answer, one JSON object a line."""
    exchange = p.raw("trajectory get")
    assert exchange["status"] == 200, exchange["text"][:500]
    return [json.loads(line) for line in exchange["text"].splitlines() if line.strip()]


@check("trajectory_changes", "trajectory is application/jsonl")
def _(p: Probes) -> None:
    assert p.raw("trajectory get")["content_type"].startswith("application/jsonl")


@check("trajectory_changes", "trajectory has X-Trajectory-Total-Bytes")
def _(p: Probes) -> None:
    headers = p.raw("trajectory get")["headers"]
    assert headers.get("x-trajectory-total-bytes", "").isdigit(), sorted(headers)


@check("trajectory_changes", "trajectory events carry event_id, event_type, timestamp_utc")
def _(p: Probes) -> None:
    events = trajectory_events(p)
    assert events and all({"event_id", "event_type", "timestamp_utc"} <= set(e) for e in events), (
        events[:1]
    )


@check("trajectory_changes", "a tool call is a tool_call event with function_name, arguments, role")
def _(p: Probes) -> None:
    calls = [e for e in trajectory_events(p) if e.get("event_type") == "tool_call"]
    writes = [
        e for e in calls if (e.get("tool_call") or {}).get("function_name") == "reply_to_customer"
    ]
    assert writes, [e.get("event_type") for e in trajectory_events(p)][:10]
    assert writes[0]["tool_call"]["arguments"]["ticket_id"] == "T-1042" and isinstance(
        writes[0]["role"], str
    )


@check("trajectory_changes", "a tool_call_result names its tool_call event")
def _(p: Probes) -> None:
    events = trajectory_events(p)
    call_ids = {e["event_id"] for e in events if e.get("event_type") == "tool_call"}
    results = [e for e in events if e.get("event_type") == "tool_call_result"]
    assert results and all(r.get("tool_call_event_id") in call_ids for r in results), results[:1]


@check("trajectory_changes", "changes answers {changes, has_more}")
def _(p: Probes) -> None:
    answer = p.value("changes get")
    assert isinstance(answer["changes"], list) and isinstance(answer["has_more"], bool), answer
    for row in answer["changes"]:
        assert set(row) >= CHANGE_ROW_KEYS, sorted(CHANGE_ROW_KEYS - set(row))


@check("trajectory_changes", "a write's change rows name the tool call that made them")
def _(p: Probes) -> None:
    rows = [r for r in p.value("changes get")["changes"] if r.get("table_name") == "tickets"]
    assert rows, "no changelog row for the reply_to_customer write"
    actors = [a for r in rows for a in r["actors"]]
    assert any(
        a.get("kind") == "tool_call" and a.get("tool") == "reply_to_customer" for a in actors
    ), actors


@check("trajectory_changes", "changes pages with limit")
def _(p: Probes) -> None:
    page = p.value("changes get page")
    assert len(page["changes"]) <= 1
    assert page["has_more"] is (len(p.value("changes get")["changes"]) > 1)


@check("trajectory_changes", "changes with limit 0 is 400")
def _(p: Probes) -> None:
    p.error("changes bad_limit", 400)


@check("trajectory_changes", "changes with a non-integer after_id is 400")
def _(p: Probes) -> None:
    p.error("changes bad_after", 400)


# -- data plane -----------------------------------------------------------------------------


@check("card_rest", "data/get answers parts")
def _(p: Probes) -> None:
    parts = p.value("data get")["parts"]
    data = [part["data"] for part in parts if part["kind"] == "data"]
    assert data and data[0]["customers"], parts[:1]


@check("card_rest", "data/reset answers {} and empties the state")
def _(p: Probes) -> None:
    assert isinstance(p.value("data reset"), dict)
    data = [
        part["data"] for part in p.value("data get after_reset")["parts"] if part["kind"] == "data"
    ]
    assert all(not rows for d in data for rows in d.values()), data


@check("card_rest", "data/add answers {} and loads the parts")
def _(p: Probes) -> None:
    assert isinstance(p.value("data add"), dict)
    before = next(part["data"] for part in p.value("data get")["parts"] if part["kind"] == "data")
    after = next(
        part["data"] for part in p.value("data get after_add")["parts"] if part["kind"] == "data"
    )
    assert len(after["customers"]) == len(before["customers"])


@check("card_rest", "data/add of bad data is a JSON-RPC error with error.data.code")
def _(p: Probes) -> None:
    assert "data/add failed" in p.outcome("data add bad").get("error", ""), p.outcome(
        "data add bad"
    )
    error = p.raw("data add bad raw")["json"]["error"]
    assert isinstance(error["code"], int) and isinstance(
        (error.get("data") or {}).get("code"), str
    ), error


@check("card_rest", "an unknown data method is -32601")
def _(p: Probes) -> None:
    assert p.raw("data unknown_method")["json"]["error"]["code"] == -32601


# -- bad input: upstream's shapes wrong, never a 5xx ----------------------------------------

BAD_INPUT_ROUTES = ["/step", "/tools/disable", "/tools/enable", "/triggers/register", "/triggers/remove",
                    "/clock/set-time"]  # fmt: skip


def bad_input_check(kind: str, path: str) -> Callable[[Probes], None]:
    """The check that a bad body at `path` is a 4xx with an error body."""

    def run(p: Probes) -> None:
        exchange = p.raw(f"{kind} {path}")
        assert 400 <= exchange["status"] < 500, (
            f"HTTP {exchange['status']}: {exchange['text'][:300]}"
        )
        assert isinstance(exchange["json"], dict) and exchange["json"].get("error"), exchange[
            "text"
        ][:300]

    return run


for _path in BAD_INPUT_ROUTES:
    check("card_rest", f"a body that is not JSON at {_path} is a 4xx with an error")(
        bad_input_check("bad_json", _path)
    )
    check("card_rest", f"a JSON body of the wrong shape at {_path} is a 4xx with an error")(
        bad_input_check("bad_shape", _path)
    )


def rpc_error(p: Probes, name: str) -> dict[str, Any]:
    """The JSON-RPC error object of a data-plane exchange (HTTP 200, as JSON-RPC has it)."""
    exchange = p.raw(name)
    assert exchange["status"] == 200 and isinstance(exchange["json"], dict), exchange["text"][:300]
    return exchange["json"]["error"]


@check("card_rest", "data plane: a body that is not JSON is -32700")
def _(p: Probes) -> None:
    assert rpc_error(p, "rpc parse_error")["code"] == -32700


@check("card_rest", "data plane: a request without jsonrpc and method is -32600")
def _(p: Probes) -> None:
    assert rpc_error(p, "rpc invalid_request")["code"] == -32600


@check("card_rest", "data plane: data/add with no parts is -32602")
def _(p: Probes) -> None:
    assert rpc_error(p, "rpc add no_parts")["code"] == -32602


@check("card_rest", "data plane: data/add with a part of unknown kind is -32602")
def _(p: Probes) -> None:
    assert rpc_error(p, "rpc add bad_part")["code"] == -32602


@pytest.fixture(scope="module")
def probes(serve_env: Callable[..., Any], driver: Callable[..., Probes], upstream: Any) -> Probes:
    """Every client call, made once against a fresh support-desk server."""
    with serve_env(EXAMPLES / "support-desk") as base:
        return driver("client_probe.py", base, str(upstream.gateway_parent))


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_upstream_client(point: tuple[str, str, Callable[[Probes], None]], probes: Probes) -> None:
    """One protocol point, as upstream's client sees it."""
    point[2](probes)
