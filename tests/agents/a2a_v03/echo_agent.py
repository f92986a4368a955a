"""A minimal agent built on upstream's own A2A framework (`agentenv_protocol.a2a_agent`,
a2a-sdk 0.3): run by the tests in the upstream virtualenv, never imported by our code.

    python echo_agent.py PORT

It declares agent-config (system_prompt, model), mcp-config, peer-agents and trajectory
as upstream's agents do. Each turn it
lists the tools of every MCP server registered with it (over MCP, with the headers it was
given) and, when the prompt is `call <tool> <json args>`, calls that tool; it answers with
what it saw, as one JSON text. `sleep SECONDS FILE` sleeps, and writes FILE if its task
is canceled meanwhile.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from agentenv_protocol.a2a_agent import (
    MCP_CONFIG_V1,
    PEER_AGENTS_V1,
    TRAJECTORY_V1,
    AgentConfig,
    AgentEnvAgent,
    AgentIdentity,
    a2a_agent,
)
from agentenv_protocol.a2a_agent.tasks.v1 import TaskRequest, TaskResult, TextPart
from mcp import ClientSession
from mcp.client.streamable_http import streamablehttp_client


async def _use(server: dict[str, Any], words: list[str]) -> dict[str, Any]:
    async with (
        streamablehttp_client(server["url"], headers=server.get("headers") or None) as (
            read,
            write,
            _,
        ),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        listed = await session.list_tools()
        seen: dict[str, Any] = {"tools": sorted(t.name for t in listed.tools)}
        if len(words) >= 2 and words[0] == "call":
            args = json.loads(" ".join(words[2:]) or "{}")
            result = await session.call_tool(words[1], args)
            seen["result"] = [c.text for c in result.content if c.type == "text"]
            seen["is_error"] = bool(result.isError)
        return seen


class EchoConfig(AgentConfig):
    system_prompt: str | None = None
    model: str | None = None


@a2a_agent(
    identity=AgentIdentity(name="upstream-echo", description="echoes", version="0.0.1"),
    extensions=[MCP_CONFIG_V1, PEER_AGENTS_V1, TRAJECTORY_V1],
    config=EchoConfig,
)
class Echo(AgentEnvAgent):
    async def run(self, request: TaskRequest) -> TaskResult:
        text = " ".join(p.text for p in request.parts if isinstance(p, TextPart))
        words = text.split()
        if len(words) == 3 and words[0] == "sleep":  # sleep SECONDS MARKER_FILE
            try:
                await asyncio.sleep(float(words[1]))
            except asyncio.CancelledError:
                Path(words[2]).write_text("canceled")
                raise
        servers = {
            name: await _use(server, text.split())
            for name, server in request.mcp_servers.items()
            if name != "peer_agents"
        }
        return TaskResult.text(
            json.dumps(
                {
                    "prompt": text,
                    "servers": servers,
                    "headers": {
                        name: sorted((server.get("headers") or {}).items())
                        for name, server in request.mcp_servers.items()
                    },
                    "metadata_keys": sorted(request.metadata),
                    "config": request.config.model_dump(exclude_none=True),
                }
            )
        )


if __name__ == "__main__":
    Echo().serve(host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
