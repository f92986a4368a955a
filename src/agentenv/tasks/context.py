"""TaskContext: everything the steps of one task run share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentenv.env.environment import Environment
from agentenv.env.tool import SYSTEM, Principal
from agentenv.gateway import Gateway
from agentenv.gateway.client import Binding, ToolClient
from agentenv.gateway.errors import DEFAULT_INSTANCE
from agentenv.spec.task import TaskSpec
from agentenv.state import Snapshot
from agentenv.tasks.step import Score, StepError

if TYPE_CHECKING:
    from agentenv.agents.base import Agent, AgentTurn
    from agentenv.tasks.sandboxes import DeployedSandbox


@dataclass
class DeployedEnv:
    """An environment instance deployed by a `deploy_env` step."""

    env_id: str
    env: Environment
    gateway: Gateway
    instance: str = DEFAULT_INSTANCE
    served: Any = field(
        default=None,
        metadata={"doc": "The gateway served over HTTP to remote agents (tasks.remote)."},
    )

    @property
    def state(self) -> Any:
        """The instance's live state."""
        return self.gateway.instance(self.instance).state

    def snapshot(self) -> Snapshot:
        """A frozen copy of the instance's committed state (a call still in flight from a
        concurrent step is not part of it)."""
        return self.state.committed()


@dataclass
class DeployedAgent:
    """An agent deployed by a `deploy_agent` step. `agent` is None for the external driver
    (the episode SDK's caller plays it)."""

    name: str
    role: str
    env_ids: list[str]
    agent: Agent | None
    system_prompt: str | None = None
    config: dict[str, Any] = field(default_factory=dict)


@dataclass
class PromptRecord:
    """One `prompt_agent` exchange: what was asked, what came back, where it is recorded."""

    prompt_id: str
    agent_name: str
    prompt: str
    started: datetime
    start_seq: dict[str, int]
    initial: dict[str, Snapshot]
    response: str | None = None
    end_seq: dict[str, int] = field(default_factory=dict)
    final: dict[str, Snapshot] = field(default_factory=dict)
    messages: list[dict[str, str]] = field(
        default_factory=list, metadata={"doc": "A conversation's messages, both sides."}
    )
    ended: datetime | None = None
    error: str | None = None


TurnDriver = Callable[["AgentTurn"], Awaitable[str]]
"""Plays the external agent's turns (the episode SDK)."""


@dataclass
class TaskContext:
    """The shared state of one task run."""

    task: TaskSpec
    seed: dict[str, Any] = field(default_factory=dict)
    base_dir: Path = field(default_factory=Path.cwd)
    run_dir: Path | None = None
    env_resolver: Callable[[str], Environment] | None = None
    agent_factory: Callable[[DeployedAgentRequest], Agent | None] | None = None
    driver: TurnDriver | None = None
    envs: dict[str, DeployedEnv] = field(default_factory=dict)
    agents: dict[str, DeployedAgent] = field(default_factory=dict)
    prompts: dict[str, PromptRecord] = field(default_factory=dict)
    snapshots: dict[str, dict[str, Snapshot]] = field(default_factory=dict)
    outputs: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, Score] = field(default_factory=dict)
    artifacts: dict[str, Any] = field(default_factory=dict)
    peers: dict[str, str] = field(
        default_factory=dict, metadata={"doc": "A2A URLs of agents, by name (peer_agents)."}
    )
    agent_peers: dict[str, dict[str, str]] = field(
        default_factory=dict,
        metadata={"doc": "Per agent name, the peers only it may address (peerings)."},
    )
    usage: dict[str, list[dict[str, Any]]] = field(
        default_factory=dict, metadata={"doc": "Token usage per prompt_id, per agent turn."}
    )
    sandboxes: dict[str, DeployedSandbox] = field(
        default_factory=dict, metadata={"doc": "Sandboxes by name (deploy_sandbox)."}
    )
    cleanups: list[Callable[[], Awaitable[None]]] = field(
        default_factory=list,
        metadata={"doc": "Run when the task run ends, last added first (servers to stop)."},
    )

    def env(self, env_id: str | None = None) -> DeployedEnv:
        """A deployed environment; with no id, the only one."""
        if env_id is None:
            if len(self.envs) != 1:
                known = ", ".join(self.envs) or "none deployed"
                raise StepError(f"name the env_id: the task has {len(self.envs)} ({known})")
            return next(iter(self.envs.values()))
        try:
            return self.envs[env_id]
        except KeyError:
            known = ", ".join(self.envs) or "none deployed"
            raise StepError(f"no environment {env_id!r} is deployed ({known})") from None

    def agent(self, name: str | None = None) -> DeployedAgent:
        """A deployed agent; with no name, the only one."""
        if name is None:
            if len(self.agents) != 1:
                known = ", ".join(self.agents) or "none deployed"
                raise StepError(f"name the agent: the task has {len(self.agents)} ({known})")
            return next(iter(self.agents.values()))
        try:
            return self.agents[name]
        except KeyError:
            known = ", ".join(self.agents) or "none deployed"
            raise StepError(f"no agent {name!r} is deployed ({known})") from None

    def sandbox(self, name: str) -> DeployedSandbox:
        """A sandbox a `deploy_sandbox` step made."""
        try:
            box = self.sandboxes[name]
        except KeyError:
            known = ", ".join(self.sandboxes) or "none deployed"
            raise StepError(f"no sandbox {name!r} is deployed ({known})") from None
        if box.destroyed:
            raise StepError(f"sandbox {name!r} was torn down (teardown_sandboxes)")
        return box

    def tool_client(
        self, principal: Principal, env_ids: list[str], session: str | None = None
    ) -> ToolClient:
        """A client calling as `principal` on the given deployed environments."""
        bindings = [Binding(e, self.env(e).gateway, self.env(e).instance) for e in env_ids]
        return ToolClient(principal, bindings, session=session)

    def system_client(self, env_id: str | None = None) -> ToolClient:
        """A client calling as the system principal (for setup and checks)."""
        deployed = self.env(env_id)
        return self.tool_client(SYSTEM, [deployed.env_id])

    def peers_of(self, agent_name: str) -> dict[str, str]:
        """The peers an agent may address: the task's, then its own (peerings)."""
        return {**self.peers, **self.agent_peers.get(agent_name, {})}

    def checkpoint(self) -> dict[str, Snapshot]:
        """Snapshots of every deployed environment now (retries roll back to these)."""
        return {env_id: d.snapshot() for env_id, d in self.envs.items()}


@dataclass
class DeployedAgentRequest:
    """What a `deploy_agent` step asks for; the run decides which agent answers."""

    agent_name: str
    role: str
    env_ids: list[str]
    a2a_agent_id: str | None = None
    system_prompt: str | None = None
