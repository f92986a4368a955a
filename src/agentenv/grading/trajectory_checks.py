"""Trajectory checklists: named checks over the tool calls an agent made.

Checks read the `call` records of a trajectory (trigger and control records are left
out), as `TrajectoryRecord`s or their JSON form. Declarative checks:

* `{called: tool, args?: {...}, min_times?: 1, max_times?, only_ok?: false}`: called
  (with arguments that contain `args`, a subset match), at least `min_times` times;
* `{not_called: tool, args?: {...}}`: never called (with those arguments);
* `{order: [tool | {tool, args}], ...}`: these calls happened in this order (a
  subsequence: other calls may come between);
* `{max_calls: N}`, `{max_denied: N}` (calls refused by access rules), `{max_errors: N}`
  (calls that failed for any other reason).

Python checks are callables `(records) -> bool`. `check_trajectory` scores the share
that passed, like the state checklist.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_validator,
)

from agentenv.gateway.trajectory import TrajectoryRecord
from agentenv.grading.checklist import (
    CheckResult,
    NamedFn,
    checklist_score,
    key_discriminator,
    parse_checks,
    short,
    subset_match,
    unique_names,
)
from agentenv.grading.score import Score


@dataclass(frozen=True)
class Call:
    """One tool call as the checks see it."""

    tool: str
    args: dict[str, Any]
    ok: bool
    denied: bool
    error: str | None = None
    session: str | None = None
    role: str | None = None

    @classmethod
    def of(cls, record: TrajectoryRecord | Mapping[str, Any]) -> Call | None:
        """A call from a trajectory record (or its JSON); None for non-call records."""
        get = record.get if isinstance(record, Mapping) else lambda k: getattr(record, k, None)
        if (get("kind") or "call") != "call":
            return None
        error = get("error")
        message = None
        if error is not None:
            message = error.get("message") if isinstance(error, Mapping) else error.message
        return cls(
            tool=get("tool") or "",
            args=dict(get("args") or {}),
            ok=error is None,
            denied=bool(get("denied")),
            error=message,
            session=get("session"),
            role=get("role"),
        )


def calls_of(records: Iterable[TrajectoryRecord | Mapping[str, Any] | Call]) -> list[Call]:
    """The tool calls among trajectory records, in order."""
    out = []
    for record in records:
        call = record if isinstance(record, Call) else Call.of(record)
        if call is not None:
            out.append(call)
    return out


def records_between(
    records: Sequence[TrajectoryRecord],
    start: int = 0,
    end: int | None = None,
    *,
    session: str | None = None,
) -> list[TrajectoryRecord]:
    """The records with `start <= seq < end`; with `session`, only the calls made in that
    session (or with none) are kept, so concurrent prompts do not mix."""
    picked = [r for r in records[start:end]]
    if session is None:
        return picked
    return [r for r in picked if r.kind != "call" or r.session in (None, session)]


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None


class CalledCheck(_Check):
    """The tool was called (with arguments containing `args`) at least `min_times`."""

    called: str
    args: dict[str, Any] | None = Field(default=None, description="A subset the call's must hold.")
    min_times: int = Field(default=1, ge=0)
    max_times: int | None = Field(default=None, ge=0)
    only_ok: bool = Field(default=False, description="Count only calls that succeeded.")

    def label(self) -> str:
        """The check's name, or a description of it."""
        return self.name or f"called {_call_label(self.called, self.args)}"

    def evaluate(self, calls: list[Call]) -> CheckResult:
        """Run the check."""
        matching = [
            c for c in calls if _matches(c, self.called, self.args) and (c.ok or not self.only_ok)
        ]
        n = len(matching)
        ok = n >= self.min_times and (self.max_times is None or n <= self.max_times)
        if ok:
            return CheckResult(self.label(), True)
        detail = f"called {n} time(s)"
        if n == 0:
            same_tool = [c for c in calls if c.tool == self.called]
            if same_tool and self.args is not None:
                detail += f"; calls of {self.called!r} had args {short(same_tool[0].args)}"
            elif same_tool and self.only_ok:
                detail += f"; calls of {self.called!r} failed: {same_tool[0].error}"
        return CheckResult(self.label(), False, detail)


class NotCalledCheck(_Check):
    """The tool was never called (with arguments containing `args`); denied tries count."""

    not_called: str
    args: dict[str, Any] | None = None

    def label(self) -> str:
        """The check's name, or a description of it."""
        return self.name or f"never called {_call_label(self.not_called, self.args)}"

    def evaluate(self, calls: list[Call]) -> CheckResult:
        """Run the check."""
        n = sum(1 for c in calls if _matches(c, self.not_called, self.args))
        return CheckResult(self.label(), n == 0, f"called {n} time(s)" if n else "")


