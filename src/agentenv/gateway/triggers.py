"""Trigger bookkeeping for one instance: what is armed, what is due, what happened.

The engine decides *when* triggers fire and keeps their status and firing log; the
Gateway carries out the actions (through the same pipeline as every tool call). Keeping
the two apart lets the engine be tested with no tools at all.

Timing rules (written down in docs/gateway.md):
* action and state triggers fire right after the provoking call, before its answer goes
  back, unless they carry a `delay` (ours), in which case they are queued until the
  virtual clock reaches call time + delay;
* time triggers fire once the virtual clock has reached their due time; every missed
  occurrence of an `every` trigger fires, in order, up to `count` and `until`;
* calls made by trigger actions do not provoke triggers (no cascades, no loops).
"""

from __future__ import annotations

import heapq
import itertools
import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

from agentenv.spec.triggers import (
    ActionWhen,
    Executor,
    Predicate,
    StateWhen,
    TimeWhen,
    TriggerRegistration,
    TriggerSpec,
    WherePredicate,
)
from agentenv.state._canonical import digest

TriggerStatus = Literal["armed", "firing", "queued", "fired", "failed"]

SUPPORTED_TRIGGER_FEATURES: tuple[str, ...] = ()
"""The triggers/v1 features (upstream's names) this engine honours; the card declares them."""
MAX_CATCH_UP = 1000  # occurrences of one `every` trigger fired by a single clock jump


class TriggerError(ValueError):
    """A registration or removal that cannot be done; nothing was changed."""


class LogEntry(BaseModel):
    """One line of a trigger's firing log."""

    seq: int
    trigger_id: str
    event: str
    virtual_time: datetime | None = None
    detail: str | None = None


class TriggerInfo(BaseModel):
    """A trigger as `GET /triggers/state` shows it."""

    id: str
    type: str
    status: TriggerStatus
    fired: int
    next_due: datetime | None = None
    description: str = ""
    error: str | None = None


class TriggersState(BaseModel):
    """What `GET /triggers/state` answers."""

    triggers: list[TriggerInfo]
    log: list[LogEntry]


@dataclass
class ArmedTrigger:
    """A registered trigger and its run-time status."""

    spec: TriggerSpec
    watch_roles: list[str] | None = None
    executor: Executor | None = None
    status: TriggerStatus = "armed"
    fired: int = 0
    next_due: datetime | None = None
    error: str | None = None
    rng: random.Random | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    def watches(self, role: str) -> bool:
        return self.watch_roles is None or role in self.watch_roles


@dataclass
class Firing:
    """One occasion on which a trigger's actions are to run."""

    trigger: ArmedTrigger
    at: datetime | None
    args: dict[str, Any] = field(default_factory=dict)
    result: Any = None


