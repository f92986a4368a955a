"""Running synthesis calls through a real Gateway, on forks, with a reproducible clock.

Every call synthesis makes goes through `Gateway.call` on an instance forked from a
snapshot (the seed, or the seed with distractors), as the agent's principal; the
instance is dropped afterwards. Time must be reproducible for a reference solution to
replay to the same state hash, so the clock is always stepped: an environment whose
clock is already armed and stepped keeps it; any other gets a stepped clock armed at
its start (or at `FIXED_START`), and the synthesized task arms it the same way with a
`sync_env_clock` step.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agentenv.env.environment import Environment
from agentenv.env.tool import SYSTEM, Principal
from agentenv.gateway import Gateway
from agentenv.gateway.results import CallResult
from agentenv.state import Snapshot

FIXED_START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
AGENT_NAME = "solver"
SHIFT = timedelta(days=1, hours=2, minutes=17, seconds=13)
"""How far the volatility replay moves the clock: fields that change with it are
time-dependent and left out of state checklists."""


@dataclass(frozen=True)
class ClockPlan:
    """How instances' clocks are set: `sync` is True when the task must arm it itself."""

    start: datetime | None
    sync: bool

    @classmethod
    def of(cls, env: Environment) -> ClockPlan:
        """The env's own stepped clock, or a stepped clock the task arms."""
        clock = env.clock
        if clock.start is not None and clock.mode == "stepped":
            return cls(start=None, sync=False)
        return cls(start=clock.start or FIXED_START, sync=True)

    def step(self) -> dict[str, Any] | None:
        """The `sync_env_clock` step's fields, when the task needs one."""
        if not self.sync or self.start is None:
            return None
        return {"virtual_time": self.start.isoformat().replace("+00:00", "Z"), "mode": "stepped"}


class Sandbox:
    """Forks of one environment's gateway, for walks, replays and probes."""

    def __init__(self, env: Environment, role: str) -> None:
        self.env = env
        self.gateway = Gateway(env)
        self.principal = Principal(role=role, name=AGENT_NAME)
        self.clock = ClockPlan.of(env)
        self._opened = 0

    async def open(self, snapshot: Snapshot, shift: timedelta | None = None) -> str:
        """A fresh instance forked from `snapshot`, its clock set (and moved by `shift`)."""
        self._opened += 1
        inst = self.gateway.create_instance(f"synth-{self._opened}", state=snapshot)
        start = self.clock.start
        if start is None and shift:
            start = inst.clock.now()
        if start is not None:
            await self.gateway.set_clock(
                SYSTEM, start + (shift or timedelta(0)), None, "stepped", instance=inst.id
            )
        return inst.id

    def close(self, instance: str) -> None:
        """Drop an instance."""
        if instance in self.gateway.instances:
            self.gateway.drop_instance(instance)

    async def call(self, instance: str, tool: str, args: dict[str, Any]) -> CallResult:
        """One call as the agent."""
        return await self.gateway.call(self.principal, tool, args, instance=instance)

    def snapshot(self, instance: str) -> Snapshot:
        """The instance's state now."""
        return self.gateway.instance(instance).state.snapshot()
