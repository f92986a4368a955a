"""The virtual clock of one environment instance.

Two modes. `wall` is the protocol's: virtual = t0 + real elapsed x rate (rate 0 freezes
it). `stepped` is ours: time moves only when a tool call advances it by the tool's
duration, so a run is reproducible to the second. Reading never advances time.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field

from agentenv.env.tool import Tool, ToolContext, ToolError
from agentenv.spec.environment import ClockSpec

MAX_RATE = 86400.0
_ZERO = timedelta(0)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_US_OF: dict[timedelta, int] = {}
"""Durations in microseconds: a call's step is one of a few durations (its tool's)."""
MAX_YEAR = 9000  # leaves room for durations and triggers without overflowing datetime
ClockMode = Literal["stepped", "wall"]


class ClockState(BaseModel):
    """What `GET /clock/state` answers: the protocol's `armed`, `t0` (the virtual time the
    clock was last set to), `virtual_seconds_per_real_second` and `virtual_time`, and our
    `mode`. `t0` and `virtual_time` are left out on the wire while the clock is unarmed."""

    armed: bool
    t0: datetime | None = Field(default=None, description="The virtual time last set.")
    virtual_seconds_per_real_second: float
    virtual_time: datetime | None = None
    mode: ClockMode

    @property
    def start(self) -> datetime | None:
        """`t0` (the name our Python API used before)."""
        return self.t0

    def to_wire(self) -> dict[str, Any]:
        """The JSON body: instants in UTC with a `Z`, absent ones left out."""
        out: dict[str, Any] = {"armed": self.armed}
        if self.t0 is not None:
            out["t0"] = _iso(self.t0)
        out["virtual_seconds_per_real_second"] = self.virtual_seconds_per_real_second
        if self.virtual_time is not None:
            out["virtual_time"] = _iso(self.virtual_time)
        out["mode"] = self.mode
        return out


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


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
        self._t0_us: int | None = None  # _t0 as microseconds since the epoch (rows keep that)
        self._real0 = 0.0
        self.start: datetime | None = None
        # Bumped whenever the mapping from real to virtual time changes (set, advance,
        # clear), so the Firer knows when a wall-clock due time must be worked out again.
        self.epoch = 0

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

    @property
    def real_time(self) -> Callable[[], float]:
        """The real-time source (seconds, `time.monotonic` unless given) wall mode runs on."""
        return self._real

    @real_time.setter
    def real_time(self, source: Callable[[], float]) -> None:
        self._real = source
        self.epoch += 1

    @property
    def moves_by_itself(self) -> bool:
        """Whether virtual time moves while nobody touches the clock (armed, wall mode, a
        rate above 0): only then can a trigger come due with no call or control op."""
        return self._t0 is not None and self.mode == "wall" and self.rate > 0

    def now(self) -> datetime | None:
        """The virtual time now, or None if the clock is not armed."""
        if self._t0 is None:
            return None
        if self.mode == "stepped" or self.rate == 0:
            return self._t0
        return self._at(self._real())

    def _at(self, real: float) -> datetime:
        """Wall mode: the virtual time when the real-time source reads `real`."""
        assert self._t0 is not None
        elapsed = (real - self._real0) * self.rate
        try:
            return self._t0 + timedelta(seconds=elapsed)
        except OverflowError:  # saturate, as advance() does
            return datetime.max.replace(tzinfo=UTC)

    def real_at(self, moment: datetime) -> float | None:
        """The first reading of the real-time source at which `now()` is at least `moment`,
        for a clock that `moves_by_itself`; None for one that does not, or never gets there.

        Exact to one float step (`now()` rounds to the microsecond, so the plain quotient
        may land on either side of it), so that a due time worked out from it is never a
        step early nor late: the ticker then fires at exactly the readings a full sweep would.
        """
        if not self.moves_by_itself:
            return None
        assert self._t0 is not None
        seconds = (moment - self._t0).total_seconds()
        if seconds <= 0:
            return self._real0
        # now() rounds to the nearest microsecond: it reaches `moment` half a virtual
        # microsecond early. Bracket that reading within a few float steps, then bisect.
        guess = self._real0 + (seconds - 5e-7) / self.rate
        if not math.isfinite(guess):
            return None
        hi, lo = guess, guess
        step = 4 * math.ulp(guess)
        for _ in range(200):
            if self._at(hi) >= moment:
                break
            hi, step = hi + step, step * 2
        else:
            return None  # not reached: never that far past the guess
        step = 4 * math.ulp(guess)
        while lo > self._real0 and self._at(lo) >= moment:
            lo, step = max(lo - step, self._real0), step * 2
        while True:  # _at(lo) < moment <= _at(hi)
            mid = lo + (hi - lo) / 2
            if not lo < mid < hi:
                return hi
            if self._at(mid) >= moment:
                hi = mid
            else:
                lo = mid

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
            # `False` compares as 0: a boolean is refused, not taken for a frozen clock.
            if isinstance(rate, bool) or not isinstance(rate, int | float):
                raise ValueError(f"virtual_seconds_per_real_second must be a number, not {rate!r}")
            if not 0 <= rate <= MAX_RATE:  # NaN fails this too
                raise ValueError(f"virtual_seconds_per_real_second must be in [0, {MAX_RATE:g}]")
            self.rate = rate
        if mode is not None:
            self.mode = mode
        self._t0 = virtual_time.astimezone(UTC)
        self._t0_us = (self._t0 - _EPOCH) // _US
        self._real0 = self._real()
        self.start = self._t0
        self.epoch += 1

    def advance(self, delta: timedelta) -> None:
        """Move virtual time forward (a tool's duration, or a test skipping ahead).

        Time saturates at the largest representable instant rather than overflowing.
        """
        if self._t0 is not None and delta > _ZERO:
            try:
                self._t0 += delta
            except OverflowError:
                self._t0 = datetime.max.replace(tzinfo=UTC)
                self._t0_us = (self._t0 - _EPOCH) // _US
            else:
                step = _US_OF.get(delta)
                if step is None:
                    if len(_US_OF) > 1024:  # durations spent by tools may be all different
                        _US_OF.clear()
                    step = _US_OF[delta] = delta // _US
                self._t0_us += step  # type: ignore[operator]
            self.epoch += 1

    def micros_of(self, moment: datetime | None) -> int | datetime | None:
        """`moment` as a trajectory row keeps a time (`gateway.rows.micros`); at no cost
        for the time `now()` gives a stepped or frozen clock."""
        if moment is self._t0 and moment is not None:
            return self._t0_us
        if moment is None or moment.tzinfo is not UTC:
            return moment
        return (moment - _EPOCH) // _US

    def clear(self) -> None:
        """Disarm the clock."""
        self._t0 = None
        self._t0_us = None
        self.start = None
        self.epoch += 1

    def state(self) -> ClockState:
        """The clock as `GET /clock/state` shows it."""
        return ClockState(
            armed=self.armed,
            t0=self.start,
            virtual_seconds_per_real_second=self.rate,
            virtual_time=self.now(),
            mode=self.mode,
        )


GET_TIME_DESCRIPTION = (
    "The current date and time in this environment. Do not go by the clock of the machine "
    "you run on, nor by what you believe today's date is: they do not agree with this "
    "environment. Read this tool instead, and work out from its answer every date or time "
    "you give another tool and every relative phrase you resolve (today, overdue, next "
    "week). current_time is UTC, like the dates and times the other tools take. Given your "
    "user's IANA time zone as time_zone, the answer also has local_time, the same instant "
    "in that zone, for talking to your user; it does not change what you pass to tools. "
    "Time moves on while you work: read it again before each write rather than reusing an "
    "old answer. In a raw query string, write the date this tool gives rather than NOW() "
    "or CURRENT_DATE, so the query can be repeated."
)
"""What agents read about `get_time` (the facts of the protocol's, in our words)."""

GET_TIME_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "time_zone": {
            "type": "string",
            "description": (
                'An IANA time zone name, e.g. "Europe/Paris" or "America/Chicago"; the '
                "answer then also has time_zone and local_time (that instant in that zone)."
            ),
        }
    },
    "additionalProperties": False,
}


