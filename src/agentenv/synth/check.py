"""Procedural environment checks: what `agent-env check ENV` runs.

Every tool is called with generated arguments (see `_values.py`) through a real
`Gateway`, each call on a fresh instance forked from the seed, and the invariants every
environment should keep are checked on each call:

* `crash`: no exception escapes `Gateway.call`, and the tool fails only by raising
  `ToolError` (the gateway turns any other exception into a tool error that reads
  `KeyError: ...`; that is a bug in the tool). Trigger actions a call provokes count too.
* `invalid_result`: the tool returned something that is not JSON.
* `accepted_invalid`: arguments the input schema forbids (wrong type, missing, unknown,
  outside the declared minimum, maximum or enum) are refused as `invalid_arguments`.
* `schema_mismatch`: arguments valid per the input schema are not refused as invalid.
* `schema`: after the call, every added or changed record satisfies its collection schema.
* `read_wrote`: a `read` tool leaves the state hash unchanged.
* `nondeterministic`: the same call on two fresh instances gives the same result and hash.
* `role`: each role may call what its tool list shows, and is `denied` what it does not.

A read tool that tries to write is refused by the gateway (the state is untouched): a
`tool_error` named in the warnings, not a violation. The report models: check_report.py.
"""

from __future__ import annotations

import asyncio
import copy
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agentenv.env import SYSTEM, Environment, Principal, Tool
from agentenv.env.servers.stdio import mask_workspaces
from agentenv.gateway import CallResult, Gateway, GatewayError
from agentenv.state import State, diff
from agentenv.synth._values import (
    EXTRA_ARGUMENT,
    MISSING_REQUIRED,
    OUT_OF_RANGE,
    WRONG_TYPE,
    ArgumentGenerator,
    Case,
)
from agentenv.synth.check_report import (
    CheckCall,
    CheckReport,
    CheckSummary,
    ToolReport,
    Violation,
    ViolationKind,
    _summarise,
    crash_name,
    signature,
)

DEFAULT_CALLS = 20
MAX_CALLS = 10_000
CHECK_INSTANCE = "agent-env-check"
CHECKER = "agent-env-check"
ROLE_PROBE = "role"

_INVALID_WHAT = {
    WRONG_TYPE: "an argument of the wrong type",
    MISSING_REQUIRED: "a required argument missing",
    EXTRA_ARGUMENT: "an unknown argument",
    OUT_OF_RANGE: "a value outside the declared minimum, maximum or enum",
}
_NOT_RUN = ("invalid_arguments", "denied", "unknown_tool")


class CheckError(ValueError):
    """The check cannot run as asked (a knob out of range, an unknown role or tool)."""


@dataclass
class _Run:
    """One call on one fresh instance, and what the instance looked like after."""

    result: CallResult | None = None
    escaped: str | None = None
    pre_hash: str = ""
    final_hash: str = ""
    state: State | None = None
    schema_problems: list[str] = field(default_factory=list)
    trigger_crashes: list[str] = field(default_factory=list)

    @property
    def outcome(self) -> str:
        if self.escaped is not None:
            return f"exception {self.escaped}"
        assert self.result is not None
        if self.result.error is None:
            return "ok"
        return f"{self.result.error.kind}: {_short(self.result.error.message)}"

    @property
    def ran(self) -> bool:
        """Whether the tool's code ran (not refused before it)."""
        return (
            self.result is None
            or self.result.error is None
            or (self.result.error.kind not in _NOT_RUN)
        )


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _ToolRun:
    """Counts and violations of one tool while its cases run."""

    def __init__(self, tool: Tool) -> None:
        self.report = ToolReport(tool=tool.name, kind=tool.kind)
        self._seen: dict[tuple[str, str, str], Violation] = {}
        self.valid_calls = 0
        self.valid_ok = 0
        self.first_error: str | None = None
        self.read_writes = 0

    def count(self, run: _Run, call: CheckCall) -> None:
        self.report.calls += 1
        errors = self.report.errors_by_kind
        if run.escaped is not None:
            errors["exception"] = errors.get("exception", 0) + 1
        elif run.result is not None and run.result.error is not None:
            error = run.result.error
            errors[error.kind] = errors.get(error.kind, 0) + 1
            if error.kind == "tool_error" and "tried to change the state" in error.message:
                self.read_writes += 1
        else:
            self.report.ok += 1
        if call.case in ("valid", "boundary"):
            self.valid_calls += 1
            if run.outcome == "ok":
                self.valid_ok += 1
            elif self.first_error is None:
                self.first_error = run.outcome

    def violate(self, kind: ViolationKind, message: str, call: CheckCall) -> None:
        key = (*signature(kind, message), call.role if kind == "role" else "")
        found = self._seen.get(key)
        if found is not None:
            found.count += 1
            return
        violation = Violation(kind=kind, message=message, call=call)
        self._seen[key] = violation
        self.report.violations.append(violation)


