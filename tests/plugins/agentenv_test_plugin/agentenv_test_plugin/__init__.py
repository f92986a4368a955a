"""A step-type plugin for agentenv's tests, found through the `agentenv.steps` entry point."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from agentenv.tasks import Step, TaskContext


class EchoParams(BaseModel):
    """Fields of `echo_step`."""

    model_config = ConfigDict(extra="forbid")

    message: str
    times: int = 1


class EchoStep(Step):
    """Returns its message, `times` times (and keeps it in ctx.artifacts['echo'])."""

    type_name = "echo_step"
    Params = EchoParams

    async def run(self, ctx: TaskContext) -> Any:
        p: EchoParams = self.params  # type: ignore[assignment]
        echoed = [p.message] * p.times
        ctx.artifacts.setdefault("echo", []).extend(echoed)
        return {"echo": echoed, "step": self.id}


__all__ = ["EchoParams", "EchoStep"]
