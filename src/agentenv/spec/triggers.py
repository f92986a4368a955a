"""Trigger documents, in the shapes of the AgentEnv protocol (`urn:agentenv:triggers/v1`).

A registration is `{watch_roles, executor, executors, triggers: [...]}`; each trigger has an
`id` (generated when left out), a `when` (action, state or time) and `actions` (tool, nl,
permission), and optionally a `barrier`. The protocol's later features are here too: `roles`
on a `when` (the roles whose calls provoke it), `unless` on a one-shot time trigger (the call
that cancels it), `delay` on an action, named `executors` an nl action picks by name, and an
executor's working `hours` (in a UTC offset or an IANA time zone).

Our additions are marked "Ours": `delay` on action/state triggers (fire that long after the
provoking call), a per-trigger `watch_roles`, `where` as a list of `{path, ...}`, `after` as
a duration from registration, `offset` from the clock's start and `every: [min, max]`.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from agentenv.spec.quantities import (
    Duration,
    Interval,
    PositiveDuration,
    interval,
    no_boolean_durations,
    non_negative,
)
from agentenv.spec.roles import RESERVED_ROLE

_DURATION = TypeAdapter(timedelta)
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class Predicate(_Doc):
    """A test on one value: exactly one of `regex`, `equals`, `exists`."""

    regex: str | None = None
    equals: Any = None
    exists: bool | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Predicate:
        given = [
            name
            for name, present in (
                ("regex", self.regex is not None),
                ("equals", "equals" in self.model_fields_set),
                ("exists", self.exists is not None),
            )
            if present
        ]
        if len(given) != 1:
            raise ValueError(
                "a predicate needs exactly one of 'regex', 'equals', 'exists'"
                + (f" (has {', '.join(given)})" if given else "")
            )
        if self.regex is not None:
            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"bad regex {self.regex!r}: {exc}") from None
        return self


_PATH = r"(\.[^.]+)*"


class WherePredicate(Predicate):
    """A predicate on `args.<path>` or `result.<path>` of the provoking call."""

    path: str = Field(pattern=rf"^(args|result){_PATH}$")


class ExtractMatch(_Doc):
    """Pick from the list at `path` the first item whose fields pass every `match`
    predicate; `take` one field of it (else the whole item)."""

    path: str = Field(min_length=1)
    match: dict[str, Predicate] = Field(default_factory=dict)
    take: str | None = None


class CheckStep(_Doc):
    """One step of a check: call a read tool, pull a value out of its result, then test it
    (`predicate`), name it for later steps (`bind`, read as `${name}`), or both."""

    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    extract: str | ExtractMatch | None = Field(
        default=None, description="Dotted path into the result, or a pick from a list."
    )
    bind: str | None = Field(default=None, pattern=r"^\w+$")
    predicate: Predicate | None = None


def _where_mapping(value: Any) -> Any:
    # The protocol's form is a mapping `{field: predicate}`, a bare field naming a
    # top-level argument; a plain value there is ours, short for `{equals: value}`.
    if isinstance(value, dict):
        return [
            {
                "path": k if k.split(".")[0] in ("args", "result") else f"args.{k}",
                **(v if isinstance(v, dict) else {"equals": v}),
            }
            for k, v in value.items()
        ]
    return value


def _check_steps(value: Any) -> Any:
    # The protocol writes a check as `{steps: [...]}` or as one step's fields; ours, a list.
    if isinstance(value, dict):
        return value.get("steps", [value])
    return value


def _last_tests(steps: list[CheckStep]) -> list[CheckStep]:
    if steps and steps[-1].predicate is None:
        raise ValueError("the last check step needs a predicate")
    return steps


Check = Annotated[
    list[CheckStep],
    BeforeValidator(_check_steps),
    AfterValidator(_last_tests),
    Field(min_length=1),
]
"""A check: steps run in order; it holds when every predicate does."""


Roles = Annotated[list[Annotated[str, Field(min_length=1)]], Field(min_length=1)]


class ActionWhen(_Doc):
    """Fire after a watched call of `tool` whose args/result match every `where`."""

    type: Literal["action"]
    tool: str = Field(min_length=1)
    where: list[WherePredicate] = Field(default_factory=list)
    repeat: bool = Field(default=False, description="Fire on every match, not just the first.")
    roles: Roles | None = Field(
        default=None, description="The roles whose calls provoke it (else the watched ones)."
    )
    delay: PositiveDuration | None = Field(
        default=None, description="Ours: fire this long after the call, in virtual time."
    )

    _where = field_validator("where", mode="before")(lambda cls, v: _where_mapping(v))


class StateWhen(_Doc):
    """Fire when every check holds, tested after each watched call."""

    type: Literal["state"]
    check: Check
    repeat: bool = False
    roles: Roles | None = None
    delay: PositiveDuration | None = None


class Unless(_Doc):
    """The call that cancels a deadline before it is due: `tool`, matched like an action
    trigger's (`where`, and `roles` if given, else the watched roles)."""

    tool: str = Field(min_length=1)
    where: list[WherePredicate] = Field(default_factory=list)
    roles: Roles | None = None

    _where = field_validator("where", mode="before")(lambda cls, v: _where_mapping(v))


