"""Hidden-by-default tools, as upstream's clients see them, on our server and behind upstream's gateway.

Runs in the upstream virtualenv. Usage: python hidden_probe.py PREFIX BASE_URL
BASE_URL serves tests/conformance/envs/vault (tool `export_notes` is hidden by default), itself
or through upstream's gateway; probe names start with PREFIX. Prints one JSON object: probe
name -> outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from agentenv_protocol.tool_client import ToolSession

ROLE_HEADER = "AgentEnv-Role"
HIDDEN = "export_notes"
results: dict[str, Any] = {}


async def probe(name: str, call: Any) -> None:
    """Run one call and record its answer, or its failure, under `name`."""
    try:
        value = await call()
    except Exception as error:  # a failure is a finding
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}
        return
    results[name] = {"ok": True, "value": value}


def names(mcp_url: str, role: str | None) -> Any:
    """The sorted tool names an upstream ToolSession lists, as `role`."""

    async def run() -> list[str]:
        async with ToolSession(mcp_url=mcp_url, role=role, timeout=60) as session:
            return sorted(t.name for t in await session.list_tools())

    return run


def call(mcp_url: str, role: str | None) -> Any:
    """A call of the hidden tool in its own upstream ToolSession, as `role`."""

    async def run() -> dict:
        async with ToolSession(mcp_url=mcp_url, role=role, timeout=60) as session:
            result = await session.call_tool(HIDDEN, {})
            return {"isError": result.isError, "text": result.text}

    return run


def post(url: str, body: dict, role: str | None = None) -> Any:
    """A POST with a JSON body and the given headers; status and body."""

    async def run() -> dict:
        async with httpx.AsyncClient() as http:
            response = await http.post(
                url, json=body, headers={ROLE_HEADER: role} if role else {}, timeout=60
            )
        return {
            "status": response.status_code,
            "json": response.json() if response.content else None,
        }

    return run


async def sequence(prefix: str, base: str) -> None:
    """The hidden-tool sequence against one address, probes named PREFIX ..."""
    mcp = f"{base}/mcp"
    await probe(f"{prefix} names no_role", names(mcp, None))
    await probe(f"{prefix} step names no_role", post(f"{base}/step", {"action": "list_tools"}))
    await probe(f"{prefix} call no_role", call(mcp, None))
    await probe(
        f"{prefix} enable wildcard", post(f"{base}/tools/enable", {"role": "ops", "tools": "*"})
    )
    await probe(f"{prefix} names after_wildcard", names(mcp, "ops"))
    await probe(
        f"{prefix} enable named", post(f"{base}/tools/enable", {"role": "ops", "tools": [HIDDEN]})
    )
    await probe(f"{prefix} names after_named", names(mcp, "ops"))
    await probe(f"{prefix} call after_named", call(mcp, "ops"))
    await probe(f"{prefix} names no_role after_named", names(mcp, None))


if __name__ == "__main__":
    asyncio.run(sequence(sys.argv[1], sys.argv[2].rstrip("/")))
    print(json.dumps(results, default=str))
