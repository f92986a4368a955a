"""A2A for agents: serve any agent over A2A, and talk to a remote one.

- `server.py`: an agent as an A2A server (a2a-sdk 1.x, agent card at
  `/.well-known/agent-card.json`); it learns its environment from each request's
  `urn:agentenv:mcp-config/v1` metadata and calls tools over MCP (`mcp_tools.py`).
  It also answers A2A 0.3 clients and upstream's `/ext/...` configuration endpoints
  (`extensions.py`).
- `client.py`: `RemoteA2AAgent`, an Agent whose turns are taken by a remote A2A agent
  (1.0 or 0.3), and `send_instruction` for peers and `nl` trigger actions;
  `configure.py` registers the environment with upstream-era agents.
- `nl.py`: the sender a gateway uses for `nl` trigger actions.

This module stays light (no a2a-sdk import): the names below load on first use.
See docs/a2a.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

AGENT_CONFIG_URI = "urn:agentenv:agent-config/v1"
"""Upstream's: the agent's settings (`name`, `role`, `system_prompt`, `model`, ...), set by
POST to the card's endpoint before turns."""

MCP_CONFIG_URI = "urn:agentenv:mcp-config/v1"
"""Where the agent's environment is: `{url, token, role, env_id}` (or a list of them)."""

TRAJECTORY_URI = "urn:agentenv:trajectory/v1"
"""Tool calls carry the prompt_id as their session; the agent returns its own call log."""

PEER_AGENTS_URI = "urn:agentenv:peer-agents/v1"
"""Other agents of the task: `{name: A2A base URL}`."""

SOLUTION_URI = "urn:agentenv:solution/v1"
"""Ours: the agent replays the task's reference solution (the oracle), sent as JSON text."""

EXTENSIONS = (MCP_CONFIG_URI, TRAJECTORY_URI, PEER_AGENTS_URI)
REQUIREMENT = "a2a-sdk[http-server]>=1.3"


def require_sdk() -> None:
    """AgentError (saying what to install) when a2a-sdk is missing."""
    import importlib.util

    if importlib.util.find_spec("a2a") is None:
        from agentenv.agents.base import AgentError

        raise AgentError(f"A2A needs the a2a-sdk package: pip install {REQUIREMENT!r}")


if TYPE_CHECKING:
    from agentenv.agents.a2a.client import RemoteA2AAgent, fetch_card, send_instruction
    from agentenv.agents.a2a.mcp_tools import McpConfig, McpTools
    from agentenv.agents.a2a.server import create_a2a_app, make_agent_server, serve_agent

_LAZY = {
    "RemoteA2AAgent": "client",
    "fetch_card": "client",
    "send_instruction": "client",
    "McpConfig": "mcp_tools",
    "McpTools": "mcp_tools",
    "create_a2a_app": "server",
    "make_agent_server": "server",
    "serve_agent": "server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = [
    "AGENT_CONFIG_URI",
    "EXTENSIONS",
    "MCP_CONFIG_URI",
    "PEER_AGENTS_URI",
    "REQUIREMENT",
    "SOLUTION_URI",
    "TRAJECTORY_URI",
    "McpConfig",
    "McpTools",
    "RemoteA2AAgent",
    "create_a2a_app",
    "fetch_card",
    "make_agent_server",
    "require_sdk",
    "send_instruction",
    "serve_agent",
]