class ExpInterval(_Doc):
    """A random interval drawn from an exponential distribution with this `mean` (at
    least 1 ms, like any `every`)."""

    dist: Literal["exp"]
    mean: Interval


class ExpDelay(ExpInterval):
    """A random delay, exponential with this `mean`, drawn from a generator seeded with `seed`."""

    mean: PositiveDuration
    seed: int = Field(strict=True)


def _random_or_duration(model: type[ExpInterval]) -> Any:
    """A before-validator for `duration | {dist: exp, ...}` fields: no booleans, and an
    object is validated as `model` here, so its error names its own field (`mean: ...`)
    rather than coming with one error per member of the union."""

    def check(value: Any) -> Any:
        no_boolean_durations(value)
        if not isinstance(value, dict):
            return value
        try:
            return model.model_validate(value)
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            what = first["msg"].removeprefix("Value error, ")
            raise ValueError(f"{where}: {what}" if where else what) from None

    return check


def _is_duration(value: Any) -> bool:
    return isinstance(value, str) and value.lstrip("+-").startswith("P")


class TimeWhen(_Doc):
    """Fire at a virtual time.

    The start is one of: `at` (an instant, or a duration from the clock's start), `after`
    (the id of another trigger: `offset` after it fires; or, ours, a duration from
    registration), or `offset` alone (ours: from the clock's start). `every` repeats (a
    duration, `{dist: exp, mean}` with `seed`, or ours `[min, max]`), at most `count` times
    and not past `until`. A one-shot one may carry `unless`: the call that cancels it.
    """

    type: Literal["time"]
    at: datetime | None = None
    after: timedelta | str | None = None
    offset: Duration | None = None
    every: timedelta | tuple[timedelta, timedelta] | ExpInterval | None = None
    count: int | None = Field(default=None, ge=1, strict=True)
    until: datetime | timedelta | None = None
    seed: int | None = Field(default=None, strict=True)
    unless: Unless | None = None

    _no_booleans = field_validator("after", "until", mode="before")(
        lambda cls, v: no_boolean_durations(v)
    )
    _every = field_validator("every", mode="before")(
        lambda cls, v: _random_or_duration(ExpInterval)(v)
    )

    @field_validator("after", "until")
    @classmethod
    def _not_negative(cls, value: Any) -> Any:
        return non_negative(value) if isinstance(value, timedelta) else value

    @field_validator("every")
    @classmethod
    def _often_enough(cls, every: Any) -> Any:
        # Each bound of `[min, max]`, or the one duration: at least 1 ms (ExpInterval
        # checks its own mean).
        for bound in every if isinstance(every, tuple) else (every,):
            if isinstance(bound, timedelta):
                interval(bound)
        return every

    @model_validator(mode="before")
    @classmethod
    def _relative_at(cls, data: Any) -> Any:
        # The protocol's `at: "PT2H"` is two hours after the clock's start: our `offset`.
        if isinstance(data, dict) and _is_duration(data.get("at")):
            data = dict(data)
            if data.get("offset") is not None:
                raise ValueError("give at most one of 'at', 'after', 'offset' (has at, offset)")
            data["offset"] = data.pop("at")
        if isinstance(data, dict) and _is_duration(data.get("after")):
            data = {**data, "after": _DURATION.validate_python(data["after"])}
        return data

    @property
    def anchor(self) -> str | None:
        """The id of the trigger whose firing starts this one, if `after` names one."""
        return self.after if isinstance(self.after, str) else None

    @model_validator(mode="after")
    def _one_start(self) -> TimeWhen:
        starts = [k for k in ("at", "after", "offset") if getattr(self, k) is not None]
        if self.anchor is not None:
            if not self.anchor:
                raise ValueError("'after' must be a trigger id or a duration")
            if self.offset is None:
                raise ValueError("'after' a trigger needs an 'offset' duration")
            starts.remove("offset")
        if len(starts) > 1:
            raise ValueError(
                f"give at most one of 'at', 'after', 'offset' (has {', '.join(starts)})"
            )
        if not starts and self.every is None:
            raise ValueError("a time trigger needs 'at', 'after', 'offset' or 'every'")
        for name in ("at", "until"):
            value = getattr(self, name)
            if isinstance(value, datetime) and value.tzinfo is None:
                raise ValueError(f"'{name}' needs a timezone, e.g. 2026-03-02T09:30:00Z")
        if isinstance(self.every, tuple) and self.every[0] > self.every[1]:
            raise ValueError("'every' as [min, max] needs min <= max")
        if self.unless is not None and self.every is not None:
            raise ValueError("'unless' is only for a one-shot time trigger (no 'every')")
        return self


