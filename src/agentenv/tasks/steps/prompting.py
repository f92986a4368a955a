"""Prompting: prompt_agent sends a prompt to a deployed agent and waits for its answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentenv.agents.base import AgentError, AgentTurn
from agentenv.env.tool import Principal
from agentenv.spec.wire import Part, TextPart
from agentenv.tasks.context import DeployedAgent, PromptRecord, TaskContext
from agentenv.tasks.step import STEPS, Step, StepError, Unhonoured

STOP_MARKER = "###STOP###"
DEFAULT_CONVERSATION_TURNS = 10
DEFAULT_USER_AGENT_NAME = "human_agent"  # the protocol's user, when turns > 1 name none
_NOT_A_HARNESS = "the run's agent (--agent) decides how it runs a turn"
_PROMPT_UNHONOURED = {
    "harness": Unhonoured(_NOT_A_HARNESS),
    "agentenv_tools": Unhonoured(_NOT_A_HARNESS),
    "output_format": Unhonoured("structured output is not requested from agents here"),
    "max_thinking_tokens": Unhonoured(_NOT_A_HARNESS),
    "effort": Unhonoured(_NOT_A_HARNESS),
    "poll_interval_seconds": Unhonoured("turns are awaited, not polled"),
    "trajectory_output_prefix": Unhonoured("trajectories go to the run folder"),
    "live_trajectory": Unhonoured("trajectories go to the run folder", honoured=(False,)),
    "context_id": Unhonoured("each prompt is its own A2A context here"),
    "snapshot_config": Unhonoured("agent snapshots are not built"),
    "user_a2a_url": Unhonoured(
        "a remote user is not built: deploy it with deploy_agent a2a_agent_id and name it "
        "in user_agent_name",
        refuse=True,
    ),
    "user_agent_timeout_seconds": Unhonoured("the step's timeout_seconds bounds the whole talk"),
    "user_output_format": Unhonoured("structured output is not requested from agents here"),
    "user_model": Unhonoured("the user agent picks its own model"),
}


class PromptAgentParams(BaseModel):
    """Fields of `prompt_agent` (the protocol's)."""

    model_config = ConfigDict(extra="forbid")

    prompt: str | None = None
    parts: list[Part] | None = None
    prompt_id: str | None = Field(
        default=None, description="Join key for verifiers; defaults to the step id."
    )
    agent_name: str | None = None
    model: str | None = None
    model_params: dict[str, Any] = Field(default_factory=dict)
    system_prompt: str | None = None
    max_turns: int | None = Field(default=None, ge=1)
    user_agent_name: str | None = None
    max_conversation_turns: int | None = Field(default=None, ge=1)

    @model_validator(mode="after")
    def _one_prompt(self) -> PromptAgentParams:
        if (self.prompt is None) == (self.parts is None):
            raise ValueError("give exactly one of 'prompt' or 'parts'")
        return self

    def text(self) -> str:
        """The prompt as text (text parts joined; other parts described)."""
        if self.prompt is not None:
            return self.prompt
        out = []
        for part in self.parts or []:
            out.append(part.text if isinstance(part, TextPart) else part.model_dump_json())
        return "\n".join(out)


@STEPS.add_builtin
class PromptAgent(Step):
    """Send a prompt to a deployed agent; its tool calls and answer are recorded under
    `prompt_id`, which verifiers use to find them."""

    type_name = "prompt_agent"
    Params = PromptAgentParams
    unhonoured = _PROMPT_UNHONOURED
    default_timeout = 600.0

    async def run(self, ctx: TaskContext) -> Any:
        p: PromptAgentParams = self.params  # type: ignore[assignment]
        deployed = ctx.agent(p.agent_name)
        user_name = p.user_agent_name
        if user_name is None and (p.max_conversation_turns or 1) > 1:
            user_name = DEFAULT_USER_AGENT_NAME
        user = ctx.agent(user_name) if user_name is not None else None
        if user is not None and user.name == deployed.name:
            raise StepError("user_agent_name names the prompted agent itself")
        prompt_id = p.prompt_id or self.id
        if prompt_id in ctx.prompts:
            raise StepError(f"prompt_id {prompt_id!r} was already used")
        env_ids = list(dict.fromkeys(deployed.env_ids + (user.env_ids if user else [])))
        envs = {e: ctx.env(e) for e in env_ids}
        record = PromptRecord(
            prompt_id=prompt_id,
            agent_name=deployed.name,
            prompt=p.text(),
            started=datetime.now(UTC),
            start_seq={e: len(d.gateway.instance(d.instance).trajectory) for e, d in envs.items()},
            initial={e: d.snapshot() for e, d in envs.items()},
        )
        ctx.prompts[prompt_id] = record
        try:
            if user is None:
                response = await self._turn(ctx, p, deployed, prompt_id, record.prompt, 0, [])
                turns, stopped = 1, False
            else:
                response, turns, stopped = await self._conversation(
                    ctx, p, deployed, user, prompt_id, record
                )
            record.response = response
        except AgentError as exc:
            record.error = str(exc)
            raise StepError(str(exc)) from None
        except BaseException as exc:
            record.error = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise
        finally:
            record.ended = datetime.now(UTC)
            record.end_seq = {
                e: len(d.gateway.instance(d.instance).trajectory) for e, d in envs.items()
            }
            record.final = {e: d.snapshot() for e, d in envs.items()}
        calls = sum(record.end_seq[e] - record.start_seq[e] for e in envs)
        out: dict[str, Any] = {"prompt_id": prompt_id, "response": response, "records": calls}
        if user is not None:
            out.update(turns=turns, stopped_by_user=stopped, messages=record.messages)
        return out

    async def _turn(
        self,
        ctx: TaskContext,
        p: PromptAgentParams,
        who: DeployedAgent,
        prompt_id: str,
        prompt: str,
        index: int,
        history: list[dict[str, str]],
        *,
        as_user: bool = False,
    ) -> str:
        turn = AgentTurn(
            prompt_id=prompt_id,
            prompt=prompt,
            tools=ctx.tool_client(Principal(role=who.role, name=who.name), who.env_ids, prompt_id),
            agent_name=who.name,
            role=who.role,
            # The step's system prompt is for the prompted agent; a user keeps its own.
            system_prompt=who.system_prompt if as_user else (p.system_prompt or who.system_prompt),
            solution=None if as_user else ctx.task.solution.get(prompt_id),
            max_turns=p.max_turns,
            model=None if as_user else p.model,
            model_params={} if as_user else dict(p.model_params),
            conversation_turn=index,
            history=list(history),
            peers=ctx.peers_of(who.name),
            config=dict(who.config),
        )
        if who.agent is not None:
            response = await who.agent.run_turn(turn)
            turns = getattr(who.agent, "turns", None)  # agents that count tokens keep them here
            if turns and hasattr(turns[-1], "to_json"):
                ctx.usage.setdefault(prompt_id, []).append(
                    {"agent": who.name, **turns[-1].to_json()}
                )
            return response
        if ctx.driver is not None:
            return await ctx.driver(turn)
        raise StepError(f"nobody plays agent {who.name!r}")

    async def _conversation(
        self,
        ctx: TaskContext,
        p: PromptAgentParams,
        agent: DeployedAgent,
        user: DeployedAgent,
        prompt_id: str,
        record: PromptRecord,
    ) -> tuple[str, int, bool]:
        """The prompt opens; agent and user then take turns until the user's message holds
        its stop marker or `max_conversation_turns` agent turns have been taken."""
        limit = p.max_conversation_turns or DEFAULT_CONVERSATION_TURNS
        marker = str(user.config.get("stop_marker", STOP_MARKER))
        message, response = record.prompt, ""
        for index in range(limit):
            self._say(ctx, user, prompt_id, message, record)
            response = await self._turn(ctx, p, agent, prompt_id, message, index, record.messages)
            self._say(ctx, agent, prompt_id, response, record, speaker="assistant")
            if index + 1 == limit:
                return response, index + 1, False
            message = await self._turn(
                ctx, p, user, prompt_id, response, index, record.messages, as_user=True
            )
            if marker in message:
                text = message.replace(marker, "").strip()
                if text:
                    self._say(ctx, user, prompt_id, text, record)
                return response, index + 1, True
        return response, limit, False

    @staticmethod
    def _say(
        ctx: TaskContext,
        who: DeployedAgent,
        prompt_id: str,
        text: str,
        record: PromptRecord,
        speaker: str = "user",
    ) -> None:
        record.messages.append({"role": speaker, "text": text, "agent": who.name})
        principal = Principal(role=who.role, name=who.name)
        for env_id in who.env_ids:
            deployed = ctx.env(env_id)
            deployed.gateway.record_message(
                principal, text, instance=deployed.instance, session=prompt_id
            )
