"""Checks, through the env's MCP endpoint, that Priya (U-001) bought one copy of B-001."""

import json

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def call(session, tool, args):
    result = await session.call_tool(tool, args)
    text = "".join(getattr(part, "text", "") for part in result.content)
    failed = getattr(result, "isError", None) or getattr(result, "is_error", False)  # mcp 1.x, 2.x
    return {"success": False, "error": text} if failed else json.loads(text)


async def verify(mcp_url):
    # mcp 1.x yields (read, write, get_session_id), mcp 2.x (read, write): take the first two.
    async with streamable_http_client(mcp_url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            orders = await call(session, "list_orders", {"customer_id": "U-001"})
            customer = await call(session, "get_customer", {"customer_id": "U-001"})
    lines = [line for order in orders.get("data") or [] for line in order["lines"]]
    bought = [line for line in lines if line["book_id"] == "B-001"]
    credit = (customer.get("data") or {}).get("credit")
    return [
        {"id": "one-copy", "result": sum(line["quantity"] for line in bought) == 1,
         "description": f"U-001's order lines for B-001: {bought}"},
        {"id": "paid", "result": credit == 35.5, "description": f"U-001 has {credit} of credit"},
    ]