When = Annotated[ActionWhen | StateWhen | TimeWhen, Field(discriminator="type")]
Delay = timedelta | ExpDelay


def _positive_delay(delay: Delay | None) -> Delay | None:
    if isinstance(delay, timedelta) and delay <= timedelta(0):
        raise ValueError(f"must be a positive duration (got {delay.total_seconds():g} s)")
    return delay


class _Action(_Doc):
    delay: Delay | None = Field(
        default=None,
        description="Wait this long (virtual time) after the provoking call before this action.",
    )
    verify: Check | None = None

    _no_boolean = field_validator("delay", mode="before")(
        lambda cls, v: _random_or_duration(ExpDelay)(v)
    )
    _delay = field_validator("delay")(lambda cls, v: _positive_delay(v))


class ToolAction(_Action):
    """Call a tool, with `${args.x}` / `${result.x}` filled from the provoking call."""

    type: Literal["tool"]
    tool: str = Field(min_length=1)
    args: dict[str, Any] = Field(default_factory=dict)
    as_: str | None = Field(
        default=None, alias="as", description="Role to call as; the system role if unset."
    )


class NlAction(_Action):
    """An instruction for an executor agent (the registration's, or the named one), over A2A."""

    type: Literal["nl"]
    instruction: str = Field(alias="text", min_length=1)
    executor: str | None = Field(default=None, description="A name from `executors`.")


class PermissionAction(_Action):
    """Change tool access for a role, as `POST /tools/disable|enable` would."""

    type: Literal["permission"]
    role: str
    action: Literal["disable", "enable"]
    tools: list[str] | Literal["*"]


Action = Annotated[ToolAction | NlAction | PermissionAction, Field(discriminator="type")]


class Barrier(_Doc):
    """Hold the provoking call's answer until the firing completes (or times out)."""

    at: Literal["provoking_call"] = "provoking_call"
    timeout_seconds: float = Field(default=30.0, gt=0, strict=True, allow_inf_nan=False)


