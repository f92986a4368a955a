"""What every checklist verifier shares: check results, partial credit, dotted paths.

A checklist is a list of named boolean checks; its score is the share that passed
(EnvScaler's reward), and it passes when that share reaches a threshold (all of them,
by default). Misconfigured checks (an unknown collection, a bad pattern) raise
`VerifierError` rather than quietly failing, so a broken verifier never looks like a
bad agent.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from agentenv.grading.score import Score


class VerifierError(ValueError):
    """A verifier that cannot grade: misconfigured, or missing what it grades."""


class _Missing:
    """The value at a path that does not exist."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "<missing>"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()
"""What `lookup` returns for a path that does not exist."""


def lookup(value: Any, path: str | None) -> Any:
    """The value at a dotted path (`address.city`, `items.0.sku`), or MISSING.

    Dict keys are matched first; a segment of digits indexes a list. An empty path
    (or None) is the value itself.
    """
    if not path:
        return value
    node = value
    for segment in path.split("."):
        if isinstance(node, Mapping):
            if segment not in node:
                return MISSING
            node = node[segment]
        elif _is_list(node):
            try:
                index = int(segment)
            except ValueError:
                return MISSING
            if not -len(node) <= index < len(node):
                return MISSING
            node = node[index]
        else:
            return MISSING
    return node


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: `1 == 1.0`, but `true != 1`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if _is_list(a) and _is_list(b):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def subset_match(expected: Any, actual: Any) -> bool:
    """Whether `actual` holds `expected`: objects match on the expected keys only
    (recursively); everything else must be equal (`json_equal`)."""
    if isinstance(expected, Mapping):
        if not isinstance(actual, Mapping):
            return False
        return all(k in actual and subset_match(v, actual[k]) for k, v in expected.items())
    return json_equal(expected, actual)


def short(value: Any, limit: int = 200) -> str:
    """A value's repr, cut to `limit` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class CheckResult:
    """The outcome of one check."""

    name: str
    passed: bool
    detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The result as JSON data."""
        out: dict[str, Any] = {"name": self.name, "passed": self.passed}
        if self.detail:
            out["detail"] = self.detail
        return out


S = TypeVar("S")


@dataclass
class NamedFn(Generic[S]):
    """A Python check with a name: `fn(subject) -> bool`; an exception fails the check
    (its message is the detail). State, trajectory and response checks share it."""

    name: str
    fn: Callable[[S], bool]

    def evaluate(self, subject: S) -> CheckResult:
        """Call the function on what is checked."""
        try:
            ok = bool(self.fn(subject))
        except Exception as exc:
            return CheckResult(self.name, False, f"raised {type(exc).__name__}: {exc}")
        return CheckResult(self.name, ok)


def checklist_score(results: Iterable[CheckResult], *, kind: str, threshold: float = 1.0) -> Score:
    """Partial credit: the share of checks that passed; passed when it reaches `threshold`."""
    items = list(results)
    if not items:
        raise VerifierError(f"{kind}: no checks to run")
    if not 0 <= threshold <= 1:
        raise VerifierError(f"{kind}: threshold must be in [0, 1], got {threshold}")
    passed = sum(1 for r in items if r.passed)
    value = passed / len(items)
    return Score(
        score=value,
        passed=value >= threshold,
        details={
            "kind": kind,
            "passed_checks": passed,
            "total_checks": len(items),
            "threshold": threshold,
            "checks": [r.to_json() for r in items],
            "failed": [r.name for r in items if not r.passed],
        },
    )


def unique_names(results: list[CheckResult]) -> list[CheckResult]:
    """Make check names unique (`name`, `name#2`, ...) so details can be read by name."""
    seen: dict[str, int] = {}
    for result in results:
        count = seen.get(result.name, 0) + 1
        seen[result.name] = count
        if count > 1:
            result.name = f"{result.name}#{count}"
    return results


def parse_checks(
    checks: Iterable[Any] | Mapping[str, Callable[..., Any]],
    *,
    kind: str,
    adapter: TypeAdapter[list[Any]],
    declarative: tuple[type, ...],
    named: Callable[[str, Callable[..., Any]], Any],
) -> list[Any]:
    """Checks from models, dicts (validated by `adapter`), callables, `(name, fn)` pairs
    or a `{name: fn}` mapping; VerifierError naming the first bad one."""
    if isinstance(checks, Mapping):
        return [named(str(name), fn) for name, fn in checks.items()]
    out: list[Any] = []
    for i, item in enumerate(checks):
        if isinstance(item, declarative):
            out.append(item)
        elif isinstance(item, tuple) and len(item) == 2 and callable(item[1]):
            out.append(named(str(item[0]), item[1]))
        elif callable(item):
            out.append(named(getattr(item, "__name__", f"check {i}"), item))
        elif isinstance(item, Mapping):
            try:
                out.append(adapter.validate_python([item])[0])
            except ValidationError as exc:
                first = exc.errors(include_url=False)[0]
                where = ".".join(str(p) for p in first["loc"][2:])
                raise VerifierError(
                    f"{kind} {i}{' (' + where + ')' if where else ''}: {first['msg']}"
                ) from None
        else:
            raise VerifierError(
                f"{kind} {i}: expected a dict, a callable or (name, callable), "
                f"got {type(item).__name__}"
            )
    return out


def key_discriminator(
    tags: Mapping[str, str], classes: Mapping[type, str]
) -> Callable[[Any], str | None]:
    """A pydantic Discriminator function for check lists where a check's kind is given by
    which key it has (`contains:`, `called:` ...), or by its class when already built."""

    def which(value: Any) -> str | None:
        if isinstance(value, Mapping):
            return next((tags[k] for k in value if k in tags), None)
        return classes.get(type(value))

    return which
