"""Gateway control steps: modify_env_tool_access, register_env_triggers, sync_env_clock.

Each is one call of the gateway's control plane as the system principal, the same call
the REST control endpoints make (`POST /tools/disable|enable`, `POST /triggers/register`,
`PUT /clock/set-time`). A request the gateway refuses fails the step with its message.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator

from agentenv.env.tool import SYSTEM
from agentenv.gateway import GatewayError
from agentenv.gateway.clock import MAX_RATE
from agentenv.spec.triggers import Executor, TriggerRegistration, TriggerSpec
from agentenv.tasks.context import DeployedEnv, TaskContext
from agentenv.tasks.step import STEPS, Step, StepError, Unhonoured


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str | None = Field(default=None, description="Default: the only deployed env.")


def _refused(deployed: DeployedEnv, exc: GatewayError) -> StepError:
    return StepError(f"env {deployed.env_id!r}: {exc}")


class ModifyEnvToolAccessParams(_Params):
    """Fields of `modify_env_tool_access` (the protocol's)."""

    action: Literal["disable", "enable"]
    role: str = Field(min_length=1, description="A role, or '*' for every role.")
    tools: list[str] | Literal["*"] = Field(description="Tool names, or '*' for all tools.")


@STEPS.add_builtin
class ModifyEnvToolAccess(Step):
    """Disable or enable tools for a role at run time (unknown tool names fail the step)."""

    type_name = "modify_env_tool_access"
    Params = ModifyEnvToolAccessParams

    async def run(self, ctx: TaskContext) -> Any:
        p: ModifyEnvToolAccessParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        try:
            rules = await deployed.gateway.set_tool_access(
                SYSTEM, p.action, p.role, p.tools, instance=deployed.instance
            )
        except GatewayError as exc:
            raise _refused(deployed, exc) from None
        return {
            "env_id": deployed.env_id,
            "action": p.action,
            "role": p.role,
            "tools": p.tools,
            "rules": rules,
        }


class RegisterEnvTriggersParams(_Params):
    """Fields of `register_env_triggers`: the body of `POST /triggers/register`."""

    watch_roles: list[str] | None = Field(
        default=None, description="Roles whose calls provoke triggers; all roles if unset."
    )
    executor: Executor | None = None
    executors: dict[str, Executor] = Field(
        default_factory=dict, description="Named executors, picked by an nl action's `executor`."
    )
    triggers: list[TriggerSpec] = Field(min_length=1)

    @field_validator("triggers")
    @classmethod
    def _unique_ids(cls, triggers: list[TriggerSpec]) -> list[TriggerSpec]:
        seen: set[str] = set()
        for trigger in triggers:
            if trigger.id in seen:
                raise ValueError(f"trigger id {trigger.id!r} appears twice")
            seen.add(trigger.id)
        return triggers

    def registration(self) -> TriggerRegistration:
        """The registration the gateway takes."""
        return TriggerRegistration(
            watch_roles=self.watch_roles,
            executor=self.executor,
            executors=self.executors,
            triggers=self.triggers,
        )


@STEPS.add_builtin
class RegisterEnvTriggers(Step):
    """Register triggers on an environment (additive by id; a bad trigger registers none)."""

    type_name = "register_env_triggers"
    Params = RegisterEnvTriggersParams
    unhonoured = {
        "executor_agent_name": Unhonoured(
            "naming the nl executor by a deployed agent is not built; give "
            "executor: {a2a_url, role}",
            refuse=True,
        ),
        "executor_timeout_seconds": Unhonoured("give executor.timeout_seconds"),
        "executor_hours": Unhonoured("give executor.hours"),
        "await_fired": Unhonoured(
            "waiting for triggers to fire is not built (fire them with the clock)", refuse=True
        ),
        "await_timeout_seconds": Unhonoured("goes with await_fired"),
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: RegisterEnvTriggersParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        try:
            result = await deployed.gateway.register_triggers(
                SYSTEM, p.registration(), instance=deployed.instance
            )
        except GatewayError as exc:
            raise _refused(deployed, exc) from None
        return {"env_id": deployed.env_id, "registered": result.added, **result.model_dump()}


class SyncEnvClockParams(_Params):
    """Fields of `sync_env_clock`: the body of `PUT /clock/set-time` (`mode` is ours)."""

    virtual_time: AwareDatetime = Field(description="RFC 3339, with a timezone.")
    virtual_seconds_per_real_second: float | None = Field(default=None, ge=0, le=MAX_RATE)
    mode: Literal["stepped", "wall"] | None = Field(
        default=None, description="Ours: 'stepped' (reproducible) or 'wall' (the protocol's)."
    )


@STEPS.add_builtin
class SyncEnvClock(Step):
    """Arm (or re-set) an environment's virtual clock; arming adds the `get_time` tool."""

    type_name = "sync_env_clock"
    Params = SyncEnvClockParams
    unhonoured = {
        "tolerate_missing_sync_time": Unhonoured(
            "every environment here has a virtual clock", honoured=(True,)
        ),
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: SyncEnvClockParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        try:
            state = await deployed.gateway.set_clock(
                SYSTEM,
                p.virtual_time,
                p.virtual_seconds_per_real_second,
                p.mode,
                instance=deployed.instance,
            )
        except GatewayError as exc:
            raise _refused(deployed, exc) from None
        return {"env_id": deployed.env_id, **state.model_dump(mode="json")}