def _new_id() -> str:
    return f"trg_{uuid.uuid4().hex[:12]}"


class TriggerSpec(_Doc):
    """One trigger: when it fires and what it does."""

    id: str = Field(default_factory=_new_id, min_length=1)
    description: str = ""
    watch_roles: list[str] | None = Field(
        default=None, description="Ours: overrides the registration's watch_roles for this one."
    )
    when: When
    actions: list[Action] = Field(
        description="What to do; none makes a sensor, whose firings are only recorded."
    )
    barrier: Barrier | None = None

    @model_validator(mode="after")
    def _consistent(self) -> TriggerSpec:
        if self.barrier is not None and any(a.delay is not None for a in self.actions):
            raise ValueError(
                "a trigger with a barrier cannot delay its actions: the barrier holds the "
                "provoking call until the actions are done"
            )
        return self


_HHMM = r"^([01]\d|2[0-3]):[0-5]\d$"


class Hours(_Doc):
    """When an executor works: from `start` to `end` (local `HH:MM`; past midnight if `end`
    is earlier) on `days`, in a fixed `utc_offset` or an IANA `time_zone`."""

    start: str = Field(pattern=_HHMM)
    end: str = Field(pattern=_HHMM)
    utc_offset: str | None = Field(default=None, pattern=r"^[+-]([01]\d|2[0-3]):[0-5]\d$")
    time_zone: str | None = None
    days: list[Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]] = Field(
        default_factory=lambda: list(DAYS), min_length=1
    )

    @model_validator(mode="after")
    def _valid(self) -> Hours:
        if self.start == self.end:
            raise ValueError("'start' equals 'end', so the executor would never be available")
        if self.utc_offset is not None and self.time_zone is not None:
            raise ValueError("give 'utc_offset' or 'time_zone', not both")
        if self.time_zone is not None:
            try:
                ZoneInfo(self.time_zone)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"'time_zone' must be an IANA time zone name such as 'America/New_York', "
                    f"not {self.time_zone!r}"
                ) from None
        elif self.utc_offset is None:
            self.utc_offset = "+00:00"
        self.days = [d for d in DAYS if d in self.days]
        return self


class Executor(_Doc):
    """The agent that carries out `nl` actions."""

    a2a_url: str | None = None
    role: str | None = None
    timeout_seconds: float = Field(default=120.0, gt=0, strict=True, allow_inf_nan=False)
    hours: Hours | None = Field(default=None, description="Its working hours, if it keeps any.")

    @field_validator("role")
    @classmethod
    def _not_reserved(cls, value: str | None) -> str | None:
        # Refused when registered, not when the trigger fires and its calls get a 401.
        if value is not None and value.strip() == RESERVED_ROLE:
            raise ValueError(f"{RESERVED_ROLE!r} is reserved for the gateway's own principal")
        return value


class TriggerRegistration(_Doc):
    """The body of `POST /triggers/register`, and the `triggers:` of a document."""

    watch_roles: list[str] | None = Field(
        default=None, description="Roles whose calls provoke triggers; all roles if unset."
    )
    executor: Executor | None = None
    executors: dict[str, Executor] = Field(
        default_factory=dict, description="Named executors, picked by an nl action's `executor`."
    )
    triggers: list[TriggerSpec] = Field(default_factory=list)

    _no_executors = field_validator("executors", mode="before")(
        lambda cls, v: {} if v is None else v  # the protocol's clients may send null
    )

    @model_validator(mode="after")
    def _unique_ids(self) -> TriggerRegistration:
        seen: set[str] = set()
        for trigger in self.triggers:
            if trigger.id in seen:
                raise ValueError(f"trigger id {trigger.id!r} appears twice")
            seen.add(trigger.id)
        for name in self.executors:
            if not name:
                raise ValueError("an executor name must not be empty")
        return self
