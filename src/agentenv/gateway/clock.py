"""The virtual clock of one environment instance.

Two modes. `wall` is the protocol's: virtual = t0 + real elapsed x rate (rate 0 freezes
it). `stepped` is ours: time moves only when a tool call advances it by the tool's
duration, so a run is reproducible to the second. Reading never advances time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, Field

from agentenv.env.tool import Tool, ToolContext
from agentenv.spec.environment import ClockSpec

MAX_RATE = 86400.0
MAX_YEAR = 9000  # leaves room for durations and triggers without overflowing datetime
ClockMode = Literal["stepped", "wall"]


class ClockState(BaseModel):
    """What `GET /clock/state` answers."""

    armed: bool
    mode: ClockMode
    virtual_time: datetime | None = None
    virtual_seconds_per_real_second: float
    start: datetime | None = Field(default=None, description="When the clock was last set.")


class ClockNotArmed(RuntimeError):
    """Asked for virtual time while the clock is not armed."""


class VirtualClock:
    """Virtual time for one instance; `now()` is None until the clock is armed."""

    def __init__(
        self,
        mode: ClockMode = "stepped",
        rate: float = 1.0,
        default_duration: timedelta = timedelta(seconds=1),
        real_time: Callable[[], float] = time.monotonic,
    ) -> None:
        self.mode: ClockMode = mode
        self.rate = rate
        self.default_duration = default_duration
        self._real = real_time
        self._t0: datetime | None = None
        self._real0 = 0.0
        self.start: datetime | None = None

    @classmethod
    def from_spec(cls, spec: ClockSpec) -> VirtualClock:
        """A clock with a document's defaults, armed if the document gives a start."""
        clock = cls(spec.mode, spec.rate, spec.default_duration)
        if spec.start is not None:
            clock.set(spec.start)
        return clock

    @property
    def armed(self) -> bool:
        """Whether the clock has been set."""
        return self._t0 is not None

    def now(self) -> datetime | None:
        """The virtual time now, or None if the clock is not armed."""
        if self._t0 is None:
            return None
        if self.mode == "stepped" or self.rate == 0:
            return self._t0
        elapsed = (self._real() - self._real0) * self.rate
        try:
            return self._t0 + timedelta(seconds=elapsed)
        except OverflowError:  # saturate, as advance() does
            return datetime.max.replace(tzinfo=UTC)

    def require(self) -> datetime:
        """The virtual time now; ClockNotArmed if the clock is not armed."""
        now = self.now()
        if now is None:
            raise ClockNotArmed("the clock is not armed (set it with PUT /clock/set-time)")
        return now

    def set(
        self, virtual_time: datetime, rate: float | None = None, mode: ClockMode | None = None
    ) -> None:
        """Arm the clock at `virtual_time`; optionally change the rate and the mode."""
        if virtual_time.tzinfo is None:
            raise ValueError("virtual_time needs a timezone")
        if virtual_time.year > MAX_YEAR:
            raise ValueError(f"virtual_time must be before the year {MAX_YEAR + 1}")
        if rate is not None:
            if not 0 <= rate <= MAX_RATE:
                raise ValueError(f"virtual_seconds_per_real_second must be in [0, {MAX_RATE:g}]")
            self.rate = rate
        if mode is not None:
            self.mode = mode
        self._t0 = virtual_time.astimezone(UTC)
        self._real0 = self._real()
        self.start = self._t0

    def advance(self, delta: timedelta) -> None:
        """Move virtual time forward (a tool's duration, or a test skipping ahead).

        Time saturates at the largest representable instant rather than overflowing.
        """
        if self._t0 is not None and delta > timedelta(0):
            try:
                self._t0 += delta
            except OverflowError:
                self._t0 = datetime.max.replace(tzinfo=UTC)

    def clear(self) -> None:
        """Disarm the clock."""
        self._t0 = None
        self.start = None

    def state(self) -> ClockState:
        """The clock as `GET /clock/state` shows it."""
        return ClockState(
            armed=self.armed,
            mode=self.mode,
            virtual_time=self.now(),
            virtual_seconds_per_real_second=self.rate,
            start=self.start,
        )


def _get_time(ctx: ToolContext) -> dict[str, str]:
    """The current virtual time (RFC 3339)."""
    return {"virtual_time": ctx.now.isoformat()}


GET_TIME = Tool.from_function(_get_time, name="get_time", kind="read", duration=timedelta(0))
"""The tool an armed clock adds for agents."""
