"""Deploy and setup steps: deploy_env, deploy_agent, peer_agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentenv.agents.a2a import require_sdk
from agentenv.agents.base import Agent, AgentError
from agentenv.agents.registry import make_agent
from agentenv.env.environment import Environment
from agentenv.gateway import Gateway, GatewayError
from agentenv.registry import RegistryError
from agentenv.spec.errors import DocumentError
from agentenv.tasks.context import DeployedAgent, DeployedAgentRequest, DeployedEnv, TaskContext
from agentenv.tasks.remote import (
    bind_remote,
    is_remote,
    peer_url,
    resolve_a2a,
    task_nl_sender,
)
from agentenv.tasks.step import STEPS, Step, StepError


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeployEnvParams(_Params):
    """Fields of `deploy_env`."""

    env_id: str = Field(description="The name other steps use for this environment.")
    env: str = Field(description="A bundle environment's name, or a path to its document.")


@STEPS.add_builtin
class DeployEnv(Step):
    """Start an environment: a gateway with a fresh instance forked from its seed."""

    type_name = "deploy_env"
    Params = DeployEnvParams

    async def run(self, ctx: TaskContext) -> Any:
        p: DeployEnvParams = self.params  # type: ignore[assignment]
        if p.env_id in ctx.envs:
            raise StepError(f"env_id {p.env_id!r} is already deployed")
        env = resolve_env(ctx, p.env)
        try:
            gateway = Gateway(env)
        except GatewayError as exc:
            raise StepError(f"environment {p.env!r}: {exc}") from None
        gateway.nl_sender = task_nl_sender(ctx, p.env_id, gateway)  # nl actions over A2A
        ctx.envs[p.env_id] = DeployedEnv(p.env_id, env, gateway)
        return {
            "env_id": p.env_id,
            "name": env.name,
            "version": env.version,
            "tools": len(env.tools),
        }


def resolve_env(ctx: TaskContext, ref: str) -> Environment:
    """An environment by bundle name (through the run's resolver) or by path."""
    try:
        if ctx.env_resolver is not None:
            found = ctx.env_resolver(ref)
            if found is not None:
                return found
        path = Path(ref)
        if not path.is_absolute():
            path = ctx.base_dir / path
        if not path.exists():
            raise StepError(f"no environment {ref!r} (not in the bundle, no such path {path})")
        return Environment.load(path)
    except DocumentError as exc:
        raise StepError(str(exc)) from None


class DeployAgentParams(_Params):
    """Fields of `deploy_agent` (the protocol's)."""

    agent_name: str
    env_ids: list[str] | None = Field(default=None, description="Default: every deployed env.")
    a2a_agent_id: str | None = None
    role: str | None = Field(default=None, description="Default: the environment's default role.")
    sandbox_type: str | None = None
    system_prompt: str | None = None
    env_vars: dict[str, str] = Field(default_factory=dict)
    skills: list[str] = Field(default_factory=list)
    ttl_seconds: float | None = None
    agent: str | None = Field(
        default=None,
        description="Ours: pin the agent that plays this part (e.g. `simulated-user` for "
        "the user of a conversation); unset, the run's agent plays it.",
    )
    agent_config: dict[str, Any] = Field(
        default_factory=dict, description="Ours: options the pinned agent reads from its turns."
    )


@STEPS.add_builtin
class DeployAgent(Step):
    """Make an agent available to later `prompt_agent` steps, bound to a role on its envs.

    Which agent plays it is the run's choice (`agent-env run --agent`, or the episode SDK's
    caller), so the same task runs against any agent.
    """

    type_name = "deploy_agent"
    Params = DeployAgentParams

    async def run(self, ctx: TaskContext) -> Any:
        p: DeployAgentParams = self.params  # type: ignore[assignment]
        if p.agent_name in ctx.agents:
            raise StepError(f"agent {p.agent_name!r} is already deployed")
        env_ids = p.env_ids if p.env_ids is not None else list(ctx.envs)
        if not env_ids:
            raise StepError("no environment to bind the agent to: deploy_env first")
        for env_id in env_ids:
            ctx.env(env_id)
        env_ids = list(dict.fromkeys(env_ids))  # the same env twice is one binding
        role = p.role or ctx.env(env_ids[0]).env.default_role
        for env_id in env_ids:
            declared = ctx.env(env_id).env.roles
            if role not in declared:
                raise StepError(
                    f"role {role!r} is not a role of environment {env_id!r} "
                    f"(roles: {', '.join(declared)})"
                )
        if p.sandbox_type not in (None, "local", "none"):
            raise StepError(f"sandbox_type {p.sandbox_type!r} is not built yet (only local)")
        if p.a2a_agent_id is not None and p.agent is not None:
            raise StepError("give at most one of 'a2a_agent_id' and 'agent'")
        request = DeployedAgentRequest(
            agent_name=p.agent_name,
            role=role,
            env_ids=env_ids,
            a2a_agent_id=p.a2a_agent_id,
            system_prompt=p.system_prompt,
        )
        if p.a2a_agent_id is not None:  # a remote agent, pinned by the task
            try:
                require_sdk()
                from agentenv.agents.a2a.client import RemoteA2AAgent

                agent: Agent | None = RemoteA2AAgent(resolve_a2a(ctx, p.a2a_agent_id))
            except AgentError as exc:
                raise StepError(str(exc)) from None
        elif p.agent is not None:  # pinned by the task: part of the task, not the policy
            try:
                agent = make_agent(p.agent)
            except RegistryError as exc:
                raise StepError(str(exc)) from None
        else:
            if ctx.agent_factory is None and ctx.driver is None:
                raise StepError(f"no agent was given to play {p.agent_name!r} (use --agent)")
            agent = ctx.agent_factory(request) if ctx.agent_factory is not None else None
            if agent is None and ctx.driver is None:
                raise StepError(f"no agent was given to play {p.agent_name!r}")
        if is_remote(agent):  # it reaches its envs over MCP: serve them, with a token of its own
            agent = await bind_remote(ctx, agent, env_ids, role, p.agent_name)  # type: ignore[arg-type]
        ctx.agents[p.agent_name] = DeployedAgent(
            name=p.agent_name,
            role=role,
            env_ids=env_ids,
            agent=agent,
            system_prompt=p.system_prompt,
            config=dict(p.agent_config),
        )
        return {
            "agent_name": p.agent_name,
            "role": role,
            "env_ids": env_ids,
            "agent": getattr(agent, "name", "driver"),
            **({"a2a_url": agent.url} if is_remote(agent) else {}),  # type: ignore[union-attr]
        }


class PeerAgentsParams(_Params):
    """Fields of `peer_agents`."""

    agents: dict[str, str] | list[str] = Field(
        description="Peers by name: `{name: A2A base URL}`, or names of deployed agents "
        "(a remote one by its URL; a local one is served over A2A from this process)."
    )


@STEPS.add_builtin
class PeerAgents(Step):
    """Let agents address each other over A2A: fills the task's peers, which every later
    prompt passes to its agent (`AgentTurn.peers`; a remote agent gets them under
    urn:agentenv:peer-agents/v1), and which `deploy_agent`'s `a2a_agent_id` may name."""

    type_name = "peer_agents"
    Params = PeerAgentsParams

    async def run(self, ctx: TaskContext) -> Any:
        p: PeerAgentsParams = self.params  # type: ignore[assignment]
        try:
            require_sdk()
        except AgentError as exc:
            raise StepError(str(exc)) from None
        from agentenv.agents.a2a.client import check_url

        added: dict[str, str] = {}
        if isinstance(p.agents, dict):
            for name, url in p.agents.items():
                try:
                    added[name] = check_url(url)
                except AgentError as exc:
                    raise StepError(f"agents.{name}: {exc}") from None
        else:
            for name in p.agents:
                added[name] = await peer_url(ctx, ctx.agent(name))
        ctx.peers.update(added)
        return {"peers": added}
