"""Checks, through the env's MCP endpoint, that the bookshop's catalogue is as shipped."""

import json

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


async def verify(mcp_url):
    async with streamable_http_client(mcp_url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            result = await session.call_tool("search_books", {"query": "Le Guin"})
    found = json.loads("".join(getattr(part, "text", "") for part in result.content))
    books = {book["book_id"]: book for book in found.get("data") or []}
    return [
        {"id": "both-le-guins", "result": set(books) == {"B-001", "B-004"},
         "description": f"search found {sorted(books)}"},
        {"id": "earthsea-sold-out", "result": books.get("B-004", {}).get("stock") == 0,
         "description": "A Wizard of Earthsea has no stock", "weight": 0.5},
    ]
