"""Check probes: the read-only tool calls of trigger checks and `verify` steps.

A probe calls a tool directly, as the system principal: no access rules, no trajectory
record, no clock step. A tool of ours runs inside a transaction that is always rolled back,
so a check never changes the state, and it must be sync: awaiting inside the transaction
would let other calls' writes in. A server's tool (`Tool.remote`) cannot be rolled back, so
only its reads may be probed; they are awaited, within the tool's timeout.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

from agentenv.env.tool import SYSTEM, Tool, ToolContext, ToolError
from agentenv.gateway.instance import Instance
from agentenv.gateway.raised import crash
from agentenv.spec.triggers import CheckStep


class _Rollback(Exception):
    """Carries a probe's value out of the transaction it rolls back."""

    def __init__(self, value: Any) -> None:
        self.value = value


async def run_probe(
    tool: Tool | None, inst: Instance, step: CheckStep, now: datetime | None
) -> Any:
    """The value `tool` answers for the check step's args on `inst`; ToolError saying why
    when it cannot be probed (unknown, a server's write tool, an async tool of ours)."""
    if tool is None:
        raise ToolError(f"unknown tool {step.tool!r} in a check")
    ctx = ToolContext(
        inst.state, now or datetime.now(UTC), SYSTEM, inst.id, resources=inst.resources
    )
    if tool.remote:
        if tool.kind != "read":
            raise ToolError(
                f"check tool {step.tool!r} is a server's write tool, which a check cannot "
                "roll back; checks call its read tools (readOnlyHint, or server.read_tools)"
            )
        values = tool.check_args(dict(step.args)) if tool.check_args else dict(step.args)
        return await asyncio.wait_for(tool.invoke(ctx, values), tool.timeout)  # type: ignore[arg-type]
    values = dict(tool.args_model.model_validate(step.args).__dict__)
    try:
        with inst.state.transaction():
            try:
                value = tool.invoke(ctx, values)
            except Exception:
                raise
            except BaseException as exc:  # KeyboardInterrupt and kin: still the tool's
                raise ToolError(f"check tool {step.tool!r} raised {crash(exc)}") from None
            if asyncio.iscoroutine(value):
                value.close()
                raise ToolError(f"check tool {step.tool!r} is async; checks need sync tools")
            raise _Rollback(value)  # always roll back: a check never changes the state
    except _Rollback as probe:
        return probe.value
