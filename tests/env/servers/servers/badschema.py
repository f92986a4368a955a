"""A server whose tool lists an input schema that is not a JSON Schema."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("bad")


@app.tool()
def ok(a: int) -> int:
    """Fine."""
    return a


if __name__ == "__main__":
    tool = app._tool_manager._tools["ok"]
    tool.parameters = {"type": "object", "properties": {"a": {"type": 12}}}
    app.run()
