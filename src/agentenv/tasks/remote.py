"""Agents over A2A in a task: serving a deployed environment to them, binding them, peers.

A remote agent reaches its environment the way any outside client does: over MCP, on
HTTP. So when a task deploys one, the env's gateway is served on a free 127.0.0.1 port
(once per deployed env), and the agent gets a fresh random bearer token of its own,
which the server maps to the agent's role and name: its calls are recorded exactly as an
in-process agent's would be (role, principal = agent name, session = prompt_id). Tokens
never reach the control plane. The servers stop when the task run ends (`ctx.cleanups`),
so nothing an episode started outlives it, and a token is worth nothing afterwards.

Everything a2a-sdk is imported on first use: a task with no remote agent never loads it.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentenv.agents.a2a.mcp_tools import McpConfig
from agentenv.agents.base import Agent, AgentError
from agentenv.env.tool import Principal
from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator, AuthError
from agentenv.gateway.errors import DEFAULT_INSTANCE
from agentenv.gateway.firing import NlInstruction, NlSender
from agentenv.tasks.context import DeployedAgent, DeployedEnv, TaskContext
from agentenv.tasks.step import StepError

if TYPE_CHECKING:
    from agentenv.agents.a2a.client import RemoteA2AAgent
    from agentenv.serve.background import BackgroundServer

LOOPBACK = "127.0.0.1"
EXECUTOR = "executor"  # the principal name of nl executors


class AgentTokens(Authenticator):
    """Bearer tokens handed to a task's agents, each naming its agent and role. Only a
    token counts (the role header grants nothing), and none reaches the control plane."""

    def __init__(self, default_role: str) -> None:
        super().__init__(None, trusted_local=False, default_role=default_role)
        self._issued: dict[tuple[str, str], str] = {}  # (role, name) -> secret

    def issue(self, role: str, name: str) -> str:
        """The token of `name` acting as `role` (made once, then the same)."""
        key = (role, name)
        if key not in self._issued:
            self._issued[key] = secrets.token_urlsafe(32)
        return self._issued[key]

    def principal(self, role_header: str | None, authorization: str | None) -> Principal:
        """The agent a token was issued to."""
        if not authorization or not authorization.lower().startswith("bearer "):
            raise AuthError("a bearer token is required (Authorization: Bearer <token>)")
        given = authorization[7:].strip().encode()
        for (role, name), secret in self._issued.items():
            if hmac.compare_digest(secret.encode(), given):
                return Principal(role=role, name=name, admin=False)
        raise AuthError("unknown bearer token")


@dataclass
class ServedGateway:
    """A deployed env's gateway served over HTTP, with the tokens handed out for it."""

    server: BackgroundServer
    tokens: AgentTokens

    @property
    def url(self) -> str:
        """The base URL."""
        return self.server.url

    def mcp_url(self, instance: str) -> str:
        """The MCP endpoint of an instance."""
        path = "/mcp" if instance == DEFAULT_INSTANCE else f"/instances/{instance}/mcp"
        return self.server.url + path

    def config(self, env_id: str, instance: str, role: str, name: str) -> McpConfig:
        """What an agent is told: where, with its own credential, as whom."""
        return McpConfig(
            url=self.mcp_url(instance),
            token=self.tokens.issue(role, name),
            role=role,
            env_id=env_id,
        )


