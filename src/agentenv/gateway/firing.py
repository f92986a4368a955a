"""Carrying out triggers: runs their actions through the gateway's own call pipeline.

The TriggerEngine decides what fires; the Firer makes it happen: tool actions become
calls (recorded with kind "trigger"), permission actions change tool access, state
checks and `verify` steps are read-only probes. `nl` actions go to the registration's
executor agent through the gateway's `nl_sender`, which the layers above install (the
A2A one lives in `agents.a2a.nl`; the gateway knows nothing of agents). While an `nl`
action waits for its executor, the instance's lock is released, so the executor can
call the instance's tools; the provoking call still waits for the firing to end.

Time triggers of a wall clock come due with nobody calling. The Firer's `Ticker`
(gateway.ticker, whose docstring has the details; docs/gateway.md "The ticker") fires them
and visits only the instances that have something due, so an idle gateway does no work
per live instance:

- a heap of (real due time, generation, instance id, weak engine): the reading of the
  clocks' `time.monotonic` at which an instance's earliest queued firing or time mark
  (`TriggerEngine.next_mark`) comes due (`VirtualClock.real_at`, exact to a float step);
  only clocks that move by themselves (wall mode, a rate above 0) are in it, since a
  stepped or frozen one moves only on calls and control ops, which fire what comes due;
- every `fire_due` (before and after each call with triggers, after set-time, advance, a
  registration, and on each visit) and every registration or removal ends by handing the
  instance back to the schedule; an unchanged (mark, clock epoch) costs a comparison, and
  `fire_due` skips the engine's scan while the next mark has not come;
- a new generation per push; the engine holds its live one, so the entries of dropped
  instances, removed triggers and moved due times are skipped when they surface (and
  compacted away when they pile up);
- the loop sleeps until the earliest due time but no sooner than `period` after its last
  visit (at most `period` late, as the sweep it replaces), and an earlier push wakes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agentenv.env.tool import SYSTEM, Principal
from agentenv.gateway.ticker import Ticker
from agentenv.gateway.trigger_model import Firing, TriggerError
from agentenv.gateway.trigger_rules import (
    MISSING,
    TemplateError,
    add,
    extract,
    holds,
    next_opening,
    render,
)
from agentenv.gateway.trigger_state import RegisterResult
from agentenv.spec.triggers import (
    CheckStep,
    Executor,
    ExpDelay,
    NlAction,
    PermissionAction,
    ToolAction,
    TriggerRegistration,
)

if TYPE_CHECKING:
    from agentenv.gateway.gateway import Gateway
    from agentenv.gateway.instance import Instance


_RETRY = (
    "\n\nThe change this asked for cannot be seen in the environment yet, so the last "
    "attempt did not pass its check. Please carry it out again, exactly as described."
)


class _ActionFailed(Exception):
    pass


class _Deferred(Exception):
    """The rest of the firing was put off (an action's delay, an executor's hours)."""


class NlActionError(Exception):
    """An `nl` action that could not be carried out; the message says why."""


@dataclass(frozen=True)
class NlInstruction:
    """What an `nl` action sends to its executor agent."""

    instruction: str
    trigger_id: str
    executor: Executor | None
    env: str
    instance: str
    virtual_time: datetime | None = None
    args: dict[str, Any] = field(default_factory=dict)
    result: Any = None


NlSender = Callable[[NlInstruction], Awaitable[str]]
"""Sends an instruction to the executor and returns its answer; raises NlActionError."""


async def no_nl_sender(request: NlInstruction) -> str:
    """The default: this gateway has no way to reach an executor agent."""
    raise NlActionError(
        "nl actions go to an executor agent over A2A, and this gateway has no A2A sender "
        "(serve it with `agent-env serve`, run it in a task, or pass Gateway(nl_sender=...))"
    )


async def _relock(lock: asyncio.Lock) -> None:
    """Take the lock back, even through a cancellation (re-raised once it is held), so
    that whoever holds it up the stack can release it."""
    cancelled = False
    while True:
        try:
            await lock.acquire()
            break
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        raise asyncio.CancelledError


class Firer:
    """Runs trigger firings for a gateway's instances."""

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.ticker = Ticker(self.fire_due)
        """When each instance next has a time trigger or queued firing due (gateway.ticker)."""

    def register(self, inst: Instance, registration: TriggerRegistration) -> RegisterResult:
        """Check the registration against the environment, then add it (all or nothing)."""
        from agentenv.gateway.errors import GatewayError

        def known(tool: str, where: str, trigger_id: str) -> None:
            if self.gateway._tool(inst, tool) is None:
                raise GatewayError(f"trigger {trigger_id!r}: {where} names unknown tool {tool!r}")

        for trigger in registration.triggers:
            when = trigger.when
            if when.type == "action":
                known(when.tool, "when.tool", trigger.id)
            if when.type == "state":
                for j, step in enumerate(when.check):
                    known(step.tool, f"when.check[{j}].tool", trigger.id)
            if when.type == "time" and when.unless is not None:
                known(when.unless.tool, "when.unless.tool", trigger.id)
            for i, action in enumerate(trigger.actions):
                if isinstance(action, ToolAction):
                    known(action.tool, f"actions[{i}].tool", trigger.id)
                    if action.as_ is not None and action.as_ not in self.gateway.env.roles:
                        raise GatewayError(
                            f"trigger {trigger.id!r}: actions[{i}].as names unknown role "
                            f"{action.as_!r} (roles: {', '.join(self.gateway.env.roles)})"
                        )
                for j, step in enumerate(action.verify or ()):
                    known(step.tool, f"actions[{i}].verify[{j}].tool", trigger.id)
        try:
            result = inst.triggers.register(
                registration,
                inst.clock.now(),
                inst.clock.start,
                # The environment's own triggers (armed on each new instance) are the one
                # registration that leaves the watch roles and executors open to a task's.
                document=registration is self.gateway.env.triggers,
            )
        except TriggerError as exc:
            raise GatewayError(str(exc)) from None
        self.ticker.schedule(inst)
        return result

    def remove(self, inst: Instance, ids: list[str] | None) -> list[str]:
        """Remove some triggers (unknown ids are ignored; returns those removed), or clear
        them all, with the watch roles, executors and firing log (`ids` None)."""
        if ids is None:
            inst.triggers.clear()
            removed: list[str] = []
        else:
            removed = inst.triggers.remove(ids, inst.clock.now())
        self.ticker.schedule(inst)
        return removed

    async def after_call(
        self, inst: Instance, principal: Principal, tool: str, args: dict[str, Any], result: Any
    ) -> None:
        """Fire what a successful agent call provoked: action triggers, then state triggers."""
        engine = inst.triggers
        if engine.empty:
            return
        now = inst.clock.now()
        firings = engine.on_call(principal.role, tool, args, result, now)
        for trigger in engine.state_triggers(principal.role):
            when = trigger.spec.when
            assert when.type == "state"
            try:
                holds = await self._check(inst, when.check, now)
            except Exception as exc:
                engine.log(trigger.id, "eval_error", now, f"{type(exc).__name__}: {exc}")
                continue
            if holds:
                firings += engine.state_matched(trigger, now)
        for firing in firings:
            await self.fire(inst, firing)

    async def fire_due(self, inst: Instance) -> None:
        """Fire queued and time triggers whose moment has come, then schedule the next
        visit (if the clock can bring one due by itself)."""
        engine, clock = inst.triggers, inst.clock
        mark = engine.next_mark()
        if mark is None:  # nothing waits for the clock (action and state triggers only)
            if engine.tick_gen:
                self.ticker.settle(inst, None, None)
            return
        now = clock.now()
        if now is None or mark > now:
            # Nothing due (the common case on the call path): `due` would hand out nothing
            # and change nothing, so its scan is skipped.
            self.ticker.settle(inst, mark, now)
            return
        for firing in engine.due(now, clock.start):
            await self.fire(inst, firing)
        self.ticker.schedule(inst)

    async def _check(
        self,
        inst: Instance,
        steps: list[CheckStep],
        now: datetime | None,
        scope: dict[str, Any] | None = None,
    ) -> bool:
        """Run a check's steps in order: each reads a tool, extracts a value, then tests it
        or binds it for the later steps' `${name}`; a bound value that is empty fails it."""
        bound: dict[str, Any] = {}
        for step in steps:
            args = render(step.args, scope or {"args": {}, "result": None}, bound)
            probed = await self.gateway.probe(inst, step.model_copy(update={"args": args}), now)
            value = extract(probed, step.extract)
            if step.bind is not None:
                if value is MISSING or value in (None, "", []):
                    return False
                bound[step.bind] = value
            if step.predicate is not None and not holds(step.predicate, value):
                return False
        return True

    async def fire(self, inst: Instance, firing: Firing) -> None:
        """Run one firing's actions in order; the first failure stops it."""
        engine = inst.triggers
        trigger = firing.trigger
        now = firing.at or inst.clock.now()
        if firing.cause is None:
            firing.cause = now
        engine.started(firing)
        scope = {"args": firing.args, "result": firing.result}
        error: str | None = None
        timeout = trigger.spec.barrier.timeout_seconds if trigger.spec.barrier else None
        deferred = False
        try:
            await asyncio.wait_for(self._run_actions(inst, firing, scope, now), timeout)
        except _Deferred:
            deferred = True  # the trigger stays firing, waiting to go on
        except _ActionFailed as exc:
            error = str(exc)
        except TimeoutError:
            error = f"the firing took longer than its barrier's {timeout:g} s"
            engine.log(trigger.id, "action_failed", now, error)
        except asyncio.CancelledError:
            error = "the firing was cancelled"
            raise
        finally:
            # Whatever happened (but a put-off), the trigger leaves `firing`, recorded.
            if not deferred:
                self._finished(inst, firing, error, now)
        if not deferred and (held := engine.take_held(trigger)) is not None:
            await self.fire(inst, held)

    def _finished(
        self, inst: Instance, firing: Firing, error: str | None, now: datetime | None
    ) -> None:
        trigger = firing.trigger
        inst.triggers.finished(firing, error, now)
        inst.trajectory.append(
            kind="trigger",
            wall_time=datetime.now(UTC),
            virtual_time=now,
            role=SYSTEM.role,
            principal=SYSTEM.name,
            trigger_id=trigger.id,
            event="failed" if error else "fired",
            detail=error,
            state_hash=inst.state.hash(),
            changelog_id=inst.state.changes,
        )

    async def _run_actions(
        self, inst: Instance, firing: Firing, scope: dict[str, Any], now: datetime | None
    ) -> None:
        engine = inst.triggers
        trigger = firing.trigger
        for i, action in enumerate(trigger.spec.actions):
            if i < firing.start:
                continue
            label = f"actions[{i}] ({action.type})"
            self._wait(inst, firing, i, action, now, label)
            try:
                if isinstance(action, ToolAction):
                    caller = (
                        Principal(role=action.as_, name=f"trigger:{trigger.id}")
                        if action.as_
                        else SYSTEM
                    )
                    result = await self.gateway.execute(
                        inst,
                        caller,
                        action.tool,
                        render(action.args, scope),
                        kind="trigger",
                        now=now,
                        trigger_id=trigger.id,
                    )
                    if not result.ok:
                        assert result.error is not None
                        raise _ActionFailed(f"{label}: {result.error.message}")
                elif isinstance(action, PermissionAction):
                    inst.access.apply(action.role, action.action, action.tools)
                elif isinstance(action, NlAction):
                    request = NlInstruction(
                        instruction=str(render(action.instruction, scope)),
                        trigger_id=trigger.id,
                        executor=engine.executor_for(action),
                        env=self.gateway.env.name,
                        instance=inst.id,
                        virtual_time=now,
                        args=dict(firing.args),
                        result=firing.result,
                    )
                    await self._send_nl(inst, request, label)
                    if action.verify is not None and not await self._check(
                        inst, action.verify, now, scope
                    ):
                        # As the protocol does: the executor gets one more try, told why.
                        engine.log(trigger.id, "verify_failed", now, label, action_index=i)
                        again = replace(request, instruction=request.instruction + _RETRY)
                        await self._send_nl(inst, again, label)
                if action.verify is not None:
                    if not await self._check(inst, action.verify, now, scope):
                        engine.log(trigger.id, "verify_failed", now, label, action_index=i)
                        raise _ActionFailed(f"{label}: verify did not hold")
                    engine.log(trigger.id, "verify_ok", now, label, action_index=i)
            except _ActionFailed as exc:
                engine.log(trigger.id, "action_failed", now, str(exc), action_index=i)
                raise
            except (TemplateError, Exception) as exc:  # a bad template, a check that raised
                reason = (
                    str(exc) if isinstance(exc, TemplateError) else f"{type(exc).__name__}: {exc}"
                )
                engine.log(trigger.id, "action_failed", now, f"{label}: {reason}", action_index=i)
                raise _ActionFailed(f"{label}: {reason}") from None
            engine.log(trigger.id, "action_ok", now, label, action_index=i)

    def _wait(
        self,
        inst: Instance,
        firing: Firing,
        index: int,
        action: ToolAction | NlAction | PermissionAction,
        now: datetime | None,
        label: str,
    ) -> None:
        """Put the firing off (_Deferred) while action `index` must wait: for its `delay`,
        counted from the firing's cause, then for its executor's working hours."""
        engine = inst.triggers
        resumed = firing.waited and index == firing.start
        if action.delay is not None and not resumed:
            if now is None or firing.cause is None:
                message = f"{label}: a delayed action needs an armed clock"
                engine.log(firing.trigger.id, "action_failed", now, message, action_index=index)
                raise _ActionFailed(message)
            delay = action.delay
            if isinstance(delay, ExpDelay):
                rng = firing.trigger.delay_rngs[index]
                delay = timedelta(seconds=rng.expovariate(1.0 / delay.mean.total_seconds()))
            due = add(firing.cause, delay)
            if due is None:
                message = f"{label}: its delay runs past the end of time"
                engine.log(firing.trigger.id, "action_failed", now, message, action_index=index)
                raise _ActionFailed(message)
            if due > now:
                engine.defer(firing, index, due, "delayed", now, waited=True)
                raise _Deferred
        if isinstance(action, NlAction) and now is not None:
            executor = engine.executor_for(action)
            hours = executor.hours if executor is not None else None
            opens = next_opening(now, hours) if hours is not None else None
            if opens is not None:
                engine.defer(firing, index, opens, "deferred", now, waited=True)
                raise _Deferred

    async def _send_nl(self, inst: Instance, request: NlInstruction, label: str) -> str:
        """Send an nl action's instruction with the lock released (the executor may call
        this instance's tools meanwhile); _ActionFailed with the sender's reason."""
        sender: NlSender = getattr(self.gateway, "nl_sender", None) or no_nl_sender
        held = inst.lock.locked()  # every firing runs under the instance's lock
        if held:
            inst.lock.release()
            # While the executor works, the ticker may visit the instance, as any caller
            # may call it: what comes due meanwhile fires then, not after this firing.
            self.ticker.schedule(inst)
        try:
            return await sender(request)
        except NlActionError as exc:
            raise _ActionFailed(f"{label}: {exc}") from None
        except Exception as exc:  # a sender's own bug: the firing fails, the gateway goes on
            raise _ActionFailed(f"{label}: {type(exc).__name__}: {exc}") from None
        finally:
            if held:
                await _relock(inst.lock)

    async def tick(self, instances: Mapping[str, Instance]) -> int:
        """Fire what has come due by wall time: visits only the instances of `instances`
        (the gateway's live ones) with something due; returns how many were visited."""
        return await self.ticker.tick(instances)

    async def run_ticker(self, instances: Mapping[str, Instance], period: float) -> None:
        """Fire time triggers as they come due until cancelled, at most `period` s late."""
        await self.ticker.run_ticker(instances, period)
