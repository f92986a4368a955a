"""The AgentEnv extensions a served agent declares on its card, and their HTTP endpoints.

Upstream AgentEnv configures an agent before prompting it: it POSTs the environment's MCP
endpoint to the card's `urn:agentenv:mcp-config/v1` endpoint (`/ext/mcp-config`), the
task's other agents to `urn:agentenv:peer-agents/v1` (`/ext/peer-agents`), and reads a
finished task's trajectory from `urn:agentenv:trajectory/v1` (`/ext/trajectory`). The card
describes each as `params = {endpoint, methods: {name: {method, request?, response?}}}`.

It also sets the agent's configuration through `urn:agentenv:agent-config/v1`
(`/ext/agent-config`: only the fields the card lists as `supported`).

We declare those four with upstream's names and shapes and serve their endpoints; our
own way of saying the same per message (metadata under the extension's URI) rides along
as ADDED `params` keys. What a registration sets holds for every later request that does
not name its own environment. See docs/a2a.md for what we do not honour.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from a2a.types import AgentExtension
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentenv.agents.a2a import (
    AGENT_CONFIG_URI,
    MCP_CONFIG_URI,
    PEER_AGENTS_URI,
    SOLUTION_URI,
    TRAJECTORY_URI,
)
from agentenv.agents.a2a.mcp_tools import ROLE_HEADER, McpConfig
from agentenv.agents.a2a.request import TurnRequest

MCP_CONFIG_PATH = "/ext/mcp-config"
PEER_AGENTS_PATH = "/ext/peer-agents"
TRAJECTORY_PATH = "/ext/trajectory"
AGENT_CONFIG_PATH = "/ext/agent-config"
KEPT_TRAJECTORIES = 256  # finished tasks whose trajectory can still be read


# -- request bodies (upstream's field names; unknown fields are refused, as upstream does) --


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class McpAdd(_Body):
    """`POST /ext/mcp-config`: one MCP server the agent should act in."""

    url: str
    headers: dict[str, str] | None = None
    name: str | None = None


class Peer(_Body):
    """One other agent, as upstream's `peer-agents` `set` names it."""

    name: str
    url: str
    card: dict[str, Any] = Field(default_factory=dict)
    description: str | None = None


class PeersSet(_Body):
    """`POST /ext/peer-agents`: every peer (replaces the earlier set)."""

    peers: list[Peer]


class AgentConfigSet(_Body):
    """`POST /ext/agent-config`: settings for every later turn (upstream's field names;
    a turn's own metadata still wins)."""

    name: str | None = None
    description: str | None = None
    role: str | None = None
    system_prompt: str | None = None
    model: str | None = None
    max_turns: int | None = Field(default=None, ge=1)
    model_params: dict[str, Any] | None = None
    timeout_seconds: int | None = Field(default=None, gt=0)


AGENT_CONFIG_FIELDS = sorted(AgentConfigSet.model_fields)


class TrajectoryGet(_Body):
    """`POST /ext/trajectory`: the trajectory of one finished task."""

    task_id: str


def config_from_registration(body: McpAdd) -> McpConfig:
    """An `McpConfig` for an upstream-style registration: a bearer `Authorization` header
    becomes the token, `AgentEnv-Role` the role, the name the env_id; every header is
    still sent as it was given."""
    headers = dict(body.headers or {})
    lowered = {k.lower(): v for k, v in headers.items()}
    auth = lowered.get("authorization", "")
    token = auth[7:].strip() if auth.lower().startswith("bearer ") else None
    return McpConfig(
        url=body.url.strip(),
        token=token or None,
        role=lowered.get(ROLE_HEADER.lower()) or None,
        env_id=body.name,
        headers_extra=tuple(headers.items()),
    )


