"""The simulated user: an agent in the `user` role that holds hidden instructions.

It plays the other side of a `prompt_agent` conversation (`user_agent_name`): it reads
the assistant's last message and answers, revealing what it knows only as the
conversation needs it, using its own tools in the environment if it has any, and ends the
conversation by putting the stop marker (`###STOP###`) in its message.

Two ways to play it, chosen by the `agent_config` of its `deploy_agent` step:

* **scripted** — `script: [...]`, one entry per turn: a string to say, or
  `{say: "...", calls: [{tool, args}], stop: true}`. After the last entry it stops.
  Deterministic, no model: what the examples and tests use.
* **LLM** — `model: NAME` (plus `base_url`, `temperature`, `seed`): an OpenAI-compatible
  chat model role-plays the user from the hidden instructions (the deploy step's
  `system_prompt`), with the user's tools available. Needs the `llm` extra.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentenv.agents.base import AgentError, AgentTurn

STOP_MARKER = "###STOP###"

ROLE_PLAY = """You are playing a user talking to a support assistant. Stay in character.
Your situation and goals (hidden from the assistant; reveal only what the conversation
needs, one piece at a time, and never invent facts beyond these):

{instructions}

Reply with what the user would say next, in plain text. When your goal is met, or cannot
be met, end your message with {marker}."""


class ScriptCall(BaseModel):
    """A tool the user calls before speaking."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)


class ScriptLine(BaseModel):
    """One scripted user turn."""

    model_config = ConfigDict(extra="forbid")

    say: str = ""
    calls: list[ScriptCall] = Field(default_factory=list)
    stop: bool = False


class SimulatedUser:
    """Plays the user from a script or with an LLM; see the module's docstring."""

    name = "simulated-user"

    async def run_turn(self, turn: AgentTurn) -> str:
        """Answer the assistant's last message (`turn.prompt`)."""
        marker = str(turn.config.get("stop_marker", STOP_MARKER))
        if "script" in turn.config:
            return await self._scripted(turn, marker)
        if "model" in turn.config:
            return await self._llm(turn, marker)
        raise AgentError(
            "the simulated user needs `script:` (scripted) or `model:` (LLM) in its "
            "deploy_agent step's agent_config"
        )

    async def _scripted(self, turn: AgentTurn, marker: str) -> str:
        raw = turn.config["script"]
        if not isinstance(raw, list):
            raise AgentError("agent_config.script must be a list of turns")
        try:
            lines = [ScriptLine(say=x) if isinstance(x, str) else ScriptLine(**x) for x in raw]
        except (ValidationError, TypeError) as exc:
            raise AgentError(f"agent_config.script: {exc}") from None
        index = turn.conversation_turn
        if index >= len(lines):
            return marker
        line = lines[index]
        for call in line.calls:
            result = await turn.tools.call(call.tool, call.args)
            if not result.ok:
                raise AgentError(f"the scripted user's call {call.tool!r} failed: {result.text}")
        last = index == len(lines) - 1
        return f"{line.say} {marker}".strip() if line.stop or last else line.say

    async def _llm(self, turn: AgentTurn, marker: str) -> str:
        from agentenv.agents.openai_agent import make_openai_agent

        config = turn.config
        agent = make_openai_agent(
            str(config["model"]),
            base_url=config.get("base_url"),
            temperature=config.get("temperature"),
            seed=config.get("seed"),
        )
        transcript = "\n".join(
            f"{'You' if m['role'] == 'user' else 'Assistant'}: {m['text']}" for m in turn.history
        )
        role_play = ROLE_PLAY.format(instructions=turn.system_prompt or "", marker=marker)
        prompt = (
            f"The conversation so far:\n{transcript}\n\nThe assistant just said:\n{turn.prompt}"
        )
        inner = AgentTurn(
            prompt_id=turn.prompt_id,
            prompt=prompt,
            tools=turn.tools,
            agent_name=turn.agent_name,
            role=turn.role,
            system_prompt=role_play,
            max_turns=turn.max_turns,
            conversation_turn=turn.conversation_turn,
            history=turn.history,
        )
        return await agent.run_turn(inner)
