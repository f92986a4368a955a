"""The server process bench_process.py puts behind the gateway: an ordinary MCP server
written with the SDK's `MCPServer`, one read tool (`read_note`, a record out of a dict as
text plus `structuredContent`), as a third-party server would be.

    python benchmarks/_mcp_child.py                 # MCP over stdio
    python benchmarks/_mcp_child.py --port 9000     # Streamable HTTP at http://127.0.0.1:9000/mcp

Over HTTP it runs as `MCPServer.run("streamable-http")` does by default (sessions, SSE
answers), the way most servers are deployed.
"""

from __future__ import annotations

import argparse
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

RECORDS = 100
NOTES = {f"n{i}": {"id": f"n{i}", "text": f"note {i}", "tags": ["a", "b"]} for i in range(RECORDS)}

app = MCPServer("bench-child", log_level="WARNING")


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def read_note(note_id: str) -> dict[str, Any]:
    """Read one note.

    Args:
        note_id: The note's id.
    """
    return NOTES[note_id]


def main() -> None:
    """Serve over stdio, or over Streamable HTTP on `--port`."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, help="serve Streamable HTTP on this loopback port")
    opts = parser.parse_args()
    if opts.port is None:
        app.run()
    else:
        app.run("streamable-http", host="127.0.0.1", port=opts.port)


if __name__ == "__main__":
    main()