@dataclass
class AgentSetup:
    """What upstream-style configuration calls have set on a served agent."""

    mcp: OrderedDict[str, McpConfig] = field(default_factory=OrderedDict)
    peers: dict[str, Peer] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    trajectories: OrderedDict[str, dict[str, Any]] = field(default_factory=OrderedDict)

    def configs(self) -> list[McpConfig]:
        """The registered environments, in the order they were added."""
        return list(self.mcp.values())

    def peer_urls(self) -> dict[str, str]:
        """The registered peers as a turn's `peers` (`{name: A2A URL}`)."""
        return {name: peer.url for name, peer in self.peers.items()}

    def apply(self, request: TurnRequest) -> float | None:
        """Fill what the request leaves unsaid from the registered peers and agent-config;
        the turn's time limit agent-config set (None: the server's own)."""
        request.peers = {**self.peer_urls(), **request.peers}
        cfg = self.config
        request.agent_name = request.agent_name or cfg.get("name")
        request.system_prompt = request.system_prompt or cfg.get("system_prompt")
        request.model = request.model or cfg.get("model")
        if request.max_turns is None:
            request.max_turns = cfg.get("max_turns")
        request.model_params = request.model_params or dict(cfg.get("model_params") or {})
        role = cfg.get("role")
        if role:
            request.role = request.role or role
            # An environment registered with no credential acts as the configured role.
            request.configs = [
                c if c.token or c.role else dataclasses.replace(c, role=role)
                for c in request.configs
            ]
        timeout = cfg.get("timeout_seconds")
        return float(timeout) if timeout else None

    def keep_trajectory(self, task_id: str, trajectory: dict[str, Any]) -> None:
        """Remember a finished task's trajectory (the oldest are forgotten first)."""
        self.trajectories[task_id] = trajectory
        while len(self.trajectories) > KEPT_TRAJECTORIES:
            self.trajectories.popitem(last=False)


def _problem(status: int, detail: str) -> JSONResponse:
    """An error the way upstream's agents answer one: `{detail}` with the status."""
    return JSONResponse({"detail": detail}, status_code=status)


async def _body(request: Request, model: type[_Body]) -> _Body | JSONResponse:
    raw = await request.body()
    try:
        payload = json.loads(raw) if raw else {}
    except ValueError as exc:
        return _problem(400, f"the body is not JSON: {exc}")
    if not isinstance(payload, dict):
        return _problem(400, "the body must be a JSON object")
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        where = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()
        )
        return _problem(400, where)


def extension_routes(setup: AgentSetup) -> list[Route]:
    """The `/ext/...` endpoints that change or read `setup`."""

    async def mcp_add(request: Request) -> JSONResponse:
        body = await _body(request, McpAdd)
        if isinstance(body, JSONResponse):
            return body
        assert isinstance(body, McpAdd)
        url = body.url.strip()
        if not url:
            return _problem(400, "url must not be empty")
        for name, existing in setup.mcp.items():
            if existing.url == url:
                return _problem(409, f"MCP URL '{url}' is already registered as '{name}'")
        name = body.name or f"mcp_{uuid.uuid4().hex[:8]}"
        if name in setup.mcp:
            return _problem(409, f"MCP name '{name}' is already registered")
        try:
            config = config_from_registration(body.model_copy(update={"name": name}))
        except ValueError as exc:
            return _problem(400, str(exc))
        setup.mcp[name] = config
        return JSONResponse({"status": "added", "name": name, "url": url})

    async def mcp_list(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "mcp_servers": {
                    name: {"url": c.url, "has_headers": bool(c.headers_extra)}
                    for name, c in setup.mcp.items()
                }
            }
        )

    async def peers_set(request: Request) -> JSONResponse:
        body = await _body(request, PeersSet)
        if isinstance(body, JSONResponse):
            return body
        assert isinstance(body, PeersSet)
        names = [p.name for p in body.peers]
        if len(set(names)) != len(names):
            return _problem(400, "peer names must be unique")
        setup.peers = {p.name: p for p in body.peers}
        return JSONResponse({"status": "updated", "peers": len(names)})

    async def peers_list(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "peers": [
                    p.model_dump(exclude_none=True, exclude={"card"}) for p in setup.peers.values()
                ]
            }
        )

    async def config_set(request: Request) -> JSONResponse:
        body = await _body(request, AgentConfigSet)
        if isinstance(body, JSONResponse):
            return body
        setup.config.update(body.model_dump(exclude_unset=True))
        return JSONResponse({"status": "updated"})

    async def config_get(request: Request) -> JSONResponse:
        return JSONResponse({"config": {k: v for k, v in setup.config.items() if v is not None}})

    async def trajectory_get(request: Request) -> JSONResponse:
        body = await _body(request, TrajectoryGet)
        if isinstance(body, JSONResponse):
            return body
        assert isinstance(body, TrajectoryGet)
        trajectory = setup.trajectories.get(body.task_id)
        if trajectory is None:
            return _problem(404, f"No completed trajectory available for task '{body.task_id}'")
        return JSONResponse({"trajectory": trajectory})

    return [
        Route(MCP_CONFIG_PATH, mcp_add, methods=["POST"]),
        Route(MCP_CONFIG_PATH, mcp_list, methods=["GET"]),
        Route(PEER_AGENTS_PATH, peers_set, methods=["POST"]),
        Route(PEER_AGENTS_PATH, peers_list, methods=["GET"]),
        Route(AGENT_CONFIG_PATH, config_set, methods=["POST"]),
        Route(AGENT_CONFIG_PATH, config_get, methods=["GET"]),
        Route(TRAJECTORY_PATH, trajectory_get, methods=["POST"]),
    ]


