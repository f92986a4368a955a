"""A small MCP server for the runtime tests: echoes its request meta, crashes, hangs."""

import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("echo")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool(annotations=ToolAnnotations(readOnlyHint=True), structured_output=True)
def whoami(ctx: Context) -> dict[str, object]:
    """The request's _meta and this process's pid."""
    meta = ctx.request_context.meta
    dumped = meta.model_dump(by_alias=True) if hasattr(meta, "model_dump") else dict(meta or {})
    return {"meta": dumped, "pid": os.getpid()}


@app.tool(meta={"agentenv.io/hiddenByDefault": True})
def secret() -> str:
    """Plumbing the agent must not see."""
    return "hidden"


@app.tool()
def die() -> str:
    """Exit mid-call."""
    print("dying now", file=sys.stderr, flush=True)
    os._exit(3)


@app.tool()
def hang(seconds: float = 3600) -> str:
    """Never answer."""
    time.sleep(seconds)
    return "late"


if __name__ == "__main__":
    app.run()
