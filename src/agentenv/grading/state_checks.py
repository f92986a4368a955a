"""State checklists: named boolean checks over a final state, with partial credit.

A check is either a Python callable `(state) -> bool` or a small declarative predicate
that a task document can carry:

* a field check: `{collection, key, field?, equals | not_equals | in | gte | lte | gt | lt
  | exists | contains}` (a record, or a dotted field of it; with no operator, "exists");
* a count check: `{collection, where?: {field: value}, count | min_count | max_count}`.

`check_state` runs them all and scores the share that passed (EnvScaler's reward).

    >>> check_state(state, [
    ...     {"collection": "accounts", "key": "a1", "field": "balance", "equals": 150},
    ...     {"collection": "audit", "where": {"event": "refund"}, "count": 1},
    ...     ("nobody is overdrawn", lambda s: all(a["balance"] >= 0 for a in s.list("accounts"))),
    ... ])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    model_validator,
)

from agentenv.grading.checklist import (
    MISSING,
    CheckResult,
    NamedFn,
    VerifierError,
    checklist_score,
    json_equal,
    lookup,
    parse_checks,
    short,
    subset_match,
    unique_names,
)
from agentenv.grading.file_checks import FileCheck
from agentenv.grading.score import Score
from agentenv.state import Snapshot, State, StateView, UnknownCollection

StateLike = State | Snapshot | StateView
"""What a state check reads: a live state, a snapshot, or a composed child's view."""

StateFn = Callable[[Any], bool]
"""A Python state check: gets a State (or StateView) to read, returns whether it holds."""

_OPERATORS = ("equals", "not_equals", "in_", "gte", "lte", "gt", "lt", "exists", "contains")
_SYMBOLS = {
    "equals": "==",
    "not_equals": "!=",
    "in_": "in",
    "gte": ">=",
    "lte": "<=",
    "gt": ">",
    "lt": "<",
    "contains": "contains",
}


class FieldCheck(BaseModel):
    """A record (or one dotted field of it) compared with a value.

    Operators given together must all hold; with none, the record (or field) must exist.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str | None = Field(default=None, description="Default: a description of the check.")
    collection: str
    key: str | int = Field(description="The record's key.")
    field: str | None = Field(
        default=None, description="A dotted path into the record; absent: the record itself."
    )
    equals: Any = None
    not_equals: Any = None
    in_: list[Any] | None = Field(default=None, alias="in")
    gte: float | str | None = None
    lte: float | str | None = None
    gt: float | str | None = None
    lt: float | str | None = None
    exists: bool | None = None
    contains: Any = None

    def operators(self) -> list[str]:
        """The operators this check was given (`equals: null` counts as given)."""
        given = [op for op in _OPERATORS if op in self.model_fields_set]
        return given or ["exists"]

    def where(self) -> str:
        """`collection[key].field`."""
        out = f"{self.collection}[{self.key}]"
        return f"{out}.{self.field}" if self.field else out

    def label(self) -> str:
        """The check's name, or a description of it."""
        if self.name:
            return self.name
        parts = []
        for op in self.operators():
            if op == "exists":
                wanted = self.exists is not False
                parts.append("exists" if wanted else "is absent")
            else:
                parts.append(f"{_SYMBOLS[op]} {short(getattr(self, op), 60)}")
        return f"{self.where()} {' and '.join(parts)}"

    def evaluate(self, state: StateLike) -> CheckResult:
        """Run the check; VerifierError for an unknown collection."""
        record = _read(state, lambda s: s.get(self.collection, self.key), self.collection)
        target = MISSING if record is None else lookup(record, self.field)
        problems = [p for op in self.operators() if (p := self._problem(op, target))]
        return CheckResult(self.label(), not problems, "; ".join(problems))

    def _problem(self, op: str, target: Any) -> str | None:
        if op == "exists":
            wanted = self.exists is not False
            if (target is not MISSING) == wanted:
                return None
            return f"{self.where()} is absent" if wanted else f"{self.where()} exists"
        if target is MISSING:
            return f"{self.where()} is absent"
        expected = getattr(self, op)
        ok: bool
        if op == "equals":
            ok = json_equal(target, expected)
        elif op == "not_equals":
            ok = not json_equal(target, expected)
        elif op == "in_":
            ok = any(json_equal(target, v) for v in expected)
        elif op == "contains":
            ok = _contains(target, expected)
        else:
            ordered = _compare(target, expected)
            if ordered is None:
                return f"{self.where()} is {short(target)}, not comparable with {short(expected)}"
            ok = {"gte": ordered >= 0, "lte": ordered <= 0, "gt": ordered > 0, "lt": ordered < 0}[
                op
            ]
        if ok:
            return None
        return f"{self.where()} is {short(target)}, expected {_SYMBOLS[op]} {short(expected)}"


