"""Upstream's MCP tool client (agentenv_protocol.tool_client.ToolSession) against `agent-env serve`.

drivers/tool_client_probe.py opens one upstream `ToolSession` per probe (each with the role it
names) on the served support-desk's MCP endpoint; each test checks one point of what it got.
Upstream's semantics: no role and role `default` are the same caller; any role string is a
role; a refused or failing call is an `isError` result, never an MCP-level error. The tools
listed are also held to the rules of upstream's `verify_mcp_tool_schema` validator step
(task_steps/mcp_env_validator/verify_mcp_tool_schema.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
CUSTOMER_TOOLS = ["check_ticket_status", "get_time", "open_ticket"]
"""What support-desk's access rules leave the customer role."""

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def check(area: str, name: str) -> Callable[[Callable[[Probes], None]], Callable[[Probes], None]]:
    """Register one protocol point, tested on its own."""

    def register(fn: Callable[[Probes], None]) -> Callable[[Probes], None]:
        CHECKS.append((area, name, fn))
        return fn

    return register


def payload(result: dict[str, Any]) -> Any:
    """A tool result's text, parsed as JSON."""
    return json.loads(result["text"])


@check("card_rest", "tools/list through ToolSession")
def _(p: Probes) -> None:
    tools = p.value("list_tools")
    assert tools and all(
        isinstance(t["name"], str) and isinstance(t["inputSchema"], dict) for t in tools
    )
    assert "deliver_email" not in {t["name"] for t in tools}, (
        "a tool disabled for every role is listed"
    )


def schema_issues(schema: dict[str, Any]) -> list[str]:
    """What upstream's verify_mcp_tool_schema step flags in one inputSchema (its rules, our code)."""
    properties = schema.get("properties") or {}
    if not properties:
        return []
    issues = ["an empty 'required' list"] if "required" in schema and not schema["required"] else []
    for name, param in properties.items():
        if isinstance(param, dict) and str(param.get("$ref", "")).startswith("#/$defs/"):
            found = (schema.get("$defs") or {}).get(param["$ref"].removeprefix("#/$defs/"), {})
            param = {**found, **{k: v for k, v in param.items() if k != "$ref"}}
        if not isinstance(param, dict) or not param:
            issues.append(f"{name}: empty schema")
            continue
        variants = [v for v in param.get("anyOf") or [] if isinstance(v, dict)]
        if "type" not in param and not any("type" in v for v in variants):
            issues.append(f"{name}: no type")
        if "description" not in param:
            issues.append(f"{name}: no description")
        if param.get("type") == "array" and "items" not in param:
            issues.append(f"{name}: array without items")
        if param.get("type") == "object" and "properties" not in param:
            issues.append(f"{name}: object without properties")
        if "enum" in param and not param["enum"]:
            issues.append(f"{name}: empty enum")
    return issues


@check("card_rest", "every tool passes upstream's verify_mcp_tool_schema checks")
def _(p: Probes) -> None:
    found = {
        t["name"]: ([] if (t.get("description") or "").strip() else ["no description"])
        + schema_issues(t.get("inputSchema") or {})
        for t in p.value("list_tools")
    }
    assert not {name: issues for name, issues in found.items() if issues}


@check("card_rest", "tools/call through ToolSession")
def _(p: Probes) -> None:
    result = p.value("call_tool no_role")
    assert result["isError"] is False and payload(result)["id"] == "C-001"


@check("card_rest", "one session, several calls")
def _(p: Probes) -> None:
    assert [r["isError"] for r in p.value("session two_calls")] == [False, False]


@check("card_rest", "an unknown tool is an isError result")
def _(p: Probes) -> None:
    assert p.value("call_tool unknown")["isError"] is True


@check("card_rest", "bad arguments are an isError result")
def _(p: Probes) -> None:
    assert p.value("call_tool bad_args")["isError"] is True


@check("card_rest", "a tool's own error is an isError result")
def _(p: Probes) -> None:
    result = p.value("call_tool tool_error")
    assert result["isError"] is True and "T-0000" in result["text"]


@check("card_rest", "get_time over MCP answers {current_time}")
def _(p: Probes) -> None:
    result = p.value("get_time")
    assert result["isError"] is False and RFC3339_UTC.match(payload(result)["current_time"]), result


@check("card_rest", "get_time over MCP takes time_zone")
def _(p: Probes) -> None:
    answer = payload(p.value("get_time time_zone"))
    assert answer["time_zone"] == "Asia/Tokyo" and answer["local_time"].endswith("+09:00"), answer


@check("card_rest", "get_time over MCP refuses an unknown time zone")
def _(p: Probes) -> None:
    assert p.value("get_time bad_zone")["isError"] is True


@check("roles", "role default lists what no role lists")
def _(p: Probes) -> None:
    assert p.value("list_tools names default") == p.value("list_tools names no_role")


@check("roles", "no role is the environment's default role")
def _(p: Probes) -> None:
    assert p.value("list_tools names no_role") == p.value("list_tools names declared_default")


@check("roles", "a declared role sees what its rules leave it")
def _(p: Probes) -> None:
    assert p.value("list_tools names customer") == CUSTOMER_TOOLS


@check("roles", "any role string may list tools")
def _(p: Probes) -> None:
    names = p.value("list_tools names any_role")
    assert "list_tickets" in names and "deliver_email" not in names, names


@check("roles", "role default may call tools")
def _(p: Probes) -> None:
    result = p.value("call_tool default")
    assert result["isError"] is False, result["text"]


@check("roles", "any role string may call tools")
def _(p: Probes) -> None:
    result = p.value("call_tool any_role")
    assert result["isError"] is False, result["text"]


@check("roles", "a tool a role may not call is an isError result")
def _(p: Probes) -> None:
    result = p.value("call_tool denied")
    assert result["isError"] is True and "get_customer" in result["text"], result


@pytest.fixture(scope="module")
def probes(readonly_desk: str, driver: Callable[..., Probes]) -> Probes:
    """Every tool-client call, made once (they only read) against the shared support-desk server."""
    return driver("tool_client_probe.py", f"{readonly_desk}/mcp")


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_upstream_tool_client(
    point: tuple[str, str, Callable[[Probes], None]], probes: Probes
) -> None:
    """One protocol point, as upstream's tool client sees it."""
    point[2](probes)
