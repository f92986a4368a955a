"""Concurrent callers and the strict-roles opt-in, through upstream's tool client.

Runs in the upstream virtualenv. Usage: python modes_probe.py BASE_URL
BASE_URL serves support-desk with `--mode performance --strict-roles`. Prints one JSON
object: probe name -> outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from agentenv_protocol.tool_client import ToolSession

results: dict[str, Any] = {}
OPEN_TICKETS = ["T-1040", "T-1042", "T-1043", "T-1044", "T-1045", "T-1046"]


async def probe(name: str, call: Any) -> None:
    """Run one call and record its answer, or its failure, under `name`."""
    try:
        value = await call()
    except Exception as error:  # a failure is a finding
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}
        return
    results[name] = {"ok": True, "value": value}


async def one_call(mcp_url: str, role: str | None, tool: str, arguments: dict) -> dict:
    """One tool call in its own upstream ToolSession; isError and text."""
    async with ToolSession(mcp_url=mcp_url, role=role, timeout=60) as session:
        result = await session.call_tool(tool, arguments)
    return {"isError": result.isError, "text": result.text}


async def main(base: str) -> None:
    """Run every probe of this driver, in order."""
    mcp = f"{base}/mcp"

    async def concurrent_reads() -> list[dict]:
        return list(
            await asyncio.gather(*(one_call(mcp, None, "list_tickets", {}) for _ in range(8)))
        )

    async def concurrent_writes() -> list[dict]:
        return list(
            await asyncio.gather(
                *(
                    one_call(
                        mcp, None, "reply_to_customer", {"ticket_id": t, "message": f"About {t}."}
                    )
                    for t in OPEN_TICKETS
                )
            )
        )

    async def concurrent_steps() -> list[int]:
        async with httpx.AsyncClient() as http:
            answers = await asyncio.gather(
                *(
                    http.post(
                        f"{base}/step",
                        json={
                            "action": "call_tool",
                            "tool_name": "get_customer",
                            "arguments": {"id": "C-001"},
                        },
                        timeout=60,
                    )
                    for _ in range(8)
                )
            )
        return [a.status_code for a in answers]

    async def statuses_after() -> dict:
        result = await one_call(mcp, None, "list_tickets", {})
        return json.loads(result["text"])

    await probe("concurrent reads", concurrent_reads)
    await probe("concurrent writes", concurrent_writes)
    await probe("concurrent steps", concurrent_steps)
    await probe("tickets after writes", statuses_after)
    await probe("strict no_role", lambda: one_call(mcp, None, "get_customer", {"id": "C-001"}))
    await probe("strict default", lambda: one_call(mcp, "default", "get_customer", {"id": "C-001"}))
    await probe(
        "strict declared", lambda: one_call(mcp, "supervisor", "get_customer", {"id": "C-001"})
    )
    await probe(
        "strict undeclared", lambda: one_call(mcp, "auditor", "get_customer", {"id": "C-001"})
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/")))
    print(json.dumps(results, default=str))
