"""The Gateway: the one door to every tool call of an environment.

`Gateway.call(principal, tool, args)` does, in order: look up the tool, RBAC, argument
validation, the state transaction around the tool, the clock step, the trajectory record,
then the triggers the call provoked and any that came due. Transports (REST, MCP, CLI)
turn their wire format into this call and back, and hold no policy of their own.

A gateway hosts many isolated instances of one environment, each forked from the seeded
snapshot; `instance="default"` always exists.

The call path does as little as it can (issue 12; `benchmarks/bench_gateway.py` prints the
figures beside their floors, and its `--breakdown` what each step costs):

- arguments: flat simple ones (plain types, no constraints beyond numeric bounds) are
  checked by `env.fast_args`, which gives exactly what pydantic would or hands the call to
  pydantic (its verdicts and messages), proven by differential tests;
- a sync tool that does not block is called directly, with no coroutine around it;
- `encode_result` encodes the result once, with a C encoder made once, and that text is
  both the answer's `content[0].text` and the record's copy of the result;
- the record is a row of atomic values (`gateway.rows`): the arguments' and result's JSON
  text instead of deep copies, integer microseconds instead of datetimes; the row is what
  the trajectory keeps (and the GC stops tracking), and a `TrajectoryRecord` is built only
  when a reader asks;
- tool lists and their `ToolInfo`s are made once per role and instance (the access rules
  empty the cache when they change; a `Tool` makes its info once).

Figures (`python benchmarks/bench_gateway.py`, the shared 2-core machine at a load average
of 3-5, CPU µs per call, medians of interleaved rounds; two runs), against the tree before
issue 12 run by the same script in the same session: read 7.4-8.0 against 21.9-27.4
(0.29-0.33x; the floors: a dict op + `json.dumps` 1.4-1.5, the tool called directly
0.9-1.0); write without a record schema 13.4-17.1 against 32.9-35.3 (0.41-0.48x); write
with a 3-field schema 14.0-19.9 against 51.3-61.8 (the store's new schema validator is most
of that gain: +0.6-0.8 µs a write called directly, from +13-16). A second pass (the state
hash kept by every write, changelog rows as tuples, the clock's time kept in microseconds,
flat arguments recorded as a one-level copy, spills sized without a loop per record) took
read 7.55 -> 6.59, write 12.94 -> 10.10, the 3-field schema write 12.91 -> 10.65 (medians
of 5 interleaved runs of `call_figures`, against the tree before it). On this loaded
machine the absolute targets (5 / 10 / 15 µs) are not all met as measured: read is ~1.6 µs
over. Per episode, `Gateway(env)` + `create_instance` + `list_tools`: 17.6-19.1 µs against
21.6-31.2. What a read costs, step by step, is `--breakdown`'s: the tool itself (1.0: the
store's copy of the record), `encode_result` (0.9), the record (`add_call` as the gateway
calls it, 1.0, plus the spill to disk amortised, ~0.35), the argument check and access
rule (~0.45), the transaction (0.3), and the rest of the pipeline around them (the lock
and coroutines ~0.45, ToolContext, CallResult, timers).
"""

from __future__ import annotations

import asyncio
import functools
import os
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from json.encoder import encode_basestring as _quote
from time import perf_counter, time_ns
from typing import Any, Literal

from agentenv.env.environment import Environment
from agentenv.env.tool import SYSTEM, Principal, Tool, ToolContext, ToolError
from agentenv.gateway import blocking
from agentenv.gateway.access import DEFAULT_ROLE
from agentenv.gateway.arguments import check_arguments
from agentenv.gateway.clock import GET_TIME
from agentenv.gateway.control import ControlPlane
from agentenv.gateway.data_plane import DataPlane
from agentenv.gateway.errors import (
    DEFAULT_INSTANCE,
    GatewayError,
    ToolRaised,
    UnknownInstance,
    check_instance_id,
)
from agentenv.gateway.firing import Firer, NlSender, no_nl_sender
from agentenv.gateway.forks import apply_fork, merge
from agentenv.gateway.instance import Instance, SharedLock
from agentenv.gateway.listing import ToolLists
from agentenv.gateway.probe import run_probe
from agentenv.gateway.raised import contained, crash, crash_trace, current_task, stopping
from agentenv.gateway.results import CallResult, InvalidResult, encode_result, safe_text
from agentenv.spec.environment import GatewayMode
from agentenv.spec.triggers import CheckStep
from agentenv.spec.wire import CallError
from agentenv.state import Snapshot, State, StateError

