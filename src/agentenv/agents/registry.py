"""Finding agents by name: built-ins, plus plugins (`agentenv.agents` entry points)."""

from __future__ import annotations

from collections.abc import Callable

from agentenv.agents.base import Agent
from agentenv.agents.oracle import OracleAgent
from agentenv.registry import Registry, RegistryError

AgentFactory = Callable[[str], Agent]
"""Builds an agent from the part of its spec after `name:` ('' if none)."""


def _named(factory: AgentFactory) -> str:
    return getattr(factory, "agent_name", getattr(factory, "__name__", "?"))


AGENTS: Registry[AgentFactory] = Registry(
    kind="agent", group="agentenv.agents", config_key="agents", name_of=_named
)


def _oracle(argument: str) -> Agent:
    if argument:
        raise RegistryError("the oracle agent takes no argument")
    return OracleAgent()


AGENTS.add_builtin(_oracle, "oracle")


def make_agent(spec: str) -> Agent:
    """An agent from a spec such as `oracle` or `name:argument`."""
    name, _, argument = spec.partition(":")
    return AGENTS.get(name)(argument)
