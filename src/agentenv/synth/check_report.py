"""The report of `agent-env check`: the calls made, the broken invariants, the totals.

`check_environment` (in `agentenv.synth.check`) returns a `CheckReport`: one `ToolReport`
per tool with its call counts and `Violation`s, each violation with the first `CheckCall`
that broke it (`CheckCall.command` is the `agent-env call` line that makes it again), and
a `CheckSummary` of the totals, added up by `_summarise`. They are pydantic models, so the
report is JSON as it is.
"""

from __future__ import annotations

import builtins
import json
import re
import shlex
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

ViolationKind = Literal[
    "crash",
    "invalid_result",
    "accepted_invalid",
    "schema_mismatch",
    "schema",
    "read_wrote",
    "nondeterministic",
    "role",
]


class CheckCall(BaseModel):
    """A call the check made: enough to reproduce it with `agent-env call`."""

    tool: str
    args: dict[str, Any]
    role: str
    case: str = Field(
        default="valid",
        description="valid, boundary, wrong_type, missing_required, extra_argument, "
        "out_of_range or role",
    )

    def command(self, env: str | Path) -> str:
        """The `agent-env call` line that makes this call again."""
        args = json.dumps(self.args, ensure_ascii=False)
        return (
            f"agent-env call {shlex.quote(str(env))} {shlex.quote(self.tool)} "
            f"--json {shlex.quote(args)} --role {shlex.quote(self.role)}"
        )


class Violation(BaseModel):
    """A broken invariant, with the first call that broke it."""

    kind: ViolationKind
    message: str
    call: CheckCall
    count: int = Field(default=1, description="Calls that broke it the same way.")


class ToolReport(BaseModel):
    """What the check saw of one tool."""

    tool: str
    kind: Literal["read", "write"] = "write"
    calls: int = 0
    ok: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    violations: list[Violation] = Field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether no invariant was broken."""
        return not self.violations


class CheckSummary(BaseModel):
    """Totals over every tool."""

    tools: int = 0
    calls: int = 0
    ok: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    violations: int = 0
    violations_by_kind: dict[str, int] = Field(default_factory=dict)


class CheckReport(BaseModel):
    """The outcome of `check_environment`: one report per tool, warnings, totals."""

    env: str
    seed: int
    calls_per_tool: int
    roles: list[str]
    tools: list[ToolReport] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    summary: CheckSummary = Field(default_factory=CheckSummary)
    passed: bool = True


def _summarise(report: CheckReport) -> None:
    summary = CheckSummary(tools=len(report.tools))
    errors: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    for tool in report.tools:
        summary.calls += tool.calls
        summary.ok += tool.ok
        errors.update(tool.errors_by_kind)
        kinds.update(v.kind for v in tool.violations)
        tool.errors_by_kind = dict(sorted(tool.errors_by_kind.items()))
    summary.errors_by_kind = dict(sorted(errors.items()))
    summary.violations = sum(kinds.values())
    summary.violations_by_kind = dict(sorted(kinds.items()))
    report.summary = summary
    report.passed = summary.violations == 0
    if report.tools and summary.calls and summary.ok == 0:
        report.warnings.insert(
            0,
            "no call of any tool succeeded: the check found no crash, but it saw nothing "
            "work either (look at the seed data and the tools' errors)",
        )


# -- what counts as a crash, and when two violations are one --------------------------

_EXCEPTIONS = {
    name
    for name, obj in vars(builtins).items()
    if isinstance(obj, type) and issubclass(obj, BaseException) and not name.endswith("Warning")
}


def crash_name(message: str) -> str | None:
    """The exception name if a tool error reads like the gateway's `ExcType: msg` form of an
    exception other than ToolError (a crash), else None."""
    match = re.match(r"([A-Za-z_][\w.]*): ", message)
    if match is None:
        return None
    name = match.group(1).rsplit(".", 1)[-1]
    if name == "ToolError" or name.endswith("Warning"):
        return None
    if name in _EXCEPTIONS or re.fullmatch(r"[A-Z]\w*(?:Error|Exception)", name):
        return name
    return None


def signature(kind: str, message: str) -> tuple[str, str]:
    """Violations that differ only in quoted values or numbers are one violation."""
    return kind, re.sub(r"'[^']*(?:'|$)|\"[^\"]*(?:\"|$)|\d+", "_", message)[:120]
