"""Drive upstream's gateway, in front of our served environment, with upstream's clients.

Runs in the upstream virtualenv. Usage: python gateway_probe.py GATEWAY_BASE_URL SERVICE_KEY
SERVICE_KEY is the name the gateway was given for our server (INTERNAL_MCP_SERVERS and
REST_PROXY_URLS). Prints one JSON object: probe name -> outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from agentenv_protocol import client
from agentenv_protocol.tool_client import ToolSession

ROLE_HEADER = "AgentEnv-Role"
results: dict[str, Any] = {}


def dump(value: Any) -> Any:
    """A JSON-ready copy of an answer (pydantic models dumped, a tool result's text kept)."""
    if hasattr(value, "model_dump"):
        out = value.model_dump(mode="json")
        if hasattr(value, "text"):
            out["text"] = value.text
        return out
    if isinstance(value, list):
        return [dump(v) for v in value]
    return value


async def probe(name: str, call: Any) -> Any:
    """Run one call and record its answer, or its failure, under `name`."""
    try:
        value = await call()
    except Exception as error:  # a failure is a finding
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}
        return None
    results[name] = {"ok": True, "value": dump(value)}
    return value


async def step(base: str, body: dict, role: str | None = None) -> dict:
    """POST /step with an optional role header; status and body."""
    headers = {ROLE_HEADER: role} if role else {}
    async with httpx.AsyncClient() as http:
        response = await http.post(f"{base}/step", json=body, headers=headers, timeout=60)
    return {"status": response.status_code, "json": response.json() if response.content else None}


async def http_json(method: str, url: str, body: dict | None = None) -> dict:
    """One plain HTTP call; status, parsed body and text."""
    async with httpx.AsyncClient() as http:
        response = await http.request(method, url, json=body, timeout=60)
    try:
        data = response.json()
    except ValueError:
        data = None
    return {"status": response.status_code, "json": data, "text": response.text[:2000]}


def session_call(mcp_url: str, role: str | None, name: str, arguments: dict) -> Any:
    """A call of one tool in its own upstream ToolSession, as `role`."""

    async def run() -> Any:
        async with ToolSession(mcp_url=mcp_url, role=role, timeout=60) as session:
            return await session.call_tool(name, arguments)

    return run


def session_names(mcp_url: str, role: str | None) -> Any:
    """The sorted tool names an upstream ToolSession lists, as `role`."""

    async def run() -> list[str]:
        async with ToolSession(mcp_url=mcp_url, role=role, timeout=60) as session:
            return sorted(t.name for t in await session.list_tools())

    return run


async def main(base: str, key: str) -> None:
    """Run every probe of this driver, in order."""
    card = await probe("card", lambda: client.get_card(base))
    mcp_url = f"{base}{client.mcp_path(card or {})}"
    if card is not None:
        results["child"] = {
            "ok": True,
            "value": [c.get("name") for c in card.get("children_environments") or []],
        }
    await probe(
        "state", lambda: client.invoke_extension(base, card, "urn:agentenv:state/v1", method="get")
    )
    await probe("data get", lambda: client.get_data(base))
    await probe("data get child", lambda: client.get_data(f"{base}/svc/{key}"))
    await probe("child card", lambda: client.get_card(f"{base}/svc/{key}"))
    get_customer = {
        "action": "call_tool",
        "tool_name": "get_customer",
        "arguments": {"id": "C-001"},
    }
    await probe("step list no_role", lambda: step(base, {"action": "list_tools"}))
    await probe("step call no_role", lambda: step(base, get_customer))
    await probe("step call default", lambda: step(base, get_customer, "default"))
    await probe("step call declared", lambda: step(base, get_customer, "agent"))
    await probe("step call any_role", lambda: step(base, get_customer, "auditor"))
    await probe("step call refused_role", lambda: step(base, get_customer, "customer"))
    await probe(
        "step write no_role",
        lambda: step(
            base,
            {
                "action": "call_tool",
                "tool_name": "reply_to_customer",
                "arguments": {"ticket_id": "T-1042", "message": "On it."},
            },
        ),
    )
    await probe("mcp names no_role", session_names(mcp_url, None))
    await probe("mcp call no_role", session_call(mcp_url, None, "get_customer", {"id": "C-001"}))
    await probe(
        "mcp call default", session_call(mcp_url, "default", "get_customer", {"id": "C-001"})
    )
    await probe(
        "mcp call declared", session_call(mcp_url, "agent", "get_customer", {"id": "C-001"})
    )
    await probe(
        "mcp call any_role", session_call(mcp_url, "auditor", "get_customer", {"id": "C-001"})
    )
    await probe(
        "mcp call refused_role", session_call(mcp_url, "customer", "get_customer", {"id": "C-001"})
    )
    await probe(
        "mcp customer tool",
        session_call(
            mcp_url,
            "customer",
            "check_ticket_status",
            {"ticket_id": "T-1042", "email": "dana.whitfield@example.com"},
        ),
    )
    # the gateway's own triggers, acting on our tools as a role (`as`), forwarded in _meta
    refund = {"ticket_id": "T-1044", "customer_id": "C-001", "amount": 150.0, "reason": "Goodwill."}
    triggers = {
        "watch_roles": ["default"],
        "triggers": [
            {
                "id": "refund-as-supervisor",
                "when": {"type": "action", "tool": "list_tickets"},
                "actions": [
                    {"type": "tool", "tool": "issue_refund", "args": refund, "as": "supervisor"}
                ],
            },
            {
                "id": "refund-as-agent",
                "when": {"type": "action", "tool": "list_tickets"},
                "actions": [
                    {"type": "tool", "tool": "issue_refund", "args": refund, "as": "agent"}
                ],
            },
        ],
    }
    await probe(
        "gw triggers register", lambda: http_json("POST", f"{base}/triggers/register", triggers)
    )
    await probe(
        "gw provoke",
        lambda: step(base, {"action": "call_tool", "tool_name": "list_tickets", "arguments": {}}),
    )

    async def settled() -> dict:
        for _ in range(50):
            state = await http_json("GET", f"{base}/triggers/state")
            # an action trigger whose action fails goes back to armed, its failure counted
            if all(t["status"] == "fired" or t["failure_count"] for t in state["json"]["triggers"]):
                break
            await asyncio.sleep(0.2)
        return state

    await probe("gw triggers state", settled)
    await probe(
        "gw refunds",
        lambda: step(
            base,
            {
                "action": "call_tool",
                "tool_name": "list_refunds",
                "arguments": {"ticket_id": "T-1044"},
            },
            "agent",
        ),
    )
    # the gateway's clock in front of our server
    await probe(
        "gw clock set",
        lambda: http_json(
            "PUT", f"{base}/clock/set-time", {"virtual_time": "2026-03-02T09:00:00Z"}
        ),
    )
    await probe("mcp get_time", session_call(mcp_url, None, "get_time", {}))
    await probe("data reset", lambda: client.reset_data(base))
    await probe("data get after_reset", lambda: client.get_data(base))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/"), sys.argv[2]))
    print(json.dumps(results, default=str))