def _get_time(ctx: ToolContext, time_zone: str | None = None) -> dict[str, str]:
    """The current virtual time: `current_time` (UTC, to the second), and with `time_zone`
    also `time_zone` and `local_time`. We add `virtual_time`, the same instant exactly."""
    now = ctx.now.astimezone(UTC)
    answer = {
        "current_time": _iso(now.replace(microsecond=0)),
        "virtual_time": _iso(now),
    }
    if time_zone is None:
        return answer
    try:
        zone = ZoneInfo(time_zone)
    except (ZoneInfoNotFoundError, ValueError):
        raise ToolError(
            f"unknown time zone {time_zone!r}: give an IANA time zone name such as "
            "'America/New_York'"
        ) from None
    try:
        local = now.replace(microsecond=0).astimezone(zone)
    except OverflowError:
        raise ToolError(
            f"{answer['current_time']} cannot be shown in {time_zone!r}: out of range"
        ) from None
    return {**answer, "time_zone": time_zone, "local_time": local.isoformat()}


GET_TIME = replace(
    Tool.from_function(
        _get_time,
        name="get_time",
        kind="read",
        duration=timedelta(0),
        description=GET_TIME_DESCRIPTION,
    ),
    input_schema=GET_TIME_SCHEMA,
)
"""The tool an armed clock adds for agents."""
