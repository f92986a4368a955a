"""Prompting: prompt_agent sends a prompt to a deployed agent and waits for its answer."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentenv.agents.base import AgentError, AgentTurn
from agentenv.env.tool import Principal
from agentenv.spec.wire import Part, TextPart
from agentenv.tasks.context import PromptRecord, TaskContext
from agentenv.tasks.step import STEPS, Step, StepError


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
    default_timeout = 600.0

    async def run(self, ctx: TaskContext) -> Any:
        p: PromptAgentParams = self.params  # type: ignore[assignment]
        if p.user_agent_name is not None:
            raise StepError("simulated users (user_agent_name) are not built yet")
        deployed = ctx.agent(p.agent_name)
        prompt_id = p.prompt_id or self.id
        if prompt_id in ctx.prompts:
            raise StepError(f"prompt_id {prompt_id!r} was already used")
        envs = {e: ctx.env(e) for e in deployed.env_ids}
        record = PromptRecord(
            prompt_id=prompt_id,
            agent_name=deployed.name,
            prompt=p.text(),
            started=datetime.now(UTC),
            start_seq={e: len(d.gateway.instance(d.instance).trajectory) for e, d in envs.items()},
            initial={e: d.snapshot() for e, d in envs.items()},
        )
        ctx.prompts[prompt_id] = record
        turn = AgentTurn(
            prompt_id=prompt_id,
            prompt=record.prompt,
            tools=ctx.tool_client(
                Principal(role=deployed.role, name=deployed.name), deployed.env_ids, prompt_id
            ),
            agent_name=deployed.name,
            role=deployed.role,
            system_prompt=p.system_prompt or deployed.system_prompt,
            solution=ctx.task.solution.get(prompt_id),
            max_turns=p.max_turns,
            model=p.model,
            model_params=p.model_params,
        )
        try:
            if deployed.agent is not None:
                response = await deployed.agent.run_turn(turn)
            elif ctx.driver is not None:
                response = await ctx.driver(turn)
            else:
                raise StepError(f"nobody plays agent {deployed.name!r}")
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
        return {"prompt_id": prompt_id, "response": response, "records": calls}
