"""The Agent protocol: what a task's `prompt_agent` step talks to.

An agent receives a turn (the prompt, a tool client bound to its role on its
environments, and for the oracle the reference solution) and returns its response,
which ends the turn. The same task runs unchanged against any agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from agentenv.gateway.results import CallResult
from agentenv.spec.task import SolutionTurn
from agentenv.spec.wire import ToolInfo


class AgentError(Exception):
    """An agent that cannot take its turn (misconfigured, missing a solution, ...)."""


class Tools(Protocol):
    """What an agent calls tools through: in process a ToolClient (gateway.client); an agent
    served over A2A gets one that speaks MCP to the gateway named in its turn's request."""

    def list_tools(self) -> list[ToolInfo]:
        """The tools the agent may call."""
        ...

    async def call(
        self, name: str, args: dict[str, Any] | None = None, *, env_id: str | None = None
    ) -> CallResult:
        """Call one; never raises for a bad call."""
        ...


@dataclass
class AgentTurn:
    """One prompt for one agent.

    In a conversation (`prompt_agent` with `user_agent_name`) the same prompt_id gets one
    turn per exchange: `conversation_turn` counts from 0 and `history` holds the messages
    so far, as `{"role": "user"|"assistant", "text": ...}`.
    """

    prompt_id: str
    prompt: str
    tools: Tools
    agent_name: str
    role: str
    system_prompt: str | None = None
    solution: SolutionTurn | None = None
    max_turns: int | None = None
    model: str | None = None
    model_params: dict[str, Any] = field(default_factory=dict)
    conversation_turn: int = 0
    history: list[dict[str, str]] = field(default_factory=list)
    peers: dict[str, str] = field(
        default_factory=dict, metadata={"doc": "Other agents of the task by name: their A2A URLs."}
    )
    config: dict[str, Any] = field(
        default_factory=dict, metadata={"doc": "The deploy_agent step's agent_config."}
    )


@runtime_checkable
class Agent(Protocol):
    """Anything that can take a turn."""

    name: str

    async def run_turn(self, turn: AgentTurn) -> str:
        """Act (call tools through `turn.tools`) and return the final response."""
        ...
