"""What an A2A request asks of a served agent: the prompt, the environment to act in
(mcp-config), peers, and the rest of the turn, read from the message and its metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agentenv.agents.a2a import (
    MCP_CONFIG_URI,
    PEER_AGENTS_URI,
    SOLUTION_URI,
)
from agentenv.agents.a2a.mcp_tools import (
    McpConfig,
)
from agentenv.agents.base import Agent, AgentTurn
from agentenv.spec.task import SolutionTurn


class BadRequest(ValueError):
    """An A2A request whose metadata cannot be a turn; the message names the key."""


# -- the turn a request asks for ------------------------------------------------------------


def _ints(value: Any) -> Any:
    """protobuf's Struct keeps every number as a double: 5 comes back as 5.0. Whole
    numbers go back to ints (JSON does not tell 5 from 5.0 either)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def _json(key: str, value: Any) -> Any:
    """A structured field: JSON text (exact numbers) or, as a fallback, a Struct value."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise BadRequest(f"metadata {key!r} is not valid JSON text: {exc}") from None
    return _ints(value)


def _string(meta: dict[str, Any], key: str) -> str | None:
    value = meta.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest(f"metadata {key!r} must be a string")
    return value


def _integer(meta: dict[str, Any], key: str) -> int | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    if isinstance(value, int | float) and float(value).is_integer() and value >= 0:
        return int(value)
    raise BadRequest(f"metadata {key!r} must be a whole number")


@dataclass
class TurnRequest:
    """What one A2A request asks of the served agent."""

    prompt: str
    prompt_id: str
    configs: list[McpConfig]
    agent_name: str | None = None
    role: str | None = None
    system_prompt: str | None = None
    history: list[dict[str, str]] = field(default_factory=list)
    conversation_turn: int = 0
    max_turns: int | None = None
    model: str | None = None
    model_params: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    solution: SolutionTurn | None = None
    peers: dict[str, str] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(
        cls,
        texts: list[str],
        metadata: dict[str, Any],
        *,
        task_id: str,
        defaults: list[McpConfig],
    ) -> TurnRequest:
        """The turn from the message's text parts and the merged metadata (BadRequest)."""
        prompt = "\n".join(t for t in texts if t)
        if not prompt.strip():
            raise BadRequest("the message has no text: send the prompt as a text part")
        meta = dict(metadata)
        configs = defaults
        if meta.get(MCP_CONFIG_URI) is not None:
            try:
                configs = McpConfig.parse(meta.pop(MCP_CONFIG_URI))
            except ValueError as exc:
                raise BadRequest(f"metadata {MCP_CONFIG_URI!r}: {exc}") from None
        peers_raw = meta.pop(PEER_AGENTS_URI, None) or {}
        if not isinstance(peers_raw, dict) or not all(
            isinstance(v, str) for v in peers_raw.values()
        ):
            raise BadRequest(f"metadata {PEER_AGENTS_URI!r} must map names to A2A URLs")
        history = meta.get("history") or []
        if not isinstance(history, list) or not all(
            isinstance(h, dict) and all(isinstance(v, str) for v in h.values()) for h in history
        ):
            raise BadRequest("metadata 'history' must be a list of {role, text} objects")
        solution = None
        raw_solution = meta.get("solution", meta.get(SOLUTION_URI))
        if raw_solution is not None:
            try:
                solution = SolutionTurn.model_validate(_json("solution", raw_solution))
            except ValidationError as exc:
                raise BadRequest(f"metadata 'solution' is not a solution turn: {exc}") from None
        params = _json("model_params", meta.get("model_params") or {})
        config = _json("config", meta.get("config") or {})
        if not isinstance(params, dict) or not isinstance(config, dict):
            raise BadRequest("metadata 'model_params' and 'config' must be objects")
        known = {
            "prompt_id",
            "agent_name",
            "role",
            "system_prompt",
            "history",
            "conversation_turn",
            "max_turns",
            "model",
            "model_params",
            "config",
            "solution",
            SOLUTION_URI,
        }
        role = _string(meta, "role") or next((c.role for c in configs if c.role), None)
        return cls(
            prompt=prompt,
            prompt_id=_string(meta, "prompt_id") or f"a2a-{task_id}",
            configs=configs,
            agent_name=_string(meta, "agent_name"),
            role=role,
            system_prompt=_string(meta, "system_prompt"),
            history=[dict(h) for h in history],
            conversation_turn=_integer(meta, "conversation_turn") or 0,
            max_turns=_integer(meta, "max_turns"),
            model=_string(meta, "model"),
            model_params=params,
            config=config,
            solution=solution,
            peers=dict(peers_raw),
            extra={k: v for k, v in meta.items() if k not in known},
        )

    def turn(self, agent: Agent, tools: Any) -> AgentTurn:
        """The AgentTurn the agent takes."""
        return AgentTurn(
            prompt_id=self.prompt_id,
            prompt=self.prompt,
            tools=tools,
            agent_name=self.agent_name or getattr(agent, "name", "agent"),
            role=self.role or "default",
            system_prompt=self.system_prompt,
            solution=self.solution,
            max_turns=self.max_turns,
            model=self.model,
            model_params=self.model_params,
            conversation_turn=self.conversation_turn,
            history=self.history,
            peers=self.peers,
            config=self.config,
        )