_NO_TIME = timedelta(0)  # a call's extra time, until the tool spends some


@dataclass(frozen=True)
class _Problem:
    kind: Any
    message: str
    trace: str | None = None  # a crashed tool's traceback: the record's, never the agent's


class Gateway(ToolLists, ControlPlane, DataPlane):
    """Serves one environment to many callers and many instances, through `call`."""

    def __init__(
        self,
        env: Environment,
        *,
        nl_sender: NlSender | None = None,
        mode: GatewayMode | None = None,
        strict_roles: bool | None = None,
        behind_gateway: bool = False,
    ) -> None:
        """`nl_sender` carries out the `nl` actions of triggers (default: they fail,
        saying so); the layers above install the A2A one (`agents.a2a.nl`). `mode` and
        `strict_roles` override the environment document's `gateway_mode` and
        `strict_roles`. `behind_gateway` is for serving as a backing server of another
        gateway, which decides who sees which tool: every caller is listed each tool some
        role may call (hidden ones with their `_meta`), hidden tools are not hidden here,
        and calls are still refused where this environment's own rules and tool roles
        refuse them."""
        self.behind_gateway = behind_gateway
        self.env = env
        self.nl_sender: NlSender = nl_sender or no_nl_sender
        if mode not in (None, "consistent", "performance"):
            raise GatewayError(f"unknown gateway mode {mode!r} (modes: consistent, performance)")
        self.mode: GatewayMode = mode or env.gateway_mode
        self.strict_roles = env.strict_roles if strict_roles is None else strict_roles
        self._performance = self.mode == "performance"
        self._roles = frozenset(env.roles)
        # Undeclared role names are served unless roles are strict (an environment that
        # declares none, the implicit `default`, serves any name either way).
        self._open_roles = not self.strict_roles or env.roles == (DEFAULT_ROLE,)
        # The protocol's `default` is "no role forwarded": the environment's default role.
        self._default = Principal(role=env.default_role)
        self._rename_default = env.default_role != DEFAULT_ROLE
        self._instances: dict[str, Instance] = {}
        self._firer = Firer(self)
        # Process environments: each instance is attached to its servers' children.
        self._runtimes = [runtime for _, runtime in env.runtimes()]
        self.create_instance(DEFAULT_INSTANCE)

    # -- instances --------------------------------------------------------------------------

    @property
    def instances(self) -> list[str]:
        """Ids of the live instances."""
        return list(self._instances)

    def instance(self, instance_id: str = DEFAULT_INSTANCE) -> Instance:
        """The instance with this id; UnknownInstance if there is none."""
        try:
            return self._instances[instance_id]
        except KeyError:
            raise UnknownInstance(f"no instance {instance_id!r}") from None

    def create_instance(
        self, instance_id: str | None = None, *, state: Snapshot | None = None
    ) -> Instance:
        """Fork a fresh instance (own state, clock, triggers, record) from the seeded
        snapshot, or from `state` (e.g. to replay a reference solution from a mid-task state).

        An id (a fresh one if None) becomes a URL path segment and may become a file name,
        so it must follow `errors.INSTANCE_ID_RULE`; GatewayError otherwise."""
        if instance_id is None:
            instance_id = os.urandom(6).hex()  # 48 random bits, as uuid4().hex[:12] had
        else:
            check_instance_id(instance_id)
        if instance_id in self._instances:
            raise GatewayError(f"instance {instance_id!r} already exists")
        inst = Instance.create(
            instance_id, self.env, state, mode=self.mode, hide=not self.behind_gateway
        )
        if self.env.triggers.triggers:
            self._firer.register(inst, self.env.triggers)
        self._instances[instance_id] = inst
        if self._runtimes:
            for runtime in self._runtimes:
                # Schedules the child (the first call awaits it); the clock is for children
                # that read virtual time through `env_get_time_url`.
                runtime.attach(instance_id, lambda: inst.clock.now())
        return inst

    def drop_instance(self, instance_id: str) -> None:
        """Forget an instance. The default instance cannot be dropped."""
        if instance_id == DEFAULT_INSTANCE:
            raise GatewayError("the default instance cannot be dropped")
        inst = self.instance(instance_id)  # UnknownInstance if there is none
        del self._instances[instance_id]
        inst.close_resources()
        for runtime in self._runtimes:
            runtime.detach(instance_id)

    async def restore(
        self, principal: Principal, snapshot: Snapshot, *, instance: str = DEFAULT_INSTANCE
    ) -> None:
        """Put an instance's state back to a snapshot (task retries roll back this way)."""
        self._control(principal)
        inst = self.instance(instance)
        async with inst.lock:
            inst.state.restore(snapshot)
            self._note(inst, principal, "state_restore", snapshot.hash())

    # -- tools ------------------------------------------------------------------------------

    def _tool(self, inst: Instance, name: str) -> Tool | None:
        found = self.env.tools.get(name)
        if found is None and name == GET_TIME.name and self._offers_get_time(inst):
            return GET_TIME
        return found

    def _role_known(self, role: str) -> bool:
        # With strict roles, only the declared ones (and the system) are served.
        return self._open_roles or role in self._roles or role == SYSTEM.role

    def resolve(self, principal: Principal) -> Principal:
        """The principal a call acts as: the protocol's role `default` (no role forwarded)
        is the environment's default role."""
        if principal.role == DEFAULT_ROLE and self._rename_default:
            return replace(principal, role=self.env.default_role)
        return principal

    # -- the door ---------------------------------------------------------------------------

    async def call(
        self,
        principal: Principal,
        tool: str,
        args: dict[str, Any] | None = None,
        *,
        instance: str = DEFAULT_INSTANCE,
        session: str | None = None,
    ) -> CallResult:
        """Call a tool as `principal`. Never raises for a bad call: the result says why.

        Only an unknown instance raises (UnknownInstance), since there is no trajectory
        to record the call in.
        """
        inst = self._instances.get(instance) or self.instance(instance)
        if self._rename_default and principal.role == DEFAULT_ROLE:
            principal = replace(principal, role=self.env.default_role)
        if self._performance:
            return await self._call_shared(inst, principal, tool, args, session)
        lock = inst.lock
        await lock.acquire()  # not `async with`: one coroutine less per call
        try:
            triggers = inst.triggers
            if not triggers.empty:  # the common case has none: skip the trigger work
                await self._firer.fire_due(inst)
            result = await self.execute(inst, principal, tool, args, session=session)
            if not triggers.empty:
                await self._firer.fire_due(inst)
            return result
        finally:
            lock.release()

    async def _call_shared(
        self,
        inst: Instance,
        principal: Principal,
        tool: str,
        args: dict[str, Any] | None,
        session: str | None,
    ) -> CallResult:
        """`call` in performance mode: calls overlap. An instance with triggers runs its
        calls one at a time still, since a trigger must see the state each call leaves."""
        lock = inst.lock
        assert isinstance(lock, SharedLock)
        if inst.triggers.empty:
            async with lock.shared():
                if inst.triggers.empty:
                    return await self.execute(
                        inst, principal, tool, args, session=session, isolated=True
                    )
        async with lock:
            await self._firer.fire_due(inst)
            result = await self.execute(inst, principal, tool, args, session=session)
            await self._firer.fire_due(inst)
            return result

    async def execute(
        self,
        inst: Instance,
        principal: Principal,
        name: str,
        args: Any,
        *,
        kind: Literal["call", "trigger"] = "call",
        now: datetime | None = None,
        session: str | None = None,
        trigger_id: str | None = None,
        isolated: bool = False,
    ) -> CallResult:
        """The pipeline behind `call` (also used by trigger actions). Hold `inst.lock`
        (exclusively, or shared with `isolated`: a tool that awaits then runs on its own
        fork of the state, merged when it ends)."""
        started = perf_counter()
        state = inst.state
        vt = now or inst.clock.now()
        tool = self.env.tools.get(name) or self._tool(inst, name)
        problem: _Problem | None = None
        value: Any = None
        values: dict[str, Any] = {}
        given: Any = ()  # the names of the arguments the caller gave
        flat = False  # the arguments passed the fast check whole: the record copies them
        ran = False
        denied = False
        if tool is None:
            problem = _Problem("unknown_tool", f"unknown tool {name!r}")
        elif not (self._open_roles or self._role_known(principal.role)):
            denied = True
            known = ", ".join(self.env.roles)
            problem = _Problem("denied", f"unknown role {principal.role!r} (roles: {known})")
        elif not inst.access.allowed(principal.role, tool):
            denied = True
            problem = _Problem("denied", f"role {principal.role!r} may not call {name!r}")
        elif type(args) is not dict and not isinstance(args, dict | None):
            problem = _Problem("invalid_arguments", "arguments must be an object")
        else:
            # Flat simple arguments skip pydantic (`env.fast_args`: the same values, or None).
            fast = tool.fast_args()
            checked = fast(args or {}) if fast is not None else None
            if checked is not None and fast.flat:  # type: ignore[union-attr]
                values, given = checked, args or ()  # flat: nothing can nest too deep
                flat = isinstance(args, dict)
            else:
                values, given, args, wrong = check_arguments(tool, name, args, checked)
                if wrong is not None:
                    problem = _Problem("invalid_arguments", wrong)
        text = ""
        given_values: dict[str, Any] | None = None
        if problem is None:
            assert tool is not None
            ran = True
            if not inst.triggers.empty:  # before the tool runs: it may change `values`
                given_values = {k: values[k] for k in given}
            ctx = ToolContext(
                state,
                vt or datetime.now(UTC),
                principal,
                inst.id,
                _NO_TIME,
                session,
                inst.resources,
            )
            before = state.changes
            slow = tool.is_async or tool.blocking
            owner = current_task() if slow else None
            try:
                if isolated and slow:
                    # Its writes land at its end, in one step: that is its write window.
                    value, text, before = await self._invoke_isolated(tool, ctx, values)
                else:
                    with state.transaction():
                        if slow:
                            value = await self._invoke(tool, ctx, values)
                        else:  # most tools: a plain call, no coroutine to make
                            value = tool.invoke(ctx, values)
                        # Encoding is part of the transaction: a result no transport can
                        # carry fails the call here, with its writes rolled back.
                        text = encode_result(value)
                        if tool.kind == "read" and state.changes != before:
                            raise ToolError(f"read tool {name!r} tried to change the state")
            except ToolError as exc:
                problem = _Problem("tool_error", safe_text(str(exc)) or type(exc).__name__)
            except StateError as exc:
                problem = _Problem("tool_error", safe_text(str(exc)))
            except InvalidResult as exc:
                problem = _Problem("invalid_result", str(exc))
            except TimeoutError:
                problem = _Problem("timeout", f"{name!r} took longer than {tool.timeout:g} s")
            except ToolRaised as exc:
                problem = _Problem("tool_error", crash(exc.raised), crash_trace(exc.raised))
            except BaseException as exc:  # a tool's own bug, whatever it raised: a tool error
                if stopping(exc, owner):
                    raise  # the call itself is being cancelled: the state is rolled back
                problem = _Problem("tool_error", crash(exc), crash_trace(exc))
            if problem is not None and isolated:
                before = state.changes  # nothing of it landed; others may have written meanwhile
        clock = inst.clock
        slot = clock.micros_of(vt)  # before the step: the record keeps the call's start
        if ran and kind == "call":
            if clock.mode == "stepped":
                declared = tool.duration  # type: ignore[union-attr]
                clock.advance(declared if declared is not None else clock.default_duration)
            if problem is None and ctx.spent:
                clock.advance(ctx.spent)
        if problem is not None:
            error: CallError | None = CallError(kind=problem.kind, message=problem.message)
            value, text, result_json = None, f"Error: {problem.message}", None
        else:
            error = None
            # The record keeps the result as JSON text (encode_result proved it clean).
            result_json = _quote(text) if isinstance(value, str) else text
            if value is None:
                result_json = None
        state_hash = state.hash()
        changelog_id = state.changes
        seq = inst.trajectory.add_call(
            kind,
            time_ns() // 1000,
            vt,
            principal,
            name,
            # The record keeps the arguments' JSON text: history neither caller nor tool edits.
            args if isinstance(args, dict) else {"_invalid": repr(args)[:200]},
            result_json,
            error,
            denied,
            state_hash,
            changelog_id,
            before if ran else None,  # the write window of GET /changes
            (perf_counter() - started) * 1000,
            session,
            trigger_id,
            slot,
            flat,
            None if problem is None else problem.trace,
        )
        result = CallResult(error is None, value, text, error, changelog_id, seq, state_hash)
        if error is None and kind == "call" and not inst.triggers.empty:
            # Triggers see the arguments the caller gave, not the defaults filled in.
            if given_values is None:  # a trigger registered while the call ran
                given_values = {k: values[k] for k in given if k in values}
            await self._firer.after_call(inst, principal, name, given_values, value)
        return result

    async def _invoke(self, tool: Tool, ctx: ToolContext, values: dict[str, Any]) -> Any:
        if tool.is_async:
            pending = tool.invoke(ctx, values)
            # A task of its own: what it raises must not reach the loop. A server's tool
            # keeps its own time (the runtime's call raises TimeoutError the same way).
            if tool.timeout and not tool.remote:
                return await asyncio.wait_for(contained(pending), tool.timeout)
            return await pending
        if not tool.blocking:
            return tool.invoke(ctx, values)
        # Blocking code runs in a thread, on a fork: a call that times out keeps running
        # but writes only to its fork, which is dropped; one that finishes is merged.
        fork = ctx.state.fork()
        worker = ctx.on(fork)
        # Our own pool, not the loop's default one: a tool that hangs past its timeout
        # keeps its thread, and must not starve DNS lookups or other libraries' work.
        if blocking.stuck_count() >= blocking.BLOCKING_THREADS:
            raise ToolError(
                f"all {blocking.BLOCKING_THREADS} threads for blocking tools are still running calls "
                "that timed out; this call was not started"
            )
        call = blocking.StuckWatch(functools.partial(tool.invoke, worker, values))
        work = asyncio.get_running_loop().run_in_executor(blocking.pool(), call.run)
        try:
            value = await (
                asyncio.wait_for(asyncio.shield(work), tool.timeout) if tool.timeout else work
            )
        except (TimeoutError, asyncio.CancelledError):
            call.abandon()  # its thread runs on; counted until it ends
            raise
        merge(ctx.state, fork)
        ctx.spent += worker.spent
        return value

    async def _invoke_isolated(
        self, tool: Tool, ctx: ToolContext, values: dict[str, Any]
    ) -> tuple[Any, str, int]:
        """Run a tool that awaits on its own fork, while other calls run; then apply its
        writes to the instance in one step, unless another call wrote the same records
        since the fork was taken (then nothing is applied and the call fails). Returns the
        value, its text and the instance's changelog id just before the writes landed."""
        fork = ctx.state.fork()
        assert isinstance(fork, State)
        base = fork.snapshot()
        worker = ctx.on(fork)
        with fork.transaction():
            value = await self._invoke(tool, worker, values)
            text = encode_result(value)
        landed_at = ctx.state.changes
        if fork.changes != base.changes:
            if tool.kind == "read":
                raise ToolError(f"read tool {tool.name!r} tried to change the state")
            apply_fork(ctx.state, base, fork, tool.name)
        ctx.spent += worker.spent
        return value, text, landed_at

    async def probe(self, inst: Instance, step: CheckStep, now: datetime | None) -> Any:
        """Run a read-only check step (trigger checks, verify); no writes, no record
        (the rules are in `gateway/probe.py`)."""
        return await run_probe(self._tool(inst, step.tool), inst, step, now)

    async def tick(self) -> None:
        """Fire what has come due on every instance (wall-clock mode needs a ticker)."""
        await self._firer.tick(self._instances)

    async def run_ticker(self, period: float = 0.25) -> None:
        """Fire time triggers as they come due, until cancelled: what a server runs in the
        background for wall-clock instances. `period` bounds how late a firing may be."""
        await self._firer.run_ticker(self._instances, period)
