"""Drive a served environment with upstream's protocol client; print every answer as JSON.

Runs in the upstream virtualenv (never imported by our code or tests). Usage:
    python client_probe.py BASE_URL [GATEWAY_SRC_DIR]
GATEWAY_SRC_DIR is the folder holding upstream's `gateway` package (from the framework sdist);
with it, the expected card extensions are read from upstream's own constants and reported
under `expected`. The output is one JSON object: probe name -> outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from agentenv_protocol import client
from agentenv_protocol.client import ExtensionCallError
from agentenv_protocol.types import DataPart, EnvironmentCard

ROLE_HEADER = "AgentEnv-Role"
STEP = "urn:agentenv:step/v1"
STATE = "urn:agentenv:state/v1"
DISABLE = "urn:agentenv:disable-tool/v1"
ENABLE = "urn:agentenv:enable-tool/v1"
TRIGGERS = "urn:agentenv:triggers/v1"
CLOCK = "urn:agentenv:clock/v1"
TRAJECTORY = "urn:agentenv:trajectory/v1"
CHANGES = "urn:agentenv:changes/v1"

results: dict[str, Any] = {}


def outcome_of_error(error: BaseException) -> dict:
    """What a failed call looked like to the client: the exception and, for HTTP errors, the parsed fields."""
    out: dict[str, Any] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}
    if isinstance(error, ExtensionCallError):
        out.update(
            status=error.response.status_code,
            code=error.code,
            detail=error.detail,
            retryable=error.retryable,
            applied=error.applied,
            hint=error.hint,
            body=error.response.text[:2000],
        )
    elif isinstance(error, httpx.HTTPStatusError):
        out.update(status=error.response.status_code, body=error.response.text[:2000])
    return out


async def probe(name: str, call: Any) -> Any:
    """Run one client call and record its answer (or its failure) under `name`."""
    try:
        value = await call() if asyncio.iscoroutinefunction(call) else call()
        if asyncio.iscoroutine(value):
            value = await value
    except Exception as error:  # every failure is a finding, never a crash of the driver
        results[name] = outcome_of_error(error)
        return None
    results[name] = {"ok": True, "value": jsonable(value)}
    return value


def jsonable(value: Any) -> Any:
    """A JSON-ready copy of a client answer (pydantic models dumped)."""
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, list):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    return value


async def raw(
    method: str, url: str, *, role: str | None = None, headers: dict | None = None, **kwargs: Any
) -> dict:
    """A plain HTTP call (for what the client has no helper for: a role header, JSONL, bad bodies)."""
    headers = {**(headers or {}), **({ROLE_HEADER: role} if role else {})}
    async with httpx.AsyncClient() as http:
        response = await http.request(method, url, headers=headers, timeout=30, **kwargs)
    out: dict[str, Any] = {
        "status": response.status_code,
        "content_type": response.headers.get("content-type", ""),
        "headers": {k.lower(): v for k, v in response.headers.items()},
        "text": response.text[:200000],
    }
    try:
        out["json"] = response.json()
    except ValueError:
        out["json"] = None
    if response.status_code >= 400:
        error = ExtensionCallError(response)
        out["error_fields"] = {
            "code": error.code,
            "detail": error.detail,
            "retryable": error.retryable,
            "applied": error.applied,
            "hint": error.hint,
        }
    return out


def expected_extensions(gateway_src: str | None) -> None:
    """Upstream's own card extensions and what its client reads out of them, as the expected values."""
    if not gateway_src:
        return
    sys.path.insert(0, gateway_src)
    from gateway import constants  # upstream's gateway package, stdlib-only module

    upstream_card = {"capabilities": {"extensions": constants.GATEWAY_EXTENSIONS}}
    methods = {}
    for ext in constants.GATEWAY_EXTENSIONS:
        for name in ext["params"]["methods"]:
            methods[f"{ext['uri']} {name}"] = client.find_extension_method(
                upstream_card, ext["uri"], name
            )
    results["expected"] = {
        "ok": True,
        "value": {
            "extensions": constants.GATEWAY_EXTENSIONS,
            "methods": methods,
            "trigger_features": list(constants.TRIGGER_FEATURES),
            "trigger_statuses": list(constants.TRIGGER_STATUSES),
        },
    }