class TriggerEngine:
    """The triggers of one instance."""

    def __init__(self) -> None:
        self._triggers: dict[str, ArmedTrigger] = {}
        self._queue: list[tuple[datetime, int, Firing]] = []
        self._counter = itertools.count()
        self._log: list[LogEntry] = []
        self._by_tool: dict[str, list[ArmedTrigger]] = {}
        self._timed = False  # any time trigger registered; lets `due` skip its scan

    # -- registration ---------------------------------------------------------------------

    def register(
        self,
        registration: TriggerRegistration,
        now: datetime | None,
        clock_start: datetime | None,
    ) -> list[str]:
        """Add triggers (replacing any with the same id). All or nothing."""
        armed: list[ArmedTrigger] = []
        for spec in registration.triggers:
            watch = spec.watch_roles if spec.watch_roles is not None else registration.watch_roles
            trigger = ArmedTrigger(spec, watch, registration.executor)
            when = spec.when
            if isinstance(when, ActionWhen | StateWhen) and when.delay and now is None:
                raise TriggerError(f"trigger {spec.id!r}: 'delay' needs an armed clock")
            if isinstance(when, TimeWhen):
                # No seed given: one derived from the id, so a run stays reproducible.
                seed = when.seed if when.seed is not None else digest("trigger", spec.id)
                trigger.rng = random.Random(seed)
                trigger.next_due = _first_due(spec.id, when, now, clock_start, trigger.rng)
            armed.append(trigger)
        replaced = {t.id for t in armed if t.id in self._triggers}
        if replaced:  # a replaced trigger's queued firings go with it
            self._queue = [q for q in self._queue if q[2].trigger.id not in replaced]
            heapq.heapify(self._queue)
        for trigger in armed:
            self._triggers[trigger.id] = trigger
            self.log(trigger.id, "added", now)
        self._reindex()
        return [t.id for t in armed]

    def remove(self, ids: list[str], now: datetime | None) -> None:
        """Remove triggers by id; unknown ids are an error and nothing is removed."""
        ids = list(dict.fromkeys(ids))
        missing = [i for i in ids if i not in self._triggers]
        if missing:
            raise TriggerError(f"no trigger {', '.join(map(repr, missing))}")
        for trigger_id in ids:
            del self._triggers[trigger_id]
            self.log(trigger_id, "removed", now)
        self._queue = [q for q in self._queue if q[2].trigger.id not in ids]
        heapq.heapify(self._queue)
        self._reindex()

    def clear(self, now: datetime | None) -> None:
        """Remove every trigger."""
        self.remove(list(self._triggers), now)

    def _reindex(self) -> None:
        self._by_tool = {}
        self._timed = any(isinstance(t.spec.when, TimeWhen) for t in self._triggers.values())
        for trigger in self._triggers.values():
            if isinstance(trigger.spec.when, ActionWhen):
                self._by_tool.setdefault(trigger.spec.when.tool, []).append(trigger)

    # -- what fires -----------------------------------------------------------------------

    @property
    def has_state_triggers(self) -> bool:
        """Whether any state trigger is armed (so checks must run after calls)."""
        return any(
            isinstance(t.spec.when, StateWhen) and t.status == "armed"
            for t in self._triggers.values()
        )

    def on_call(
        self, role: str, tool: str, args: dict[str, Any], result: Any, now: datetime | None
    ) -> list[Firing]:
        """Action triggers provoked by a successful call; delayed ones are queued instead."""
        candidates = self._by_tool.get(tool)
        if not candidates:
            return []
        scope = {"args": args, "result": result}
        out = []
        for trigger in candidates:
            when = trigger.spec.when
            assert isinstance(when, ActionWhen)
            if trigger.status not in ("armed", "queued") or not trigger.watches(role):
                continue
            if trigger.status == "queued" and not when.repeat:
                continue
            if all(_test(p, _lookup(scope, p.path)) for p in when.where):
                self.log(trigger.id, "detected", now, f"{tool} matched")
                out += self._schedule(Firing(trigger, now, args, result), when.delay, now)
        return out

    @property
    def empty(self) -> bool:
        """Whether no trigger is registered (lets the gateway skip all trigger work)."""
        return not self._triggers

    def state_triggers(self, role: str) -> list[ArmedTrigger]:
        """Armed state triggers that watch this role."""
        return [
            t
            for t in self._triggers.values()
            if isinstance(t.spec.when, StateWhen) and t.status == "armed" and t.watches(role)
        ]

    def state_matched(self, trigger: ArmedTrigger, now: datetime | None) -> list[Firing]:
        """A state trigger whose checks all hold: fire now or queue it."""
        assert isinstance(trigger.spec.when, StateWhen)
        self.log(trigger.id, "detected", now, "state checks hold")
        return self._schedule(Firing(trigger, now), trigger.spec.when.delay, now)

    def _schedule(
        self, firing: Firing, delay: timedelta | None, now: datetime | None
    ) -> list[Firing]:
        if delay is None or now is None:
            return [firing]
        due = _add(now, delay)
        if due is None:  # past the end of time: it never comes due
            self.log(firing.trigger.id, "failed", now, "its delay runs past the end of time")
            return []
        firing.at = due
        firing.trigger.status = "queued"
        heapq.heappush(self._queue, (firing.at, next(self._counter), firing))
        self.log(firing.trigger.id, "queued", now, f"due {firing.at.isoformat()}")
        return []

    def due(self, now: datetime | None) -> list[Firing]:
        """Queued and time firings whose moment has come, in time order."""
        if now is None or not (self._queue or self._timed):
            return []
        out: list[tuple[datetime, int, Firing]] = []
        while self._queue and self._queue[0][0] <= now:
            out.append(heapq.heappop(self._queue))
        for trigger in self._triggers.values():
            if not isinstance(trigger.spec.when, TimeWhen) or trigger.status != "armed":
                continue
            for handed_out in range(1, MAX_CATCH_UP + 1):
                due = trigger.next_due
                if due is None or due > now:
                    break
                out.append((due, next(self._counter), Firing(trigger, due)))
                trigger.next_due = _next_due(trigger, due, fired=handed_out)
        out.sort(key=lambda item: (item[0], item[1]))
        return [item[2] for item in out]

    def started(self, firing: Firing) -> None:
        """Mark a firing as running."""
        firing.trigger.status = "firing"

    def finished(self, firing: Firing, error: str | None, now: datetime | None) -> None:
        """Record how a firing ended and set the trigger's next status."""
        trigger = firing.trigger
        trigger.fired += 1
        when = trigger.spec.when
        repeats = isinstance(when, ActionWhen | StateWhen) and when.repeat
        pending = any(q[2].trigger is trigger for q in self._queue)
        if error is not None:
            # A trigger that fires again (repeat, `every`, or already queued) stays armed:
            # one failed firing must not silence the rest. Its last error is kept.
            trigger.error = error
            self.log(trigger.id, "failed", now, error)
            again = repeats or pending or (isinstance(when, TimeWhen) and trigger.next_due)
            trigger.status = ("queued" if pending else "armed") if again else "failed"
            return
        self.log(trigger.id, "fired", now)
        if isinstance(when, TimeWhen):
            trigger.status = "armed" if trigger.next_due is not None else "fired"
        elif pending:
            trigger.status = "queued"
        else:
            trigger.status = "armed" if repeats else "fired"

    # -- log and state --------------------------------------------------------------------

    def log(
        self, trigger_id: str, event: str, now: datetime | None, detail: str | None = None
    ) -> None:
        """Append to the firing log."""
        self._log.append(
            LogEntry(
                seq=len(self._log),
                trigger_id=trigger_id,
                event=event,
                virtual_time=now,
                detail=detail,
            )
        )

    def state(self) -> TriggersState:
        """Every trigger's status and the whole firing log."""
        return TriggersState(
            triggers=[
                TriggerInfo(
                    id=t.id,
                    type=t.spec.when.type,
                    status=t.status,
                    fired=t.fired,
                    next_due=t.next_due,
                    description=t.spec.description,
                    error=t.error,
                )
                for t in self._triggers.values()
            ],
            log=list(self._log),
        )

    def get(self, trigger_id: str) -> ArmedTrigger | None:
        """The trigger with this id, if registered."""
        return self._triggers.get(trigger_id)


