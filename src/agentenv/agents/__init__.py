"""Agents: the Agent protocol and the built-in agents."""

from agentenv.agents.base import Agent, AgentError, AgentTurn
from agentenv.agents.human import HumanAgent
from agentenv.agents.openai_agent import (
    OpenAIAgent,
    OpenAISettings,
    TurnRecord,
    Usage,
    make_openai_agent,
)
from agentenv.agents.oracle import NoopAgent, OracleAgent, PartialOracleAgent
from agentenv.agents.registry import AGENTS, AgentFactory, make_agent
from agentenv.agents.replay import ReplayAgent
from agentenv.agents.scripted import ScriptedAgent

__all__ = [
    "AGENTS",
    "Agent",
    "AgentError",
    "AgentFactory",
    "AgentTurn",
    "HumanAgent",
    "NoopAgent",
    "OpenAIAgent",
    "OpenAISettings",
    "OracleAgent",
    "PartialOracleAgent",
    "ReplayAgent",
    "ScriptedAgent",
    "TurnRecord",
    "Usage",
    "make_agent",
    "make_openai_agent",
]