class OrderStep(BaseModel):
    """One expected call of an `order` check."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any] | None = None


class OrderCheck(_Check):
    """These calls happened in this order (a subsequence of the calls)."""

    order: list[str | OrderStep] = Field(min_length=1)
    only_ok: bool = False

    def steps(self) -> list[OrderStep]:
        """The expected calls."""
        return [s if isinstance(s, OrderStep) else OrderStep(tool=s) for s in self.order]

    def label(self) -> str:
        """The check's name, or a description of it."""
        return self.name or "order: " + " -> ".join(
            _call_label(s.tool, s.args) for s in self.steps()
        )

    def evaluate(self, calls: list[Call]) -> CheckResult:
        """Run the check."""
        steps = self.steps()
        i = 0
        for call in calls:
            if (
                i < len(steps)
                and (call.ok or not self.only_ok)
                and _matches(call, steps[i].tool, steps[i].args)
            ):
                i += 1
        if i == len(steps):
            return CheckResult(self.label(), True)
        missing = _call_label(steps[i].tool, steps[i].args)
        seen = " -> ".join(c.tool for c in calls) or "no calls"
        return CheckResult(
            self.label(), False, f"matched {i} of {len(steps)}; {missing} not found (calls: {seen})"
        )


class LimitCheck(_Check):
    """At most so many calls, denials or failed calls."""

    max_calls: int | None = Field(default=None, ge=0)
    max_denied: int | None = Field(default=None, ge=0)
    max_errors: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _one_limit(self) -> LimitCheck:
        given = [k for k in ("max_calls", "max_denied", "max_errors") if k in self.model_fields_set]
        if len(given) != 1:
            raise ValueError("give exactly one of 'max_calls', 'max_denied' or 'max_errors'")
        return self

    @property
    def what(self) -> Literal["max_calls", "max_denied", "max_errors"]:
        """Which limit this is."""
        if self.max_calls is not None:
            return "max_calls"
        return "max_denied" if self.max_denied is not None else "max_errors"

    def label(self) -> str:
        """The check's name, or a description of it."""
        noun = {"max_calls": "calls", "max_denied": "denied calls", "max_errors": "failed calls"}
        return self.name or f"at most {getattr(self, self.what)} {noun[self.what]}"

    def evaluate(self, calls: list[Call]) -> CheckResult:
        """Run the check."""
        if self.what == "max_calls":
            counted = calls
        elif self.what == "max_denied":
            counted = [c for c in calls if c.denied]
        else:
            counted = [c for c in calls if not c.ok and not c.denied]
        limit = getattr(self, self.what)
        ok = len(counted) <= limit
        detail = ""
        if not ok:
            detail = f"{len(counted)}: " + ", ".join(c.tool for c in counted[:10])
            if self.what == "max_errors":
                detail += f" (first error: {counted[0].error})"
        return CheckResult(self.label(), ok, detail)


_TAGS = {
    "called": "called",
    "not_called": "not_called",
    "order": "order",
    "max_calls": "limit",
    "max_denied": "limit",
    "max_errors": "limit",
}
_CLASSES = {
    CalledCheck: "called",
    NotCalledCheck: "not_called",
    OrderCheck: "order",
    LimitCheck: "limit",
}


_which = key_discriminator(_TAGS, _CLASSES)


TrajectoryCheck = Annotated[
    Annotated[CalledCheck, Tag("called")]
    | Annotated[NotCalledCheck, Tag("not_called")]
    | Annotated[OrderCheck, Tag("order")]
    | Annotated[LimitCheck, Tag("limit")],
    Discriminator(
        _which,
        custom_error_type="trajectory_check",
        custom_error_message="a trajectory check has one of 'called', 'not_called', 'order', "
        "'max_calls', 'max_denied' or 'max_errors'",
    ),
]
"""A declarative trajectory check, as a task document writes it."""

TRAJECTORY_CHECKS: TypeAdapter[list[TrajectoryCheck]] = TypeAdapter(list[TrajectoryCheck])

TrajectoryFn = Callable[[list[Call]], bool]
"""A Python trajectory check: gets the calls, returns whether it holds."""

_Declarative = CalledCheck | NotCalledCheck | OrderCheck | LimitCheck


class NamedTrajectoryCheck(NamedFn[list[Call]]):
    """A Python trajectory check with a name."""


def parse_trajectory_checks(
    checks: Iterable[Any] | Mapping[str, TrajectoryFn],
) -> list[_Declarative | NamedTrajectoryCheck]:
    """Checks from models, dicts, callables, `(name, fn)` pairs or `{name: fn}`;
    VerifierError naming the first bad one."""
    return parse_checks(
        checks,
        kind="trajectory check",
        adapter=TRAJECTORY_CHECKS,
        declarative=(CalledCheck, NotCalledCheck, OrderCheck, LimitCheck, NamedTrajectoryCheck),
        named=NamedTrajectoryCheck,
    )


def check_trajectory(
    records: Iterable[TrajectoryRecord | Mapping[str, Any] | Call],
    checks: Iterable[Any] | Mapping[str, TrajectoryFn],
    *,
    threshold: float = 1.0,
) -> Score:
    """Run a trajectory checklist over the call records: score = passed / total."""
    parsed = parse_trajectory_checks(checks)
    calls = calls_of(records)
    results = unique_names([c.evaluate(calls) for c in parsed])
    score = checklist_score(results, kind="trajectory_checks", threshold=threshold)
    score.details["calls"] = len(calls)
    return score


def _matches(call: Call, tool: str, args: dict[str, Any] | None) -> bool:
    return call.tool == tool and (args is None or subset_match(args, call.args))


def _call_label(tool: str, args: dict[str, Any] | None) -> str:
    if not args:
        return tool
    inner = ", ".join(f"{k}={short(v, 40)}" for k, v in args.items())
    return f"{tool}({inner})"
