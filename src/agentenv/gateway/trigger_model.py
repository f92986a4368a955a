"""The pieces of a trigger engine: a registered trigger, one firing of it, and the rules
for when a time trigger is due and how a trigger shows in `/triggers/state`."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agentenv.gateway.trigger_rules import add, interval
from agentenv.gateway.trigger_state import TriggerInfo, TriggerStatus, iso
from agentenv.spec.triggers import (
    ActionWhen,
    Executor,
    NlAction,
    StateWhen,
    TimeWhen,
    ToolAction,
    TriggerRegistration,
    TriggerSpec,
)
from agentenv.state._canonical import digest

_WHEN_SUMMARY = ("type", "tool", "roles", "repeat", "at", "after", "offset", "every", "count")
_WHEN_SUMMARY += ("until", "seed", "delay")


def wall() -> str:
    """The wall-clock time now, RFC 3339."""
    return iso(datetime.now(UTC)) or ""


class TriggerError(ValueError):
    """A registration or removal that cannot be done; nothing was changed."""


@dataclass
class ArmedTrigger:
    """A registered trigger and its run-time status."""

    spec: TriggerSpec
    watch_roles: list[str] | None = None
    status: TriggerStatus = "armed"
    fire_count: int = 0
    failure_count: int = 0
    attempts: int = 0  # firings begun, failed ones included (`count` limits these)
    next_due: datetime | None = None
    detected_at: str | None = None
    fired_at: str | None = None
    last_failure_at: str | None = None
    waiting: bool = False
    running: bool = False  # a firing has started and not yet ended (it may be waiting)
    held: list[Firing] = field(default_factory=list)  # detections waiting for their turn
    error: str | None = None
    rng: random.Random | None = None
    delay_rngs: dict[int, random.Random] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def fired(self) -> int:
        """Successful firings."""
        return self.fire_count


@dataclass
class Firing:
    """One occasion on which a trigger's actions are to run (or go on running).

    `cause` is the virtual moment that set it off (the call, or the time mark): an action's
    `delay` counts from there. `start` is the action to begin at; `waited` says that
    action's delay has already been waited out."""

    trigger: ArmedTrigger
    at: datetime | None
    args: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    cause: datetime | None = None
    start: int = 0
    waited: bool = False

    def __post_init__(self) -> None:
        if self.cause is None:
            self.cause = self.at


# -- rules -----------------------------------------------------------------------------------


def spec_key(spec: TriggerSpec) -> dict[str, Any]:
    return spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)


def check_executors(spec: TriggerSpec, executors: dict[str | None, Executor]) -> None:
    for i, action in enumerate(spec.actions):
        if not isinstance(action, NlAction) or action.executor is None:
            continue
        if action.executor not in executors:
            named = sorted(n for n in executors if n is not None)
            raise TriggerError(
                f"trigger {spec.id!r}: actions[{i}].executor {action.executor!r} is not a "
                f"registered executor (registered: {', '.join(named) or 'none'})"
            )
        roles = spec.when.roles if isinstance(spec.when, ActionWhen | StateWhen) else None
        role = executors[action.executor].role
        if roles and role in roles:
            raise TriggerError(
                f"trigger {spec.id!r}: when.roles includes {role!r}, the role of the executor "
                f"actions[{i}] goes to, so its replies would provoke it again"
            )
    for i, action in enumerate(spec.actions):
        if isinstance(action, ToolAction) and action.as_ == "default":
            raise TriggerError(
                f"trigger {spec.id!r}: actions[{i}].as must name a role other than 'default'"
            )


def settled(trigger: ArmedTrigger, status: TriggerStatus) -> TriggerStatus:
    # While another of its firings waits to go on, a trigger is still firing.
    return "firing" if trigger.waiting else status


