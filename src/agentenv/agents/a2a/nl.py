"""The A2A sender for `nl` trigger actions: the instruction goes to the executor agent.

A gateway carries out an `nl` action by calling its `nl_sender` (gateway.firing); the
layers that know about agents install this one: `deploy_env` in tasks (which also serves
the gateway to the executor, so it can act), and `agent-env serve` (which knows its own
URL and tokens).

The message's text is the instruction (with `${args.x}` / `${result.x}` filled from the
provoking call); its metadata carries `trigger_id`, `prompt_id` (`trigger:<id>`, the
session the executor's tool calls are recorded under), `role`, `env`, `instance`, the
provoking call as JSON text (`trigger_scope`) and, when the gateway can be reached,
`urn:agentenv:mcp-config/v1`. An executor given no mcp-config acts only with what it
was configured with (`agent-env agent serve ... --mcp-url`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from agentenv.agents.a2a import MCP_CONFIG_URI, require_sdk
from agentenv.agents.a2a.mcp_tools import McpConfig
from agentenv.gateway.errors import DEFAULT_INSTANCE
from agentenv.gateway.firing import NlActionError, NlInstruction, NlSender

Locate = Callable[[NlInstruction], Awaitable[McpConfig | None]]
"""Where the executor should act for this instruction, if anywhere."""


def nl_metadata(request: NlInstruction) -> dict[str, Any]:
    """The metadata an nl instruction travels with (without the mcp-config)."""
    executor = request.executor
    meta: dict[str, Any] = {
        "trigger_id": request.trigger_id,
        "prompt_id": f"trigger:{request.trigger_id}",
        "env": request.env,
        "instance": request.instance,
        "trigger_scope": json.dumps(
            {"args": request.args, "result": request.result}, default=str, sort_keys=True
        ),
    }
    if executor is not None and executor.role:
        meta["role"] = executor.role
    if request.virtual_time is not None:
        meta["virtual_time"] = request.virtual_time.isoformat()
    return meta


def a2a_nl_sender(locate: Locate | None = None) -> NlSender:
    """An nl sender that reaches the registration's `executor.a2a_url` over A2A, within
    `executor.timeout_seconds`; `locate` gives the executor its environment."""

    async def send(request: NlInstruction) -> str:
        from agentenv.agents.base import AgentError

        try:
            require_sdk()
        except AgentError as exc:
            raise NlActionError(str(exc)) from None
        from agentenv.agents.a2a.client import send_instruction

        executor = request.executor
        if executor is None or not executor.a2a_url:
            raise NlActionError(
                "the trigger registration names no executor agent (executor.a2a_url) to "
                "send the instruction to"
            )
        meta = nl_metadata(request)
        if locate is not None:
            try:
                config = await locate(request)
            except Exception as exc:
                raise NlActionError(
                    f"cannot give the executor its environment: {type(exc).__name__}: {exc}"
                ) from None
            if config is not None:
                meta[MCP_CONFIG_URI] = config.to_wire()
        try:
            return await send_instruction(
                executor.a2a_url,
                request.instruction,
                meta,
                timeout=executor.timeout_seconds,
            )
        except AgentError as exc:
            raise NlActionError(str(exc)) from None

    return send


def served_gateway_locator(base_url: str, tokens: Mapping[str, str] | None = None) -> Locate:
    """For a gateway served at `base_url` (`agent-env serve`): the executor gets the MCP
    endpoint of the instance, with the bearer token of its role when the server uses
    tokens (`tokens` maps secret -> role). In token mode a role with no token gets no
    environment (its calls would be refused anyway)."""
    by_role = {role: secret for secret, role in (tokens or {}).items()}
    base = base_url.rstrip("/")

    async def locate(request: NlInstruction) -> McpConfig | None:
        role = request.executor.role if request.executor else None
        path = (
            "/mcp" if request.instance == DEFAULT_INSTANCE else f"/instances/{request.instance}/mcp"
        )
        if by_role:
            token = by_role.get(role or "")
            if token is None:
                return None
            return McpConfig(url=base + path, token=token, role=role)
        return McpConfig(url=base + path, role=role)

    return locate