async def _start(ctx: TaskContext, deployed: DeployedEnv) -> ServedGateway:
    import uvicorn

    from agentenv.serve.background import BackgroundServer
    from agentenv.serve.rest import create_app

    tokens = AgentTokens(deployed.env.default_role)

    def build(port: int) -> uvicorn.Server:
        app = create_app(deployed.gateway, auth=tokens, loopback=True)
        config = uvicorn.Config(
            app,
            host=LOOPBACK,
            port=port,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
        return uvicorn.Server(config)

    server = await BackgroundServer.start(build, host=LOOPBACK)
    ctx.cleanups.append(server.stop)
    return ServedGateway(server, tokens)


async def serve_gateway(ctx: TaskContext, deployed: DeployedEnv) -> ServedGateway:
    """The env's gateway served over HTTP: started on first use, then shared (concurrent
    deploys wait for the same start)."""
    pending = deployed.served
    if pending is None:
        pending = asyncio.ensure_future(_start(ctx, deployed))
        deployed.served = pending
    try:
        return await asyncio.shield(pending)
    except Exception as exc:
        deployed.served = None
        raise StepError(f"cannot serve environment {deployed.env_id!r}: {exc}") from None


async def configs_for(
    ctx: TaskContext, env_ids: list[str], role: str, name: str
) -> list[McpConfig]:
    """Where an agent acts: each env's served MCP endpoint, with a token of its own."""
    configs = []
    for env_id in env_ids:
        deployed = ctx.env(env_id)
        served = await serve_gateway(ctx, deployed)
        configs.append(served.config(env_id, deployed.instance, role, name))
    return configs


def is_remote(agent: Agent | None) -> bool:
    """Whether the agent is a RemoteA2AAgent (without importing a2a-sdk to find out)."""
    module = sys.modules.get("agentenv.agents.a2a.client")
    return module is not None and isinstance(agent, module.RemoteA2AAgent)


def resolve_a2a(ctx: TaskContext, ref: str) -> str:
    """`a2a_agent_id`: an http(s) base URL, or the name of a peer (`peer_agents`)."""
    if ref.startswith(("http://", "https://")):
        return ref
    if ref in ctx.peers:
        return ctx.peers[ref]
    known = ", ".join(sorted(ctx.peers)) or "none yet; declare them with peer_agents"
    raise StepError(f"a2a_agent_id {ref!r} is neither an http(s) URL nor a peer ({known})")


async def bind_remote(
    ctx: TaskContext, agent: RemoteA2AAgent, env_ids: list[str], role: str, name: str
) -> RemoteA2AAgent:
    """Check the remote agent's card, serve its environments to it (a token for its name
    and role), and return the agent bound to them."""
    try:
        await agent.card()
    except AgentError as exc:
        raise StepError(str(exc)) from None
    return agent.bind(await configs_for(ctx, env_ids, role, name))


async def peer_url(ctx: TaskContext, deployed: DeployedAgent) -> str:
    """A deployed agent's A2A URL: a remote agent's own, or a local agent served over
    A2A from this process, acting in its environments as its role."""
    if deployed.name in ctx.peers:
        return ctx.peers[deployed.name]
    if is_remote(deployed.agent):
        return deployed.agent.url  # type: ignore[union-attr]
    if deployed.agent is None:
        raise StepError(
            f"agent {deployed.name!r} is played by the episode's caller and cannot be "
            "served over A2A"
        )
    from agentenv.agents.a2a.server import serve_agent

    configs = await configs_for(ctx, deployed.env_ids, deployed.role, deployed.name)
    server = await serve_agent(deployed.agent, host=LOOPBACK, mcp=configs, name=deployed.name)
    ctx.cleanups.append(server.stop)
    return str(server.url)


def task_nl_sender(ctx: TaskContext, env_id: str, gateway: Gateway) -> NlSender:
    """The nl sender of a task's gateway: the executor agent gets the gateway served for
    its role (default: the env's default role), so it can act."""
    from agentenv.agents.a2a.nl import a2a_nl_sender

    async def locate(request: NlInstruction) -> McpConfig | None:
        deployed = ctx.envs.get(env_id)
        if deployed is None or deployed.gateway is not gateway:
            return None  # the env was rolled back and redeployed: this gateway is done
        executor: Any = request.executor
        role = (executor.role if executor else None) or deployed.env.default_role
        served = await serve_gateway(ctx, deployed)
        return served.config(env_id, request.instance, role, EXECUTOR)

    return a2a_nl_sender(locate)
