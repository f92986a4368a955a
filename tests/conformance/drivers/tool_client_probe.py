"""Drive a served environment's MCP endpoint with upstream's tool client; print every answer as JSON.

Runs in the upstream virtualenv. Usage: python tool_client_probe.py MCP_URL
Each probe opens its own `ToolSession` (with the role it names) so probes do not share state
beyond the environment itself. The output is one JSON object: probe name -> outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentenv_protocol.tool_client import ToolSession

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


async def probe(name: str, mcp_url: str, role: str | None, action: Any) -> None:
    """Open a session as `role`, run `action(session)`, record its answer or its failure."""
    try:
        async with ToolSession(mcp_url=mcp_url, role=role, timeout=60) as session:
            value = await action(session)
            results[name] = {
                "ok": True,
                "value": dump(value),
                "session_id": session.session_id,
                "protocol_version": session.protocol_version,
            }
    except Exception as error:  # a failure is a finding
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}


async def main(mcp_url: str) -> None:
    """Run every probe of this driver, in order."""

    def names(session: ToolSession):
        async def run() -> list[str]:
            return sorted(t.name for t in await session.list_tools())

        return run()

    await probe("list_tools", mcp_url, None, lambda s: s.list_tools())
    await probe("list_tools names no_role", mcp_url, None, names)
    await probe("list_tools names default", mcp_url, "default", names)
    await probe("list_tools names declared_default", mcp_url, "agent", names)
    await probe("list_tools names customer", mcp_url, "customer", names)
    await probe("list_tools names any_role", mcp_url, "auditor", names)
    await probe(
        "call_tool no_role", mcp_url, None, lambda s: s.call_tool("get_customer", {"id": "C-001"})
    )
    await probe(
        "call_tool default",
        mcp_url,
        "default",
        lambda s: s.call_tool("get_customer", {"id": "C-001"}),
    )
    await probe(
        "call_tool any_role",
        mcp_url,
        "auditor",
        lambda s: s.call_tool("get_customer", {"id": "C-001"}),
    )
    await probe(
        "call_tool denied",
        mcp_url,
        "customer",
        lambda s: s.call_tool("get_customer", {"id": "C-001"}),
    )
    await probe("call_tool unknown", mcp_url, None, lambda s: s.call_tool("no_such_tool", {}))
    await probe(
        "call_tool bad_args", mcp_url, None, lambda s: s.call_tool("get_customer", {"id": 42})
    )
    await probe(
        "call_tool tool_error",
        mcp_url,
        None,
        lambda s: s.call_tool("read_ticket", {"ticket_id": "T-0000"}),
    )
    await probe("get_time", mcp_url, None, lambda s: s.call_tool("get_time", {}))
    await probe(
        "get_time time_zone",
        mcp_url,
        None,
        lambda s: s.call_tool("get_time", {"time_zone": "Asia/Tokyo"}),
    )
    await probe(
        "get_time bad_zone",
        mcp_url,
        None,
        lambda s: s.call_tool("get_time", {"time_zone": "Mars/Olympus"}),
    )

    async def two_calls(session: ToolSession) -> list:
        first = await session.call_tool("list_tickets", {})
        second = await session.call_tool("get_customer", {"id": "C-002"})
        return [first, second]

    await probe("session two_calls", mcp_url, None, two_calls)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
    print(json.dumps(results, default=str))
