"""A Streamable HTTP MCP server for the http backend's tests: `python mcp_http.py PORT [TOKEN]`.

With a TOKEN, every request needs `Authorization: Bearer TOKEN` and `X-Test: yes` (401 else).
`--card-junk` also serves a card path that answers text that is not JSON; `--card-no-mcp`
a JSON card with no MCP interface.
"""

from __future__ import annotations

import sys

import uvicorn
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response

server = MCPServer("http-test")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def main() -> None:
    port = int(sys.argv[1])
    token = next((a for a in sys.argv[2:] if not a.startswith("--")), None)
    app = server.streamable_http_app()
    inner = app

    async def guarded(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            request = Request(scope)
            if request.url.path == "/.well-known/agent-env.json":
                if "--card-junk" in sys.argv:
                    answer: Response = PlainTextResponse("<html>not a card</html>")
                elif "--card-no-mcp" in sys.argv:
                    answer = JSONResponse(
                        {
                            "name": "x",
                            "protocolVersion": "1.0",
                            "url": "/agentenv",
                            "preferredTransport": "JSONRPC",
                            "additionalInterfaces": [],
                            "capabilities": {"tools": [], "extensions": [], "operations": []},
                        }
                    )
                else:
                    answer = PlainTextResponse("no card", status_code=404)
                await answer(scope, receive, send)
                return
            if token is not None and (
                request.headers.get("authorization") != f"Bearer {token}"
                or request.headers.get("x-test") != "yes"
            ):
                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
        await inner(scope, receive, send)

    uvicorn.run(guarded, host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    main()
