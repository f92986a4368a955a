"""Trigger bookkeeping for one instance: what is armed, what is due, what happened.

The engine decides *when* triggers fire and keeps their status and firing log; the
Firer (gateway.firing) carries out the actions, through the same pipeline as every tool
call. Keeping the two apart lets the engine be tested with no tools at all.

Timing rules (docs/gateway.md has them in full): immediate firings run right after the
provoking call, before its answer; delayed ones (a `when.delay`, an action's `delay`, an
executor's hours) and time triggers run once the virtual clock gets there, missed `every`
occurrences included; a deadline's `unless` call cancels it; calls by trigger actions, and
by executors unless a `when.roles` names them, provoke nothing (no cascades, no loops).
"""

from __future__ import annotations

import heapq
import itertools
import random
from datetime import datetime, timedelta
from typing import Any

from agentenv.gateway.trigger_model import (
    ArmedTrigger,
    Firing,
    TriggerError,
    check_executors,
    first_due,
    info,
    merge_executors,
    next_due,
    resolve_watch,
    settled,
    spec_key,
    time_rng,
    until_of,
    wall,
)
from agentenv.gateway.trigger_rules import (
    add,
    matches,
)
from agentenv.gateway.trigger_state import (
    EventKind,
    RegisterResult,
    TriggerConfig,
    TriggerEvent,
    TriggersState,
    TriggerStatus,
    iso,
)
from agentenv.spec.triggers import (
    ActionWhen,
    Executor,
    ExpDelay,
    NlAction,
    StateWhen,
    TimeWhen,
    TriggerRegistration,
)

SUPPORTED_TRIGGER_FEATURES: tuple[str, ...] = (
    "named_executors",
    "provoking_roles",
    "action_delay",
    "executor_hours",
    "unless",
    "executor_hours_time_zone",
)
"""The triggers/v1 features (upstream's names) we honour, for the card; never `website`."""
MAX_CATCH_UP = 1000  # occurrences of one `every` trigger fired by a single clock jump