# -- the card ----------------------------------------------------------------------------------


def _method(
    verb: str, *, required: list[str] | None = None, optional: list[str] | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"method": verb}
    fields: dict[str, Any] = {}
    if required:
        fields["required"] = required
    if optional:
        fields["optional"] = optional
    if fields:
        out["request"] = fields
    return out


def card_extensions(*, solution: bool, default_env: bool) -> list[AgentExtension]:
    """The extensions on a served agent's card: upstream's `params` layout, with our
    per-message metadata keys added beside it."""
    mcp_add = _method("POST", required=["url"], optional=["headers", "name"])
    mcp_list = {"method": "GET", "response": {"required": ["mcp_servers"]}}
    out = [
        AgentExtension(
            uri=AGENT_CONFIG_URI,
            description=(
                "Set or read the agent's configuration for every later turn: name, role, "
                "system_prompt, model, max_turns, model_params, timeout_seconds (a "
                "message's own metadata still wins)."
            ),
            required=False,
            params={
                "endpoint": AGENT_CONFIG_PATH,
                "methods": {
                    "set": {"method": "POST", "request": {"supported": AGENT_CONFIG_FIELDS}},
                    "get": {"method": "GET", "response": {"required": ["config"]}},
                },
            },
        ),
        AgentExtension(
            uri=MCP_CONFIG_URI,
            description=(
                "Register MCP servers the agent should use: POST {url, headers?, name?} to "
                "the endpoint, or send {url, token, role, env_id} in a message's metadata "
                "under this URI for that message alone. Its tool calls go there only."
            ),
            required=False,
            params={
                "endpoint": MCP_CONFIG_PATH,
                "methods": {"add": mcp_add, "list": mcp_list},
                "metadata_key": MCP_CONFIG_URI,
                "value": {
                    "url": "MCP endpoint (Streamable HTTP), e.g. http://127.0.0.1:8765/mcp "
                    "or .../instances/{id}/mcp",
                    "token": "bearer token; the server takes the role from it",
                    "role": "the role to act as (sent as AgentEnv-Role when no token)",
                    "env_id": "the environment's name in the task",
                },
                "many": "a list of such objects for several environments; tools are then "
                "named <env_id>__<tool>",
                "has_default": default_env,
            },
        ),
        AgentExtension(
            uri=PEER_AGENTS_URI,
            description="Configure peer A2A agents available for delegation.",
            required=False,
            params={
                "endpoint": PEER_AGENTS_PATH,
                "methods": {
                    "set": _method("POST", required=["peers"]),
                    "list": {"method": "GET", "response": {"required": ["peers"]}},
                },
                "metadata_key": PEER_AGENTS_URI,
                "value": "{name: A2A base URL}",
            },
        ),
        AgentExtension(
            uri=TRAJECTORY_URI,
            description=(
                "Retrieve a finished task's trajectory (the agent's own log of its tool "
                "calls). Every tool call also carries the request's prompt_id as its "
                "session (AgentEnv-Session), so the environment's trajectory joins on it."
            ),
            required=False,
            params={
                "endpoint": TRAJECTORY_PATH,
                "methods": {"get": _method("POST", required=["task_id"])},
                "metadata_key": "prompt_id",
                "session_header": "AgentEnv-Session",
                "artifact": "trajectory",
            },
        ),
    ]
    if solution:
        out.append(
            AgentExtension(
                uri=SOLUTION_URI,
                description=(
                    "This agent replays the task's reference solution for the prompt: send it "
                    "as JSON text {calls: [{tool, args, env_id?}], response} under 'solution'."
                ),
                required=True,
                params={"metadata_key": "solution", "encoding": "JSON text"},
            )
        )
    return out