class _Checker:
    def __init__(
        self,
        env: Environment,
        seed: int,
        calls: int,
        roles: list[str],
        tools: list[Tool],
        on_tool: Callable[[str, int, int], None] | None,
    ) -> None:
        self.env = env
        self.seed = seed
        self.calls = calls
        self.roles = roles
        self.tools = tools
        self.on_tool = on_tool
        try:
            self.gateway = Gateway(env)
        except GatewayError as exc:
            raise CheckError(f"the environment cannot be served: {exc}") from None
        self.visible = {
            role: {t.name for t in self.gateway.tools_for(Principal(role=role))} for role in roles
        }
        self.generator = ArgumentGenerator(env)
        clock = env.clock
        self.clock_hint = (
            " (the clock is not armed, so tools see the wall-clock time: set clock.start)"
            if clock.start is None
            else " (the clock runs in wall mode: use mode: stepped for reproducible runs)"
            if clock.mode == "wall"
            else ""
        )

    async def run(self) -> CheckReport:
        report = CheckReport(
            env=self.env.name, seed=self.seed, calls_per_tool=self.calls, roles=self.roles
        )
        for i, tool in enumerate(self.tools):
            if self.on_tool is not None:
                self.on_tool(tool.name, i, len(self.tools))
            report.tools.append(await self._check_tool(tool, report.warnings))
        _summarise(report)
        return report

    async def _check_tool(self, tool: Tool, warnings: list[str]) -> ToolReport:
        state = _ToolRun(tool)
        rng = random.Random(f"{self.seed}/{tool.name}")
        try:
            cases = self.generator.cases(tool, self.calls, rng)
        except Exception as exc:
            warnings.append(
                f"{tool.name}: no arguments could be generated ({type(exc).__name__}: {exc}); "
                "the tool was not checked"
            )
            return state.report
        callers = [r for r in self.roles if tool.name in self.visible[r]] or [SYSTEM.role]
        probe = next((c.args for c in cases if not c.invalid), None)
        if probe is None and tool.input_schema.get("properties"):
            warnings.append(
                f"{tool.name}: no arguments valid per its input schema could be generated; "
                "only invalid calls were made"
            )
        try:
            for i, case in enumerate(cases):
                await self._check_case(tool, case, callers[i % len(callers)], state)
            for role in self.roles:
                await self._check_role(tool, probe, role, state)
        except Exception as exc:  # a bug of the checker itself: keep what was found so far
            warnings.append(
                f"{tool.name}: the check stopped after {state.report.calls} calls "
                f"({type(exc).__name__}: {exc})"
            )
        quiet = state.report.violations or state.read_writes  # already explained
        if state.valid_calls and not state.valid_ok and not quiet:
            warnings.append(
                f"{tool.name}: no valid call succeeded ({state.valid_calls} tried; "
                f"first error: {state.first_error})"
            )
        if state.read_writes:
            warnings.append(
                f"{tool.name}: a read tool tried to write the state in {state.read_writes} "
                "calls; the gateway refused each (declare it kind='write' if it must write)"
            )
        return state.report

    async def _check_case(self, tool: Tool, case: Case, role: str, state: _ToolRun) -> None:
        call = CheckCall(tool=tool.name, args=case.args, role=role, case=case.case)
        first = await self._once(tool, call)
        state.count(first, call)
        self._judge(tool, case, call, first, state)
        if first.escaped is None and not first.ran:
            return
        second = await self._once(tool, call)
        difference = _difference(first, second)
        if difference:
            state.violate(
                "nondeterministic",
                f"the same call on two fresh instances gave {difference}{self.clock_hint}",
                call,
            )

    async def _check_role(
        self, tool: Tool, args: dict[str, Any] | None, role: str, state: _ToolRun
    ) -> None:
        """Call with valid arguments as `role`: refused exactly when the role's list lacks it."""
        call = CheckCall(tool=tool.name, args=args or {}, role=role, case=ROLE_PROBE)
        run = await self._once(tool, call)
        state.count(run, call)
        visible = tool.name in self.visible[role]
        denied = run.result is not None and run.result.denied
        if visible and denied:
            state.violate(
                "role",
                f"{tool.name} is in role {role!r}'s tool list, but calling it was refused",
                call,
            )
        elif not visible and not denied:
            state.violate(
                "role",
                f"{tool.name} is not in role {role!r}'s tool list, but calling it was not "
                f"refused (got {run.outcome})",
                call,
            )
        if visible and args is not None:
            self._judge(tool, Case(ROLE_PROBE, args), call, run, state)

    def _judge(self, tool: Tool, case: Case, call: CheckCall, run: _Run, state: _ToolRun) -> None:
        """The invariants one call must keep on its own."""
        if run.escaped is not None:
            state.violate("crash", f"an exception escaped Gateway.call: {run.escaped}", call)
            return
        result = run.result
        assert result is not None
        error = result.error
        if error is not None and error.kind == "tool_error":
            name = crash_name(error.message)
            if name is not None:
                state.violate(
                    "crash",
                    f"the tool raised {name} instead of a ToolError: {_short(error.message)}",
                    call,
                )
        if error is not None and error.kind == "invalid_result":
            state.violate("invalid_result", _short(error.message), call)
        if case.invalid:
            if error is None or error.kind != "invalid_arguments":
                state.violate(
                    "accepted_invalid",
                    f"a call with {_INVALID_WHAT[case.case]} was not refused as "
                    f"invalid_arguments (got {run.outcome})",
                    call,
                )
        elif error is not None and error.kind == "invalid_arguments":
            state.violate(
                "schema_mismatch",
                f"arguments valid per the input schema were refused: {_short(error.message)}",
                call,
            )
        if error is not None and error.kind == "denied" and case.case != ROLE_PROBE:
            state.violate(
                "role", f"role {call.role!r} lists {tool.name} but was refused calling it", call
            )
        for problem in run.schema_problems:
            state.violate("schema", f"after the call, {problem}", call)
        if tool.kind == "read" and run.pre_hash != result.state_hash:
            state.violate("read_wrote", "the read tool changed the state hash", call)
        for crash in run.trigger_crashes:
            state.violate("crash", crash, call)

    async def _once(self, tool: Tool, call: CheckCall) -> _Run:
        """Make the call on a fresh instance forked from the seed, then drop the instance."""
        principal = SYSTEM if call.role == SYSTEM.role else Principal(role=call.role, name=CHECKER)
        inst = self.gateway.create_instance(CHECK_INSTANCE)
        try:
            start = inst.state.hash()
            try:
                result = await self.gateway.call(
                    principal, tool.name, copy.deepcopy(call.args), instance=inst.id
                )
            except (Exception, SystemExit) as exc:  # the gateway promises never to raise
                return _Run(escaped=f"{type(exc).__name__}: {exc}")
            records = list(inst.trajectory)
            run = _Run(
                result=result,
                pre_hash=records[result.seq - 1].state_hash if result.seq > 0 else start,
                final_hash=inst.state.hash(),
                state=inst.state,
            )
            for record in records[result.seq + 1 :]:
                if record.kind == "trigger" and record.tool and record.error is not None:
                    name = crash_name(record.error.message)
                    if record.error.kind == "tool_error" and name is not None:
                        run.trigger_crashes.append(
                            f"trigger {record.trigger_id} called {record.tool}, which raised "
                            f"{name} instead of a ToolError: {_short(record.error.message)}"
                        )
            run.schema_problems = self._schema_problems(inst.state)
            return run
        finally:
            self.gateway.drop_instance(inst.id)

    def _schema_problems(self, state: State) -> list[str]:
        problems = []
        for name, change in diff(self.env.seed, state).collections.items():
            validator = state.info(name).validator
            if validator is None:
                continue
            written = {**change.added, **{k: c.after for k, c in change.changed.items()}}
            for key, record in written.items():
                error = next(iter(validator.iter_errors(record)), None)
                if error is not None:
                    where = "".join(f".{p}" for p in error.path).lstrip(".") or "record"
                    problems.append(
                        f"{name}[{key!r}] breaks its schema at {where}: {error.message}"
                    )
        return problems