async def main(base: str, gateway_src: str | None) -> None:
    """Run every probe of this driver, in order."""
    expected_extensions(gateway_src)
    card = await probe("card", lambda: client.get_card(base))
    if card is None:
        return
    await probe("card_model", lambda: EnvironmentCard.model_validate(card))
    await probe("mcp_path", lambda: client.mcp_path(card))
    await probe("find_child_leaf", lambda: client.find_child(card, "no-such-child"))
    for ext in (card.get("capabilities") or {}).get("extensions") or []:
        results.setdefault("advertised_uris", {"ok": True, "value": []})["value"].append(
            ext.get("uri")
        )
    expected = (results.get("expected") or {}).get("value") or {}
    for key in expected.get("methods", {}):
        uri, name = key.split(" ")
        await probe(
            f"method {key}",
            lambda uri=uri, name=name: client.find_extension_method(card, uri, name),
        )
    await probe("triggers_params", lambda: client.extension_params(card, TRIGGERS))

    def invoke(uri: str, params: dict | None = None, method: str | None = None):
        return lambda: client.invoke_extension(base, card, uri, params, method=method)

    # step/v1
    await probe("step list_tools", invoke(STEP, {"action": "list_tools"}, "step"))
    await probe("step first_method", invoke(STEP, {"action": "list_tools"}))
    await probe(
        "step call_tool",
        invoke(
            STEP,
            {"action": "call_tool", "tool_name": "get_customer", "arguments": {"id": "C-001"}},
            "step",
        ),
    )
    await probe(
        "step unknown_tool",
        invoke(STEP, {"action": "call_tool", "tool_name": "no_such_tool"}, "step"),
    )
    await probe("step missing_tool_name", invoke(STEP, {"action": "call_tool"}, "step"))
    await probe("step bad_action", invoke(STEP, {"action": "dance"}, "step"))
    # state/v1
    await probe("state get", invoke(STATE, None, "get"))
    # disable/enable-tool and roles
    await probe(
        "disable any_role", invoke(DISABLE, {"role": "auditor", "tools": ["get_order"]}, "disable")
    )
    await probe(
        "roles any_role list",
        lambda: raw("POST", f"{base}/step", role="auditor", json={"action": "list_tools"}),
    )
    await probe(
        "roles any_role call_disabled",
        lambda: raw(
            "POST",
            f"{base}/step",
            role="auditor",
            json={"action": "call_tool", "tool_name": "get_order", "arguments": {"id": "O-5531"}},
        ),
    )
    await probe(
        "enable any_role", invoke(ENABLE, {"role": "auditor", "tools": ["get_order"]}, "enable")
    )
    await probe("disable missing_role", invoke(DISABLE, {"tools": ["get_order"]}, "disable"))
    await probe("disable bad_tools", invoke(DISABLE, {"role": "auditor", "tools": 7}, "disable"))
    await probe(
        "disable default", invoke(DISABLE, {"role": "default", "tools": ["get_order"]}, "disable")
    )
    await probe(
        "roles default no_role list",
        lambda: raw("POST", f"{base}/step", json={"action": "list_tools"}),
    )
    await probe(
        "roles default header list",
        lambda: raw("POST", f"{base}/step", role="default", json={"action": "list_tools"}),
    )
    await probe(
        "enable default", invoke(ENABLE, {"role": "default", "tools": ["get_order"]}, "enable")
    )
    await probe(
        "roles no_role call",
        lambda: raw(
            "POST",
            f"{base}/step",
            json={"action": "call_tool", "tool_name": "list_tickets", "arguments": {}},
        ),
    )
    await probe(
        "disable wildcard_role",
        invoke(DISABLE, {"role": "*", "tools": ["list_refunds"]}, "disable"),
    )
    await probe(
        "roles wildcard_role list",
        lambda: raw("POST", f"{base}/step", role="supervisor", json={"action": "list_tools"}),
    )
    await probe(
        "enable wildcard_role", invoke(ENABLE, {"role": "*", "tools": ["list_refunds"]}, "enable")
    )
    await probe("state after_rules", invoke(STATE, None, "get"))
    # clock/v1 and get_time
    await probe("clock get_time", invoke(CLOCK, None, "get_time"))
    await probe("clock state", invoke(CLOCK, None, "state"))
    await probe(
        "clock set_time",
        invoke(
            CLOCK,
            {"virtual_time": "2026-03-02T09:00:00Z", "virtual_seconds_per_real_second": 1},
            "set_time",
        ),
    )
    await probe("clock set_time bad", invoke(CLOCK, {"virtual_time": "next tuesday"}, "set_time"))
    await probe(
        "clock set_time bad_rate",
        invoke(
            CLOCK,
            {"virtual_time": "2026-03-02T09:00:00Z", "virtual_seconds_per_real_second": 86401},
            "set_time",
        ),
    )
    await probe("clock state armed", invoke(CLOCK, None, "state"))
    await probe(
        "get_time tool",
        invoke(STEP, {"action": "call_tool", "tool_name": "get_time", "arguments": {}}),
    )
    await probe(
        "get_time tool time_zone",
        invoke(
            STEP,
            {
                "action": "call_tool",
                "tool_name": "get_time",
                "arguments": {"time_zone": "Asia/Tokyo"},
            },
        ),
    )
    await probe(
        "get_time tool bad_zone",
        invoke(
            STEP,
            {
                "action": "call_tool",
                "tool_name": "get_time",
                "arguments": {"time_zone": "Mars/Olympus"},
            },
        ),
    )
    await probe("clock clear", invoke(CLOCK, {}, "clear"))
    await probe("clock get_time unarmed", invoke(CLOCK, None, "get_time"))
    await probe("clock state unarmed", invoke(CLOCK, None, "state"))
    await probe(
        "clock set_time rearm", invoke(CLOCK, {"virtual_time": "2026-03-02T09:00:00Z"}, "set_time")
    )
    # triggers/v1
    await probe(
        "triggers register no_actions",
        invoke(
            TRIGGERS,
            {
                "triggers": [
                    {
                        "id": "conf-t0",
                        "when": {"type": "action", "tool": "search_customers"},
                        "actions": [],
                    }
                ]
            },
            "register",
        ),
    )
    spec = {
        "id": "conf-t1",
        "when": {"type": "action", "tool": "list_tickets"},
        "actions": [{"type": "tool", "tool": "list_refunds", "args": {}}],
    }
    await probe("triggers register", invoke(TRIGGERS, {"triggers": [spec]}, "register"))
    await probe("triggers register same", invoke(TRIGGERS, {"triggers": [spec]}, "register"))
    conflicting = {**spec, "when": {"type": "action", "tool": "get_order"}}
    await probe(
        "triggers register conflict", invoke(TRIGGERS, {"triggers": [conflicting]}, "register")
    )
    await probe("triggers register bad", invoke(TRIGGERS, {"triggers": "all of them"}, "register"))
    await probe(
        "triggers register unknown_tool",
        invoke(
            TRIGGERS,
            {
                "triggers": [
                    {
                        "id": "conf-t9",
                        "when": {"type": "action", "tool": "no_such_tool"},
                        "actions": [],
                    }
                ]
            },
            "register",
        ),
    )
    await probe(
        "triggers fire call",
        lambda: raw(
            "POST",
            f"{base}/step",
            json={"action": "call_tool", "tool_name": "list_tickets", "arguments": {}},
        ),
    )

    async def state_after_fire() -> Any:
        """The trigger state once conf-t1 has left armed/firing/queued (fires may run after the call answers)."""
        for _ in range(50):
            state = await client.invoke_extension(base, card, TRIGGERS, None, method="state")
            mine = [t for t in state.get("triggers", []) if t.get("id") == "conf-t1"]
            if mine and mine[0].get("status") not in ("armed", "firing", "queued"):
                break
            await asyncio.sleep(0.2)
        return state

    await probe("triggers state", state_after_fire)
    await probe("triggers remove", invoke(TRIGGERS, {"ids": ["conf-t1"]}, "remove"))
    await probe("triggers remove again", invoke(TRIGGERS, {"ids": ["conf-t1"]}, "remove"))
    await probe("triggers remove bad", invoke(TRIGGERS, {"ids": "conf-t1"}, "remove"))
    # a write, for the changelog and the trajectory
    await probe(
        "write call",
        invoke(
            STEP,
            {
                "action": "call_tool",
                "tool_name": "reply_to_customer",
                "arguments": {"ticket_id": "T-1042", "message": "Looking into it."},
            },
        ),
    )
    await probe(
        "failed call",
        invoke(
            STEP,
            {
                "action": "call_tool",
                "tool_name": "read_ticket",
                "arguments": {"ticket_id": "T-0000"},
            },
        ),
    )
    # changes/v1
    await probe("changes get", invoke(CHANGES, {"after_id": 0, "limit": 100}, "get"))
    await probe("changes get page", invoke(CHANGES, {"after_id": 0, "limit": 1}, "get"))
    await probe("changes bad_limit", invoke(CHANGES, {"after_id": 0, "limit": 0}, "get"))
    await probe("changes bad_after", invoke(CHANGES, {"after_id": "x"}, "get"))
    # trajectory/v1: JSONL, so read raw at the advertised endpoint
    try:
        op = client.find_extension_method(card, TRAJECTORY, "get") or {}
    except Exception:  # an unreadable card is already reported by the method probes
        op = {}
    op = {"endpoint": op.get("endpoint") or "/trajectory", "method": op.get("method") or "GET"}
    await probe("trajectory get", lambda: raw(op["method"], f"{base}{op['endpoint']}"))
    # data plane
    got = await probe("data get", lambda: client.get_data(base))
    await probe("data reset", lambda: client.reset_data(base))
    await probe("data get after_reset", lambda: client.get_data(base))
    if got is not None:
        data_parts = [p for p in got.parts if getattr(p, "kind", None) == "data"]
        await probe("data add", lambda: client.add_data(base, data_parts or [DataPart(data={})]))
    else:
        await probe("data add", lambda: client.add_data(base, [DataPart(data={"customers": []})]))
    await probe("data get after_add", lambda: client.get_data(base))
    await probe(
        "data add bad",
        lambda: client.add_data(base, [DataPart(data={"no_such_collection": [{"id": 1}]})]),
    )
    await probe(
        "data add bad raw",
        lambda: raw(
            "POST",
            f"{base}/agentenv",
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "data/add",
                "params": {
                    "parts": [{"kind": "data", "data": {"no_such_collection": [{"id": 1}]}}]
                },
            },
        ),
    )
    await probe(
        "data unknown_method",
        lambda: raw(
            "POST",
            f"{base}/agentenv",
            json={"jsonrpc": "2.0", "id": 1, "method": "data/teleport", "params": {}},
        ),
    )
    # bad input in every route upstream's clients post to: a 4xx with a readable body, never a 5xx
    for verb, path in (
        ("POST", "/step"),
        ("POST", "/tools/disable"),
        ("POST", "/tools/enable"),
        ("POST", "/triggers/register"),
        ("POST", "/triggers/remove"),
        ("PUT", "/clock/set-time"),
    ):
        await probe(
            f"bad_json {path}",
            lambda verb=verb, path=path: raw(
                verb,
                f"{base}{path}",
                content=b"{not json",
                headers={"content-type": "application/json"},
            ),
        )
        await probe(
            f"bad_shape {path}",
            lambda verb=verb, path=path: raw(verb, f"{base}{path}", json=[1, 2]),
        )
    await probe(
        "rpc parse_error",
        lambda: raw(
            "POST",
            f"{base}/agentenv",
            content=b"{not json",
            headers={"content-type": "application/json"},
        ),
    )
    await probe(
        "rpc invalid_request", lambda: raw("POST", f"{base}/agentenv", json={"id": 7, "params": {}})
    )
    await probe(
        "rpc add no_parts",
        lambda: raw(
            "POST",
            f"{base}/agentenv",
            json={"jsonrpc": "2.0", "id": 8, "method": "data/add", "params": {"parts": []}},
        ),
    )
    await probe(
        "rpc add bad_part",
        lambda: raw(
            "POST",
            f"{base}/agentenv",
            json={
                "jsonrpc": "2.0",
                "id": 9,
                "method": "data/add",
                "params": {"parts": [{"kind": "video"}]},
            },
        ),
    )
    # clear last: it empties the env's own triggers too
    await probe("triggers clear", invoke(TRIGGERS, {}, "clear"))
    await probe("triggers state cleared", invoke(TRIGGERS, None, "state"))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2] if len(sys.argv) > 2 else None))
    print(json.dumps(results, default=str))
