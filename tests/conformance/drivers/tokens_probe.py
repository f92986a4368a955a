"""Bearer tokens (ours) kept beside upstream's roles, through upstream's client and tool client.

Runs in the upstream virtualenv. Usage: python tokens_probe.py BASE_URL
BASE_URL serves support-desk with `--token agent=agent-secret --token admin=admin-secret`.
Upstream's ToolSession takes extra `headers`, which carry the bearer token. Prints one JSON
object: probe name -> outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from agentenv_protocol import client
from agentenv_protocol.tool_client import ToolSession

results: dict[str, Any] = {}


async def probe(name: str, call: Any) -> None:
    """Run one call and record its answer, or its failure, under `name`."""
    try:
        value = await call()
    except Exception as error:  # a failure is a finding
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}
        return
    results[name] = {"ok": True, "value": value}


def bearer(token: str) -> dict[str, str]:
    """The Authorization header for a bearer token."""
    return {"Authorization": f"Bearer {token}"}


def tool_call(mcp_url: str, *, role: str | None = None, headers: dict | None = None) -> Any:
    """A get_customer call in its own upstream ToolSession with the given role and headers."""

    async def run() -> dict:
        async with ToolSession(mcp_url=mcp_url, role=role, headers=headers, timeout=60) as session:
            result = await session.call_tool("get_customer", {"id": "C-001"})
        return {"isError": result.isError, "text": result.text}

    return run


def post(url: str, body: dict, headers: dict) -> Any:
    """A POST with a JSON body and the given headers; status and body."""

    async def run() -> dict:
        async with httpx.AsyncClient() as http:
            response = await http.post(url, json=body, headers=headers, timeout=60)
        return {"status": response.status_code, "text": response.text[:1000]}

    return run


async def main(base: str) -> None:
    """Run every probe of this driver, in order."""
    mcp = f"{base}/mcp"
    await probe("card", lambda: client.get_card(base))
    await probe("call with token", tool_call(mcp, headers=bearer("agent-secret")))
    await probe("call with wrong token", tool_call(mcp, headers=bearer("not-a-secret")))
    await probe("call with role header only", tool_call(mcp, role="admin"))
    rule = {"role": "agent", "tools": ["get_order"]}
    await probe(
        "disable with role header only",
        post(f"{base}/tools/disable", rule, {"AgentEnv-Role": "admin"}),
    )
    await probe(
        "disable with agent token", post(f"{base}/tools/disable", rule, bearer("agent-secret"))
    )
    await probe(
        "disable with admin token", post(f"{base}/tools/disable", rule, bearer("admin-secret"))
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/")))
    print(json.dumps(results, default=str))