def _difference(a: _Run, b: _Run) -> str | None:
    """How two runs of the same call differ, or None. A server's workspace folder path is
    masked first: each fresh instance of a process environment has its own."""
    texts = [mask_workspaces(r.result.text) if r.result else None for r in (a, b)]
    if mask_workspaces(a.outcome) != mask_workspaces(b.outcome) or texts[0] != texts[1]:
        left = a.result.text if a.result else a.outcome
        right = b.result.text if b.result else b.outcome
        return f"different results: {_short(left, 120)!r} vs {_short(right, 120)!r}"
    if a.final_hash != b.final_hash:
        changes = diff(a.state, b.state).summary() if a.state and b.state else "?"
        return f"different states: {_short(changes, 240)}"
    return None


def _plan(
    env: Environment,
    seed: int,
    calls_per_tool: int,
    roles: list[str] | None,
    tools: list[str] | None,
) -> tuple[list[str], list[Tool]]:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise CheckError(f"the seed must be an integer, got {seed!r}")
    if isinstance(calls_per_tool, bool) or not isinstance(calls_per_tool, int):
        raise CheckError(f"calls per tool must be an integer, got {calls_per_tool!r}")
    if not 1 <= calls_per_tool <= MAX_CALLS:
        raise CheckError(f"calls per tool must be between 1 and {MAX_CALLS}, got {calls_per_tool}")
    chosen_roles = list(env.roles) if roles is None else list(dict.fromkeys(roles))
    if not chosen_roles:
        raise CheckError("no role to check with: name at least one")
    unknown = [r for r in chosen_roles if r not in env.roles]
    if unknown:
        raise CheckError(
            f"unknown role {unknown[0]!r} (roles of {env.name}: {', '.join(env.roles)})"
        )
    if tools is None:
        chosen = [env.tools[name] for name in sorted(env.tools)]
    else:
        missing = [t for t in tools if t not in env.tools]
        if missing:
            known = ", ".join(sorted(env.tools)[:20]) or "none"
            raise CheckError(f"unknown tool {missing[0]!r} (tools: {known})")
        chosen = [env.tools[name] for name in dict.fromkeys(tools)]
    return chosen_roles, chosen