class TriggerEngine:
    """The triggers of one instance."""

    # Class-level defaults, set on an engine only once it has time triggers or is in the
    # ticker's heap: an idle instance's engine pays no bytes for them.
    _time_triggers: tuple[ArmedTrigger, ...] = ()
    tick_gen: int = 0
    """The Firer's schedule slot for this instance (gateway.ticker): the generation of its
    live entry in the due-time heap (0: none)."""
    tick_key: tuple[datetime, int] | None = None
    """What that entry was worked out from (mark, clock epoch): an unchanged due time costs
    no push."""

    def __init__(self) -> None:
        self._triggers: dict[str, ArmedTrigger] = {}
        self._queue: list[tuple[datetime, int, Firing]] = []
        self._counter = itertools.count()
        self._events: list[TriggerEvent] = []
        self._by_tool: dict[str, list[ArmedTrigger]] = {}
        self._unless_tools: set[str] = set()
        self._timed = False  # any time trigger registered; lets `due` skip its scan
        self._watch_roles: list[str] | None = None
        self._watch_set = False
        self._fixed: set[str | None] = set()  # executor names set for good
        self.executors: dict[str | None, Executor] = {}  # the unnamed one under None

    # -- registration ---------------------------------------------------------------------

    def register(
        self,
        registration: TriggerRegistration,
        now: datetime | None,
        clock_start: datetime | None,
        *,
        document: bool = False,
    ) -> RegisterResult:
        """Add triggers by id, all or nothing: the same spec again changes nothing; another
        spec under a registered id, or other watch roles or executors, is refused (but a
        `document` registration, the environment's own, fixes neither for good)."""
        if document:
            given = registration.watch_roles
            watch = sorted(set(given)) if given is not None else None
        else:
            watch = resolve_watch(registration.watch_roles, self._watch_roles, self._watch_set)
        executors = merge_executors(self.executors, registration, watch, self._fixed)
        added: list[str] = []
        armed: list[ArmedTrigger] = []
        for spec in registration.triggers:
            added.append(spec.id)
            check_executors(spec, executors)
            existing = self._triggers.get(spec.id)
            if existing is not None:
                if spec_key(existing.spec) != spec_key(spec):
                    raise TriggerError(
                        f"trigger {spec.id!r} is already registered with a different spec; "
                        "remove it first or use a new id"
                    )
                continue
            per = spec.watch_roles if spec.watch_roles is not None else watch
            trigger = ArmedTrigger(spec, per)
            trigger.delay_rngs = {
                i: random.Random(a.delay.seed)
                for i, a in enumerate(spec.actions)
                if isinstance(a.delay, ExpDelay)
            }
            when = spec.when
            if isinstance(when, ActionWhen | StateWhen) and when.delay and now is None:
                raise TriggerError(f"trigger {spec.id!r}: 'delay' needs an armed clock")
            if isinstance(when, TimeWhen):
                trigger.rng = time_rng(spec.id, when)
                trigger.next_due = first_due(when, now, clock_start, trigger.rng)
            armed.append(trigger)
        if not document:
            self._watch_roles = watch
            self._watch_set = self._watch_set or registration.watch_roles is not None
            self._fixed |= set(registration.executors)
            if registration.executor is not None:
                self._fixed.add(None)
        self.executors = executors
        for trigger in armed:
            self._triggers[trigger.id] = trigger
            self.log(trigger.id, "added", now)
        self._reindex()
        return RegisterResult(added=added, all=list(self._triggers))

    def remove(self, ids: list[str], now: datetime | None) -> list[str]:
        """Remove triggers by id (unknown ids are ignored); returns those removed."""
        removed = [i for i in dict.fromkeys(ids) if i in self._triggers]
        for trigger_id in removed:
            del self._triggers[trigger_id]
            self.log(trigger_id, "removed", now)
        self._queue = [q for q in self._queue if q[2].trigger.id not in removed]
        heapq.heapify(self._queue)
        self._reindex()
        return removed

    def clear(self) -> None:
        """Forget every trigger, the watch roles, the executors and the firing log."""
        self._triggers.clear()
        self._queue.clear()
        self._events.clear()
        self._watch_roles, self._watch_set = None, False
        self._fixed = set()
        self.executors = {}
        self._reindex()

    def _reindex(self) -> None:
        self._by_tool = {}
        self._time_triggers = tuple(
            t for t in self._triggers.values() if isinstance(t.spec.when, TimeWhen)
        )
        self._timed = bool(self._time_triggers)
        self._unless_tools = set()
        for trigger in self._triggers.values():
            when = trigger.spec.when
            if isinstance(when, ActionWhen):
                self._by_tool.setdefault(when.tool, []).append(trigger)
            if isinstance(when, TimeWhen) and when.unless is not None:
                self._unless_tools.add(when.unless.tool)

    # -- who provokes what ----------------------------------------------------------------

    def executor_for(self, action: NlAction) -> Executor | None:
        """The executor an nl action goes to: the one it names, else the unnamed one."""
        return self.executors.get(action.executor)

    def _provoked_by(self, trigger: ArmedTrigger, role: str) -> bool:
        when = trigger.spec.when
        roles = None
        if isinstance(when, ActionWhen | StateWhen):
            roles = when.roles
        elif when.unless is not None:
            roles = when.unless.roles
        if roles is not None:
            return role in roles
        if trigger.watch_roles is not None and role not in trigger.watch_roles:
            return False
        return role not in {e.role for e in self.executors.values() if e.role}

    # -- what fires -----------------------------------------------------------------------

    @property
    def has_state_triggers(self) -> bool:
        """Whether any state trigger is armed (so checks must run after calls)."""
        return any(
            isinstance(t.spec.when, StateWhen) and t.status == "armed"
            for t in self._triggers.values()
        )

    @property
    def empty(self) -> bool:
        """Whether no trigger is registered (lets the gateway skip all trigger work)."""
        return not self._triggers

    def on_call(
        self, role: str, tool: str, args: dict[str, Any], result: Any, now: datetime | None
    ) -> list[Firing]:
        """Cancel the deadlines this successful call answers, then return the action
        triggers it provoked (delayed ones are queued instead)."""
        scope = {"args": args, "result": result}
        if tool in self._unless_tools:
            self._cancel_answered(role, tool, scope, now)
        out: list[Firing] = []
        for trigger in self._by_tool.get(tool, ()):
            when = trigger.spec.when
            assert isinstance(when, ActionWhen)
            if not self._provoked_by(trigger, role):
                continue
            if trigger.status not in ("armed", "queued", "firing") or (
                trigger.status != "armed" and not when.repeat
            ):
                continue
            if matches(when.where, scope):
                self._detected(trigger, now, f"{tool} matched", role, tool)
                firing = Firing(trigger, now, args, result)
                if trigger.running and when.delay is None:
                    # One of its firings runs (or waits): this one takes its turn after.
                    trigger.held.append(firing)
                    trigger.status = "queued"
                    continue
                out += self._schedule(firing, when.delay, now)
        return out

    def take_held(self, trigger: ArmedTrigger) -> Firing | None:
        """The next firing that waited for the trigger's last one to end, if any."""
        if trigger.held and self._triggers.get(trigger.id) is trigger:
            return trigger.held.pop(0)
        return None

    def _cancel_answered(
        self, role: str, tool: str, scope: dict[str, Any], now: datetime | None
    ) -> None:
        for trigger in list(self._triggers.values()):
            when = trigger.spec.when
            if not isinstance(when, TimeWhen) or when.unless is None:
                continue
            if when.unless.tool != tool or trigger.status != "armed":
                continue
            if not self._provoked_by(trigger, role):
                continue
            if when.anchor is not None and trigger.next_due is None:
                # Its window opens when its anchor starts firing (the anchor's own
                # reply counts), not before.
                anchor = self._triggers.get(when.anchor)
                if anchor is None or anchor.status not in ("firing", "queued"):
                    continue
            if matches(when.unless.where, scope):
                provoking = {"tool": tool, "role": role}
                self._cancel(trigger, now, f"{tool} by {role} answered it", provoking=provoking)

    def _cancel(self, trigger: ArmedTrigger, now: datetime | None, why: str, **cause: Any) -> None:
        trigger.status = "cancelled"
        trigger.next_due = None
        self.log(trigger.id, "cancelled", now, why, **cause)
        for other in self._triggers.values():
            when = other.spec.when
            if isinstance(when, TimeWhen) and when.anchor == trigger.id and other.status == "armed":
                self._cancel(
                    other, now, f"its anchor {trigger.id!r} was cancelled", anchor=trigger.id
                )

    def _detected(
        self,
        trigger: ArmedTrigger,
        now: datetime | None,
        detail: str,
        role: str | None = None,
        tool: str | None = None,
    ) -> None:
        trigger.detected_at = wall()
        provoking = {"tool": tool, "role": role} if tool is not None else {"source": "clock"}
        self.log(trigger.id, "detected", now, detail, provoking=provoking)

    def state_triggers(self, role: str) -> list[ArmedTrigger]:
        """Armed state triggers this role's calls provoke."""
        return [
            t
            for t in self._triggers.values()
            if isinstance(t.spec.when, StateWhen)
            and t.status == "armed"
            and self._provoked_by(t, role)
        ]

    def state_matched(self, trigger: ArmedTrigger, now: datetime | None) -> list[Firing]:
        """A state trigger whose checks all hold: fire now or queue it."""
        assert isinstance(trigger.spec.when, StateWhen)
        self._detected(trigger, now, "state checks hold")
        return self._schedule(Firing(trigger, now), trigger.spec.when.delay, now)

    def _schedule(
        self, firing: Firing, delay: timedelta | None, now: datetime | None
    ) -> list[Firing]:
        if delay is None or now is None:
            return [firing]
        due = add(now, delay)
        if due is None:  # past the end of time: it never comes due
            self._failed(firing.trigger, now, "its delay runs past the end of time")
            return []
        firing.at = due
        firing.trigger.status = "queued"
        heapq.heappush(self._queue, (due, next(self._counter), firing))
        self.log(firing.trigger.id, "delayed", now, f"due {iso(due)}")
        return []

    def defer(
        self,
        firing: Firing,
        index: int,
        due: datetime,
        kind: EventKind,
        now: datetime | None,
        *,
        waited: bool,
    ) -> None:
        """Put the rest of a firing off until `due`, going on from action `index`."""
        rest = Firing(
            firing.trigger,
            due,
            firing.args,
            firing.result,
            cause=firing.cause,
            start=index,
            waited=waited,
        )
        firing.trigger.waiting = True
        heapq.heappush(self._queue, (due, next(self._counter), rest))
        extra = {"action_index": index, "until": iso(due)}
        self.log(firing.trigger.id, kind, now, f"actions[{index}] waits until {iso(due)}", **extra)

    def next_mark(self) -> datetime | None:
        """The earliest virtual moment at which `due` has something to hand out (a queued
        firing, an armed time trigger's next mark, or its retirement past `until`); None
        when nothing waits for the clock.

        A time trigger armed with no mark yet is left out: it has one once the clock is
        armed (`rearmed`), unless its anchor has not fired (that firing sets it) or its
        first moment lies past the end of time (it never comes due)."""
        mark = self._queue[0][0] if self._queue else None
        for trigger in self._time_triggers:
            moment = trigger.next_due
            if moment is None or trigger.status != "armed":
                continue
            if mark is None or moment < mark:
                mark = moment
        return mark

    def due(self, now: datetime | None, clock_start: datetime | None = None) -> list[Firing]:
        """Queued and time firings whose moment has come, in time order."""
        if now is None or not (self._queue or self._timed):
            return []
        out: list[tuple[datetime, int, Firing]] = []
        while self._queue and self._queue[0][0] <= now:
            out.append(heapq.heappop(self._queue))
        for trigger in self._triggers.values():
            when = trigger.spec.when
            if not isinstance(when, TimeWhen) or trigger.status != "armed":
                continue
            if trigger.next_due is None and when.anchor is None and trigger.attempts == 0:
                # Registered before the clock was armed: its first moment is known now.
                assert trigger.rng is not None
                trigger.next_due = first_due(when, now, clock_start or now, trigger.rng)
            until = until_of(when, clock_start)
            for handed_out in range(1, MAX_CATCH_UP + 1):
                moment = trigger.next_due
                if moment is None or moment > now:
                    break
                if until is not None and moment > until:  # over before it began: retired
                    trigger.next_due, trigger.status = None, "fired"
                    break
                out.append((moment, next(self._counter), Firing(trigger, moment)))
                trigger.next_due = next_due(trigger, moment, handed_out, clock_start)
        out.sort(key=lambda item: (item[0], item[1]))
        return [item[2] for item in out]

    def rearmed(self, now: datetime | None, clock_start: datetime | None) -> None:
        """The clock was set again: relative time triggers count from its new start (as the
        protocol re-anchors them; a backlog of the old timeline is dropped), but those
        anchored `after` another trigger."""
        for trigger in self._triggers.values():
            when = trigger.spec.when
            if not isinstance(when, TimeWhen) or trigger.status != "armed" or when.anchor:
                continue
            old, trigger.rng = trigger.next_due, time_rng(trigger.spec.id, when)
            trigger.next_due = first_due(when, now, clock_start, trigger.rng)
            if old is not None and old != trigger.next_due:
                self.log(trigger.id, "reanchored", now, dropped_mark=iso(old))

    def started(self, firing: Firing) -> None:
        """Mark a firing as running."""
        trigger = firing.trigger
        if firing.start == 0 and not firing.waited:
            trigger.attempts += 1
            if isinstance(trigger.spec.when, TimeWhen):
                self._detected(trigger, firing.at, f"due at {iso(firing.at)}")
        trigger.status = "firing"
        trigger.waiting = False
        trigger.running = True

    def finished(self, firing: Firing, error: str | None, now: datetime | None) -> None:
        """Record how a firing ended and set the trigger's next status."""
        trigger = firing.trigger
        trigger.running = False
        when = trigger.spec.when
        repeats = isinstance(when, ActionWhen | StateWhen) and when.repeat
        mine = [q[2] for q in self._queue if q[2].trigger is trigger]
        pending = bool(trigger.held) or any(f.start == 0 and not f.waited for f in mine)
        if any(f.start or f.waited for f in mine):  # another firing waits to go on
            trigger.waiting = True
        if error is not None:
            trigger.error = error
            self._failed(trigger, now, error)
            if isinstance(when, TimeWhen):
                # A failed time trigger is retired, as the protocol does; an action or
                # state trigger re-arms, so one bad firing does not silence it.
                trigger.status, trigger.next_due = "failed", None
                self._queue = [q for q in self._queue if q[2].trigger is not trigger]
                heapq.heapify(self._queue)
            else:
                trigger.status = settled(trigger, "queued" if pending else "armed")
            return
        trigger.fire_count += 1
        trigger.fired_at = wall()
        self.log(trigger.id, "fired", now, fire_count=trigger.fire_count)
        if isinstance(when, TimeWhen):
            status: TriggerStatus = "armed" if trigger.next_due is not None else "fired"
        elif pending:
            status = "queued"
        else:
            status = "armed" if repeats else "fired"
        trigger.status = settled(trigger, status)
        self._anchor_dependents(trigger, now)

    def _failed(self, trigger: ArmedTrigger, now: datetime | None, error: str) -> None:
        self.log(trigger.id, "failed", now, error)

    def _anchor_dependents(self, anchor: ArmedTrigger, now: datetime | None) -> None:
        if now is None:
            return
        for trigger in self._triggers.values():
            when = trigger.spec.when
            if not isinstance(when, TimeWhen) or when.anchor != anchor.id:
                continue
            if trigger.status != "armed" or trigger.next_due is not None or not when.offset:
                continue
            trigger.next_due = add(now, when.offset)
            self.log(trigger.id, "anchored", now, f"due {iso(trigger.next_due)}")

    # -- log and state --------------------------------------------------------------------

    def log(
        self,
        trigger_id: str | None,
        event: EventKind,
        now: datetime | None,
        detail: str | None = None,
        **extra: Any,
    ) -> None:
        """Append to the firing log (a failure is also counted on its trigger)."""
        trigger = self._triggers.get(trigger_id) if trigger_id else None
        if trigger is not None and event in ("failed", "eval_error"):
            trigger.failure_count += 1
            trigger.last_failure_at = wall()
        self._events.append(
            TriggerEvent(
                seq=len(self._events) + 1,
                ts=wall(),
                virtual_time=iso(now),
                kind=event,
                trigger_id=trigger_id,
                detail=detail,
                **extra,
            )
        )

    def state(self) -> TriggersState:
        """The config, every trigger's status and the whole firing log."""
        return TriggersState(
            config=TriggerConfig(
                watch_roles=self._watch_roles,
                executor_configured=None in self.executors,
                executors=sorted(n for n in self.executors if n is not None),
            ),
            triggers=[info(t, self._queue) for t in self._triggers.values()],
            events=list(self._events),
        )

    def get(self, trigger_id: str) -> ArmedTrigger | None:
        """The trigger with this id, if registered."""
        return self._triggers.get(trigger_id)
