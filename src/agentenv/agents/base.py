"""The Agent protocol: what a task's `prompt_agent` step talks to.

An agent receives a turn (the prompt, a tool client bound to its role on its
environments, and for the oracle the reference solution) and returns its response,
which ends the turn. The same task runs unchanged against any agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentenv.gateway.client import ToolClient
from agentenv.spec.task import SolutionTurn


class AgentError(Exception):
    """An agent that cannot take its turn (misconfigured, missing a solution, ...)."""


@dataclass
class AgentTurn:
    """One prompt for one agent."""

    prompt_id: str
    prompt: str
    tools: ToolClient
    agent_name: str
    role: str
    system_prompt: str | None = None
    solution: SolutionTurn | None = None
    max_turns: int | None = None
    model: str | None = None
    model_params: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class Agent(Protocol):
    """Anything that can take a turn."""

    name: str

    async def run_turn(self, turn: AgentTurn) -> str:
        """Act (call tools through `turn.tools`) and return the final response."""
        ...