class CountCheck(BaseModel):
    """How many records of a collection match `where` (dotted field -> value)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    collection: str
    where: dict[str, Any] = Field(default_factory=dict)
    count: int | None = Field(default=None, ge=0)
    min_count: int | None = Field(default=None, ge=0)
    max_count: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _has_bound(self) -> CountCheck:
        if self.count is None and self.min_count is None and self.max_count is None:
            raise ValueError("a count check needs 'count', 'min_count' or 'max_count'")
        return self

    def label(self) -> str:
        """The check's name, or a description of it."""
        if self.name:
            return self.name
        where = ", ".join(f"{k}={short(v, 40)}" for k, v in self.where.items())
        subject = f"count({self.collection}{' where ' + where if where else ''})"
        bounds = []
        if self.count is not None:
            bounds.append(f"== {self.count}")
        if self.min_count is not None:
            bounds.append(f">= {self.min_count}")
        if self.max_count is not None:
            bounds.append(f"<= {self.max_count}")
        return f"{subject} {' and '.join(bounds)}"

    def evaluate(self, state: StateLike) -> CheckResult:
        """Run the check; VerifierError for an unknown collection."""
        records = _read(state, lambda s: s.list(self.collection), self.collection)
        n = sum(
            1
            for r in records
            if all(subset_match(v, lookup(r, path)) for path, v in self.where.items())
        )
        ok = (
            (self.count is None or n == self.count)
            and (self.min_count is None or n >= self.min_count)
            and (self.max_count is None or n <= self.max_count)
        )
        return CheckResult(self.label(), ok, "" if ok else f"found {n}")


def _which(value: Any) -> str | None:
    if isinstance(value, FieldCheck):
        return "field"
    if isinstance(value, CountCheck):
        return "count"
    if isinstance(value, FileCheck):
        return "file"
    if isinstance(value, Mapping):
        if "file" in value:
            return "file"
        return "field" if "key" in value else "count"
    return None


StateCheck = Annotated[
    Annotated[FieldCheck, Tag("field")]
    | Annotated[CountCheck, Tag("count")]
    | Annotated[FileCheck, Tag("file")],
    Discriminator(
        _which,
        custom_error_type="state_check",
        custom_error_message="a state check is an object: a field check (with 'key'), "
        "a count check (with 'count', 'min_count' or 'max_count') or a file check (with 'file')",
    ),
]
"""A declarative state check, as a task document writes it."""

STATE_CHECKS: TypeAdapter[list[StateCheck]] = TypeAdapter(list[StateCheck])


class NamedCheck(NamedFn[StateLike]):
    """A Python state check with a name."""


StateCheckLike = FieldCheck | CountCheck | FileCheck | NamedCheck | Mapping[str, Any] | StateFn
"""Anything `check_state` accepts as one check (or a `(name, fn)` pair)."""


def parse_state_checks(
    checks: Iterable[Any] | Mapping[str, StateFn],
) -> list[FieldCheck | CountCheck | FileCheck | NamedCheck]:
    """Checks from models, dicts, callables, `(name, fn)` pairs or a `{name: fn}` mapping;
    VerifierError naming the first bad one."""
    return parse_checks(
        checks,
        kind="state check",
        adapter=STATE_CHECKS,
        declarative=(FieldCheck, CountCheck, FileCheck, NamedCheck),
        named=NamedCheck,
    )


def check_state(
    state: StateLike,
    checks: Iterable[Any] | Mapping[str, StateFn],
    *,
    threshold: float = 1.0,
) -> Score:
    """Run a state checklist: score = passed / total, passed when score >= threshold.

    Python checks get a fork of the state (a State), or the view itself, so nothing they
    do changes it. An unknown collection in a declarative check raises VerifierError.
    """
    parsed = parse_state_checks(checks)
    readable: State | StateView = state.fork() if isinstance(state, State | Snapshot) else state
    results = unique_names([c.evaluate(readable) for c in parsed])
    return checklist_score(results, kind="state_checks", threshold=threshold)


def _read(state: StateLike, how: Callable[[Any], Any], collection: str) -> Any:
    try:
        return how(state)
    except UnknownCollection as exc:
        raise VerifierError(f"state check: {exc}") from None


def _contains(target: Any, expected: Any) -> bool:
    if isinstance(target, str):
        return isinstance(expected, str) and expected in target
    if isinstance(target, Mapping):
        return isinstance(expected, str) and expected in target
    if isinstance(target, list):
        return any(subset_match(expected, item) for item in target)
    return False


def _compare(a: Any, b: Any) -> int | None:
    numbers = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return None
    if isinstance(a, numbers) and isinstance(b, numbers):
        return (a > b) - (a < b)
    if isinstance(a, str) and isinstance(b, str):
        return (a > b) - (a < b)
    return None