# -- helpers --------------------------------------------------------------------------------


def _interval(when: TimeWhen, rng: random.Random) -> timedelta | None:
    if when.every is None:
        return None
    if isinstance(when.every, tuple):
        low, high = (x.total_seconds() for x in when.every)
        return timedelta(seconds=rng.uniform(low, high))
    return when.every


def _add(moment: datetime, delta: timedelta) -> datetime | None:
    """`moment + delta`, or None (never) past the last representable instant."""
    try:
        return moment + delta
    except OverflowError:
        return None


def _first_due(
    trigger_id: str,
    when: TimeWhen,
    now: datetime | None,
    clock_start: datetime | None,
    rng: random.Random,
) -> datetime | None:
    if when.at is not None:
        return when.at
    if now is None:
        raise TriggerError(f"trigger {trigger_id!r}: a relative time trigger needs an armed clock")
    if when.offset is not None:
        return _add(clock_start or now, when.offset)
    if when.after is not None:
        return _add(now, when.after)
    interval = _interval(when, rng)
    assert interval is not None
    return _add(now, interval)


def _next_due(trigger: ArmedTrigger, last: datetime, fired: int) -> datetime | None:
    when = trigger.spec.when
    assert isinstance(when, TimeWhen) and trigger.rng is not None
    interval = _interval(when, trigger.rng)
    if interval is None:
        return None
    # `fired` counts firings already handed out, including the one at `last`.
    if when.count is not None and trigger.fired + fired >= when.count:
        return None
    nxt = _add(last, interval)
    if nxt is None or (when.until is not None and nxt > when.until):
        return None
    return nxt


_MISSING = object()


def _lookup(scope: Any, path: str) -> Any:
    """The value at a dotted path (`result.items.0.id`), or _MISSING."""
    node = scope
    for part in path.split("."):
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif (
            isinstance(node, list)
            and part.lstrip("-").isdigit()
            and -len(node) <= int(part) < len(node)
        ):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def _test(predicate: Predicate | WherePredicate, value: Any) -> bool:
    if predicate.exists is not None:
        return (value is not _MISSING) == predicate.exists
    if value is _MISSING:
        return False
    if predicate.regex is not None:
        return isinstance(value, str) and re.search(predicate.regex, value) is not None
    return value == predicate.equals


def check_value(predicate: Predicate, value: Any, extract: str | None) -> bool:
    """Apply a check step's `extract` path and predicate to a tool result."""
    if extract:
        value = _lookup(value, extract.removeprefix("result."))
    return _test(predicate, value)


_TEMPLATE = re.compile(r"\$\{((?:args|result)(?:\.[^}.]+)*)\}")


class TemplateError(ValueError):
    """A `${...}` placeholder with no value in the provoking call."""


def render(value: Any, scope: dict[str, Any]) -> Any:
    """Fill `${args.x}` / `${result.x}` placeholders; a lone placeholder keeps its type."""
    if isinstance(value, str):
        whole = _TEMPLATE.fullmatch(value)
        if whole:
            return _resolve(whole.group(1), scope)
        return _TEMPLATE.sub(lambda m: str(_resolve(m.group(1), scope)), value)
    if isinstance(value, dict):
        return {k: render(v, scope) for k, v in value.items()}
    if isinstance(value, list):
        return [render(v, scope) for v in value]
    return value


def _resolve(path: str, scope: dict[str, Any]) -> Any:
    found = _lookup(scope, path)
    if found is _MISSING:
        raise TemplateError(f"${{{path}}} has no value in the provoking call")
    return found
