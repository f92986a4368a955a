"""A tiny MCP server for the pool tests: a counter whose state lives in this process.

At start it writes its pid as a file into `$PIDS` (when set), so a test knows every
process the pool started, idle ones included.
"""

import os
from pathlib import Path

from mcp.server.mcpserver import MCPServer

app = MCPServer("counter")
COUNT = {"n": 0}


@app.tool()
def bump() -> dict[str, int]:
    """Count one more; answers the count and this process's pid."""
    COUNT["n"] += 1
    return {"n": COUNT["n"], "pid": os.getpid()}


if __name__ == "__main__":
    if os.environ.get("PIDS"):
        (Path(os.environ["PIDS"]) / str(os.getpid())).write_text("")
    app.run()
