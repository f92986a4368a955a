"""Checks, through the env's MCP endpoint, what the agent's commit holds."""

import re

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

MESSAGE = r"(?i)divi(de|sion) by zero"


async def text(session, tool, args):
    result = await session.call_tool(tool, {"repo_path": ".", **args})
    return "".join(getattr(part, "text", "") for part in result.content)


async def verify(mcp_url):
    # mcp 1.x yields (read, write, get_session_id), mcp 2.x (read, write): take the first two.
    async with streamable_http_client(mcp_url) as streams:
        async with ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            log = await text(session, "git_log", {"max_count": 5})
            head = await text(session, "git_show", {"revision": "HEAD"})
            status = await text(session, "git_status", {})
            branches = await text(session, "git_branch", {"branch_type": "local"})
    commits = log.count("Commit: ") or log.count("commit ")
    return [
        {"id": "one-new-commit", "result": commits == 2, "description": f"git_log: {log[:300]}"},
        {"id": "calc-committed", "result": "calc.py" in head and "cannot divide by zero" in head,
         "description": f"HEAD: {head[:300]}"},
        # the answer is graded apart: the commit itself must say what it fixes
        {"id": "message-says-the-fix", "result": bool(re.search(MESSAGE, head.split("---")[0])),
         "description": f"HEAD's message must match {MESSAGE}"},
        {"id": "scratch-left-out", "result": "scratch.txt" not in head and "scratch.txt" in status,
         "description": f"git_status: {status[:300]}"},
        {"id": "handed-in", "result": "submitted" in branches,
         "description": f"git_branch: {branches[:200]}"},
    ]