def info(trigger: ArmedTrigger, queue: list[tuple[datetime, int, Firing]]) -> TriggerInfo:
    spec = trigger.spec
    when = spec.when.model_dump(mode="json", by_alias=True, exclude_none=True)
    return TriggerInfo(
        id=trigger.id,
        type=spec.when.type,
        when={k: when[k] for k in _WHEN_SUMMARY if k in when},
        status=trigger.status,
        detected_at=trigger.detected_at,
        fired_at=trigger.fired_at,
        fire_count=trigger.fire_count,
        failure_count=trigger.failure_count,
        last_failure_at=trigger.last_failure_at,
        barrier=spec.barrier.model_dump(mode="json") if spec.barrier else None,
        pending=len(trigger.held)
        + sum(1 for _, _, f in queue if f.trigger is trigger and not (f.start or f.waited)),
        waiting=trigger.waiting,
        next_mark=iso(trigger.next_due),
        description=spec.description,
        error=trigger.error,
    )


def first_due(
    when: TimeWhen,
    now: datetime | None,
    clock_start: datetime | None,
    rng: random.Random,
) -> datetime | None:
    """The first moment of a time trigger; None while it cannot be known yet (the clock is
    not armed, or its anchor has not fired)."""
    if when.at is not None:
        return when.at
    if now is None or when.anchor is not None:
        return None
    if when.offset is not None:
        return add(clock_start or now, when.offset)
    if isinstance(when.after, timedelta):
        return add(now, when.after)
    gap = interval(when, rng)
    assert gap is not None
    return add(now, gap)


def next_due(
    trigger: ArmedTrigger, last: datetime, fired: int, clock_start: datetime | None
) -> datetime | None:
    when = trigger.spec.when
    assert isinstance(when, TimeWhen) and trigger.rng is not None
    gap = interval(when, trigger.rng)
    if gap is None:
        return None
    # `fired` counts firings already handed out, including the one at `last`.
    if when.count is not None and trigger.attempts + fired >= when.count:
        return None
    nxt = add(last, gap)
    until = until_of(when, clock_start)
    if nxt is None or (until is not None and nxt > until):
        return None
    return nxt


def merge_executors(
    current: dict[str | None, Executor],
    registration: TriggerRegistration,
    watch: list[str] | None,
    fixed: set[str | None],
) -> dict[str | None, Executor]:
    """The executors once a registration is in: those before and its own (the unnamed one
    under None); one of the `fixed` names may not change, and a watched role is refused."""
    incoming: dict[str | None, Executor] = dict(registration.executors)
    if registration.executor is not None:
        incoming[None] = registration.executor
    merged = dict(current)
    for name, executor in incoming.items():
        label = "executor" if name is None else f"executors[{name!r}]"
        if executor.role and watch is not None and executor.role in watch:
            raise TriggerError(
                f"{label}.role {executor.role!r} is in watch_roles {watch}: the executor's "
                "own calls would provoke triggers"
            )
        if name in fixed and merged[name] != executor:
            raise TriggerError(
                f"{label} conflicts with the registered one; clear the triggers to change it"
            )
        merged[name] = executor
    return merged


def until_of(when: TimeWhen, clock_start: datetime | None) -> datetime | None:
    """The instant a time trigger's `until` names (a duration counts from the clock's start)."""
    until = when.until
    if isinstance(until, timedelta):
        return add(clock_start, until) if clock_start is not None else None
    return until


def resolve_watch(
    given: list[str] | None, current: list[str] | None, is_set: bool
) -> list[str] | None:
    """The watch roles once a registration is in: set once, by the first that gives them."""
    if given is None:
        return current
    if is_set and sorted(set(given)) != sorted(set(current or [])):
        was = "every role" if current is None else sorted(current)
        raise TriggerError(
            f"watch_roles {sorted(set(given))} conflicts with the registered {was}; "
            "clear the triggers to change it"
        )
    return sorted(set(given))


def time_rng(trigger_id: str, when: TimeWhen) -> random.Random:
    """A time trigger's generator of random intervals; with no `seed`, one derived from
    the id, so a run stays reproducible."""
    return random.Random(when.seed if when.seed is not None else digest("trigger", trigger_id))
