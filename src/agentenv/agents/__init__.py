"""Agents: the Agent protocol and the built-in agents."""

from agentenv.agents.base import Agent, AgentError, AgentTurn
from agentenv.agents.oracle import OracleAgent
from agentenv.agents.registry import AGENTS, AgentFactory, make_agent

__all__ = [
    "AGENTS",
    "Agent",
    "AgentError",
    "AgentFactory",
    "AgentTurn",
    "OracleAgent",
    "make_agent",
]
