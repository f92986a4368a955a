"""A small stateful MCP server for trigger tests: a counter that only it keeps."""

import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("counter")
_count = 0


@app.tool()
def bump() -> int:
    """Add one to the counter; the new value."""
    global _count
    _count += 1
    return _count


@app.tool(annotations=ToolAnnotations(readOnlyHint=True), structured_output=True)
def count() -> dict[str, int]:
    """The counter."""
    return {"count": _count}


@app.tool(annotations=ToolAnnotations(readOnlyHint=True))
def where() -> str:
    """The folder this server runs in (its workspace)."""
    return f"I run in {os.getcwd()}"


if __name__ == "__main__":
    app.run()