async def check_environment_async(
    env: Environment,
    *,
    seed: int = 0,
    calls_per_tool: int = DEFAULT_CALLS,
    roles: list[str] | None = None,
    tools: list[str] | None = None,
    on_tool: Callable[[str, int, int], None] | None = None,
) -> CheckReport:
    """`check_environment`, for callers already inside an event loop."""
    chosen_roles, chosen_tools = _plan(env, seed, calls_per_tool, roles, tools)
    checker = _Checker(env, seed, calls_per_tool, chosen_roles, chosen_tools, on_tool)
    return await checker.run()


def check_environment(
    env: Environment,
    *,
    seed: int = 0,
    calls_per_tool: int = DEFAULT_CALLS,
    roles: list[str] | None = None,
    tools: list[str] | None = None,
    on_tool: Callable[[str, int, int], None] | None = None,
) -> CheckReport:
    """Call every tool of `env` with generated arguments and check the invariants.

    `seed` makes the arguments (and so the report) reproducible; `calls_per_tool` is how
    many generated calls each tool gets (plus one per role for the access check); `roles`
    (default: all) are the roles calls are made as and checked for; `tools` (default: all)
    limits the check to some tools; `on_tool(name, index, total)` reports progress.
    Raises CheckError for a knob out of range, an unknown role or tool.
    """
    _plan(env, seed, calls_per_tool, roles, tools)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise CheckError("an event loop is running here: await check_environment_async() instead")
    return asyncio.run(
        check_environment_async(
            env,
            seed=seed,
            calls_per_tool=calls_per_tool,
            roles=roles,
            tools=tools,
            on_tool=on_tool,
        )
    )


__all__ = [
    "DEFAULT_CALLS",
    "MAX_CALLS",
    "CheckCall",
    "CheckError",
    "CheckReport",
    "CheckSummary",
    "ToolReport",
    "Violation",
    "ViolationKind",
    "check_environment",
    "check_environment_async",
    "crash_name",
]
