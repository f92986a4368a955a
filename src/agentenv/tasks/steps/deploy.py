"""Deploy and setup steps: deploy_env, deploy_agent, peer_agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentenv.agents.a2a import require_sdk
from agentenv.agents.base import Agent, AgentError
from agentenv.agents.registry import make_agent
from agentenv.env.environment import Environment
from agentenv.gateway import Gateway, GatewayError
from agentenv.registry import RegistryError
from agentenv.spec.environment import GatewayMode
from agentenv.spec.errors import DocumentError
from agentenv.tasks.context import DeployedAgent, DeployedAgentRequest, DeployedEnv, TaskContext
from agentenv.tasks.env_fields import env_problems, env_problems_message
from agentenv.tasks.remote import (
    bind_remote,
    is_remote,
    peer_url,
    resolve_a2a,
    task_nl_sender,
)
from agentenv.tasks.step import STEPS, Step, StepError, Unhonoured


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DeployEnvParams(_Params):
    """Fields of `deploy_env` (the protocol's `env_id` and `metadata`; `env` is ours)."""

    env_id: str = Field(description="The name other steps use for this environment.")
    env: str | None = Field(
        default=None,
        description="Ours: a bundle environment's name, or a path to its document. "
        "Default: `env_id`, found as the protocol finds it (the bundle's envs/<id>/, an "
        "alias in its aliases.toml, then the local catalog).",
    )
    metadata: dict[str, Any] = Field(default_factory=dict, description="Kept in the output.")
    gateway_mode: GatewayMode | None = Field(
        default=None,
        description="consistent (one call at a time per instance) or performance; default: "
        "the environment's own `gateway_mode` (upstream's default is performance).",
    )


_IN_PROCESS = "environments run in this process, for as long as the task run"


@STEPS.add_builtin
class DeployEnv(Step):
    """Start an environment: a gateway with a fresh instance forked from its seed."""

    type_name = "deploy_env"
    Params = DeployEnvParams
    unhonoured = {
        "env_version": Unhonoured("environments are not versioned here; the current document runs"),
        "ttl_seconds": Unhonoured(_IN_PROCESS),
        "disk_size_gb": Unhonoured(_IN_PROCESS),
        "cpu": Unhonoured(_IN_PROCESS),
        "memory_mb": Unhonoured(_IN_PROCESS),
        "sandbox_type": Unhonoured(_IN_PROCESS, honoured=("local", "none")),
        "env_state_type": Unhonoured("state lives in the environment's own store"),
        "env_state_instance_id": Unhonoured(
            "attaching to an existing env state instance is not built", refuse=True
        ),
        "artifact_id": Unhonoured(
            "deploying an environment from an artifact is not built (seed it with load_artifact)",
            refuse=True,
        ),
        "artifact_version": Unhonoured("goes with artifact_id", refuse=True),
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: DeployEnvParams = self.params  # type: ignore[assignment]
        if p.env_id in ctx.envs:
            raise StepError(f"env_id {p.env_id!r} is already deployed")
        env = resolve_env(ctx, p.env if p.env is not None else p.env_id)
        # Bound to its environment: checks naming what it cannot have fail the task now.
        problems = env_problems(ctx.task, p.env_id, env, ctx.seed)
        if problems:
            raise StepError(env_problems_message(ctx.task, p.env_id, problems))
        try:
            gateway = Gateway(env, mode=p.gateway_mode)
        except GatewayError as exc:
            raise StepError(f"environment {p.env!r}: {exc}") from None
        gateway.nl_sender = task_nl_sender(ctx, p.env_id, gateway)  # nl actions over A2A
        ctx.envs[p.env_id] = DeployedEnv(p.env_id, env, gateway)
        return {
            "env_id": p.env_id,
            "name": env.name,
            "version": env.version,
            "tools": len(env.tools),
            "gateway_mode": gateway.mode,
            **({"metadata": p.metadata} if p.metadata else {}),
        }


def resolve_env(ctx: TaskContext, ref: str) -> Environment:
    """An environment by bundle name or alias (through the run's resolver), by path, or
    from the local catalog (`tasks.bundle.catalog_env_path`)."""
    from agentenv.tasks.bundle import catalog_env_path

    try:
        if ctx.env_resolver is not None:
            found = ctx.env_resolver(ref)
            if found is not None:
                return found
        path = Path(ref)
        if not path.is_absolute():
            path = ctx.base_dir / path
        if path.exists():
            return Environment.load(path)
        catalog = catalog_env_path(ref)
        if catalog is not None:
            return Environment.load(catalog)
        raise StepError(
            f"no environment {ref!r} (not in the bundle or its aliases.toml, no such path "
            f"{path}, not in the local catalog)"
        )
    except DocumentError as exc:
        raise StepError(str(exc)) from None


DEFAULT_AGENT_NAME = "default-agent"
_AGENT_RUNS_HERE = "the agent is the run's (--agent), run by this process"
_DEPLOY_AGENT_UNHONOURED = {
    "sandbox_type": Unhonoured(_AGENT_RUNS_HERE, honoured=("local", "none")),
    "ttl_seconds": Unhonoured(_AGENT_RUNS_HERE),
    "cpu": Unhonoured(_AGENT_RUNS_HERE),
    "memory_mb": Unhonoured(_AGENT_RUNS_HERE),
    "disk_size_gb": Unhonoured(_AGENT_RUNS_HERE),
    "sandbox_name": Unhonoured(_AGENT_RUNS_HERE),
    "enable_docker": Unhonoured(_AGENT_RUNS_HERE, honoured=(False,)),
    "network_policy": Unhonoured("agents are not network-sandboxed here"),
    "env_vars": Unhonoured(
        "the run's agent is configured by the run, not the task", honoured=({},)
    ),
    "skills": Unhonoured("skills are not installed into agents here", honoured=([],)),
    "litellm_base_url": Unhonoured("the run's agent picks its model endpoint"),
    "a2a_agent_version": Unhonoured("A2A agents are not versioned here; a2a_agent_id is used"),
    "env_step_id": Unhonoured("an env id is deployed once per task here, so it is unambiguous"),
    "enable_agent_changelog": Unhonoured("agent changelogs are not built", honoured=(False,)),
    "agent_changelog_object_url": Unhonoured("agent changelogs are not built", refuse=True),
    "agent_changelog_toolcall_position_exclusive": Unhonoured(
        "agent changelogs are not built", refuse=True
    ),
    "agent_snapshot_files_artifact_id": Unhonoured(
        "restoring an agent snapshot is not built", refuse=True
    ),
    "agent_snapshot_files_artifact_version": Unhonoured(
        "restoring an agent snapshot is not built", refuse=True
    ),
    "agent_snapshot_target_context_id": Unhonoured(
        "restoring an agent snapshot is not built", refuse=True
    ),
}


class DeployAgentParams(_Params):
    """Fields of `deploy_agent` (the protocol's)."""

    agent_name: str = Field(default=DEFAULT_AGENT_NAME, description="The protocol's default.")
    env_ids: list[str] | None = Field(default=None, description="Default: every deployed env.")
    a2a_agent_id: str | None = None
    role: str | None = Field(default=None, description="Default: the environment's default role.")
    system_prompt: str | None = None
    agent_description: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict, description="Kept in the output.")
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
    unhonoured = _DEPLOY_AGENT_UNHONOURED

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


class AgentPeers(_Params):
    """One entry of the protocol's `peerings`: the peers one agent may address."""

    source_agent_name: str
    peer_agent_names: list[str] = Field(min_length=1)


class PeerAgentsParams(_Params):
    """Fields of `peer_agents`: the protocol's `peerings`, or our `agents`."""

    peerings: list[AgentPeers] | None = Field(
        default=None,
        description="Per agent, the deployed agents it may address (each served over A2A).",
    )
    agents: dict[str, str] | list[str] | None = Field(
        default=None,
        description="Ours: peers every agent may address, by name: `{name: A2A base URL}`, "
        "or names of deployed agents (a remote one by its URL; a local one is served over "
        "A2A from this process).",
    )

    @model_validator(mode="after")
    def _one_form(self) -> PeerAgentsParams:
        if (self.peerings is None) == (self.agents is None):
            raise ValueError("give exactly one of 'peerings' or 'agents'")
        if self.peerings is not None and not self.peerings:
            raise ValueError("'peerings' is empty")
        return self


@STEPS.add_builtin
class PeerAgents(Step):
    """Let agents address each other over A2A. `peerings` gives each source agent its own
    table; `agents` fills the task's peers, which every agent gets. Every later prompt
    passes its agent's peers (`AgentTurn.peers`; a remote agent gets them under
    urn:agentenv:peer-agents/v1), and `deploy_agent`'s `a2a_agent_id` may name them."""

    type_name = "peer_agents"
    Params = PeerAgentsParams

    async def run(self, ctx: TaskContext) -> Any:
        p: PeerAgentsParams = self.params  # type: ignore[assignment]
        try:
            require_sdk()
        except AgentError as exc:
            raise StepError(str(exc)) from None
        if p.peerings is not None:
            return await self._peerings(ctx, p.peerings)
        from agentenv.agents.a2a.client import check_url

        added: dict[str, str] = {}
        if isinstance(p.agents, dict):
            for name, url in p.agents.items():
                try:
                    added[name] = check_url(url)
                except AgentError as exc:
                    raise StepError(f"agents.{name}: {exc}") from None
        else:
            for name in p.agents or []:
                added[name] = await peer_url(ctx, ctx.agent(name))
        ctx.peers.update(added)
        return {"peers": added}

    async def _peerings(self, ctx: TaskContext, peerings: list[AgentPeers]) -> Any:
        seen: set[str] = set()
        for i, peering in enumerate(peerings):  # everything is checked before anything is served
            source = peering.source_agent_name
            where = f"peerings[{i}]"
            if source in seen:
                raise StepError(f"{where}: source {source!r} is listed twice")
            seen.add(source)
            ctx.agent(source)
            if source in peering.peer_agent_names:
                raise StepError(f"{where}: {source!r} lists itself as a peer")
            for name in peering.peer_agent_names:
                ctx.agent(name)
        tables: dict[str, dict[str, str]] = {}
        for peering in peerings:
            table = {n: await peer_url(ctx, ctx.agent(n)) for n in peering.peer_agent_names}
            ctx.agent_peers.setdefault(peering.source_agent_name, {}).update(table)
            tables[peering.source_agent_name] = table
        return {"peerings": tables}
