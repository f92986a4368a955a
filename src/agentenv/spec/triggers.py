"""Trigger documents, in the shapes of the AgentEnv protocol (`urn:agentenv:triggers/v1`).

A registration is `{watch_roles, executor, triggers: [...]}`; each trigger has an `id`, a
`when` (action, state or time) and `actions` (tool, nl, permission), and optionally a
`barrier`. Our additions are marked: `delay` on action/state triggers (fire that long after
the provoking call, in virtual time) and the mapping form of `where`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


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
            import re

            try:
                re.compile(self.regex)
            except re.error as exc:
                raise ValueError(f"bad regex {self.regex!r}: {exc}") from None
        return self


class WherePredicate(Predicate):
    """A predicate on `args.<path>` or `result.<path>` of the provoking call."""

    path: str = Field(pattern=r"^(args|result)(\.[^.]+)*$")


class CheckStep(_Doc):
    """A state check: call a read tool, pull a value out of its result, test it."""

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    extract: str | None = Field(default=None, description="Dotted path into the result.")
    predicate: Predicate


def _where_mapping(value: Any) -> Any:
    # Our addition: `where: {"args.to": {"regex": "..."}}` reads better in YAML.
    if isinstance(value, dict):
        return [
            {"path": k, **(v if isinstance(v, dict) else {"equals": v})} for k, v in value.items()
        ]
    return value


class ActionWhen(_Doc):
    """Fire after a watched call of `tool` whose args/result match every `where`."""

    type: Literal["action"]
    tool: str
    where: list[WherePredicate] = Field(default_factory=list)
    repeat: bool = Field(default=False, description="Fire on every match, not just the first.")
    delay: timedelta | None = Field(
        default=None, description="Ours: fire this long after the call, in virtual time."
    )

    _where = field_validator("where", mode="before")(lambda cls, v: _where_mapping(v))


class StateWhen(_Doc):
    """Fire when every check holds, tested after each watched call."""

    type: Literal["state"]
    check: list[CheckStep] = Field(min_length=1)
    repeat: bool = False
    delay: timedelta | None = None


class TimeWhen(_Doc):
    """Fire at a virtual time: `at`, or `after` registration, or `offset` from clock start.

    `every` repeats (a duration, or `[min, max]` for a random interval drawn with `seed`),
    at most `count` times and not past `until`.
    """

    type: Literal["time"]
    at: datetime | None = None
    after: timedelta | None = None
    offset: timedelta | None = None
    every: timedelta | tuple[timedelta, timedelta] | None = None
    count: int | None = Field(default=None, ge=1)
    until: datetime | None = None
    seed: int | None = None

    @model_validator(mode="after")
    def _one_start(self) -> TimeWhen:
        starts = [k for k in ("at", "after", "offset") if getattr(self, k) is not None]
        if len(starts) > 1:
            raise ValueError(
                f"give at most one of 'at', 'after', 'offset' (has {', '.join(starts)})"
            )
        if not starts and self.every is None:
            raise ValueError("a time trigger needs 'at', 'after', 'offset' or 'every'")
        for name in ("at", "until"):
            value = getattr(self, name)
            if value is not None and value.tzinfo is None:
                raise ValueError(f"'{name}' needs a timezone, e.g. 2026-03-02T09:30:00Z")
        if isinstance(self.every, tuple) and self.every[0] > self.every[1]:
            raise ValueError("'every' as [min, max] needs min <= max")
        every = self.every[0] if isinstance(self.every, tuple) else self.every
        if every is not None and every <= timedelta(0):
            raise ValueError("'every' must be a positive duration")
        return self


When = Annotated[ActionWhen | StateWhen | TimeWhen, Field(discriminator="type")]


class ToolAction(_Doc):
    """Call a tool, with `${args.x}` / `${result.x}` filled from the provoking call."""

    type: Literal["tool"]
    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    as_: str | None = Field(
        default=None, alias="as", description="Role to call as; the system role if unset."
    )
    verify: CheckStep | None = None


class NlAction(_Doc):
    """An instruction for the registration's executor agent, sent over A2A."""

    type: Literal["nl"]
    instruction: str = Field(alias="text")
    verify: CheckStep | None = None


class PermissionAction(_Doc):
    """Change tool access for a role, as `POST /tools/disable|enable` would."""

    type: Literal["permission"]
    role: str
    action: Literal["disable", "enable"]
    tools: list[str] | Literal["*"]
    verify: CheckStep | None = None


Action = Annotated[ToolAction | NlAction | PermissionAction, Field(discriminator="type")]


class Barrier(_Doc):
    """Hold the provoking call's answer until the firing completes (or times out)."""

    at: Literal["provoking_call"] = "provoking_call"
    timeout_seconds: float = Field(default=30.0, gt=0)


class TriggerSpec(_Doc):
    """One trigger: when it fires and what it does."""

    id: str = Field(min_length=1)
    description: str = ""
    watch_roles: list[str] | None = Field(
        default=None, description="Ours: overrides the registration's watch_roles for this one."
    )
    when: When
    actions: list[Action] = Field(min_length=1)
    barrier: Barrier | None = None


class Executor(_Doc):
    """The agent that carries out `nl` actions."""

    a2a_url: str | None = None
    role: str | None = None
    timeout_seconds: float = 60.0


class TriggerRegistration(_Doc):
    """The body of `POST /triggers/register`, and the `triggers:` of a document."""

    watch_roles: list[str] | None = Field(
        default=None, description="Roles whose calls provoke triggers; all roles if unset."
    )
    executor: Executor | None = None
    triggers: list[TriggerSpec] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> TriggerRegistration:
        seen: set[str] = set()
        for trigger in self.triggers:
            if trigger.id in seen:
                raise ValueError(f"trigger id {trigger.id!r} appears twice")
            seen.add(trigger.id)
        return self
