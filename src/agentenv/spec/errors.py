"""DocumentError: one clear message for a bad document."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

# Tags of discriminated unions; pydantic puts them in error locations, users never wrote them.
_UNION_TAGS = {"action", "state", "time", "tool", "nl", "permission"}


def format_location(loc: Sequence[Any], *, strip_tags: bool = True) -> str:
    """Turn ('tools', 3, 'params', 'amount') into 'tools[3].params.amount'.

    `strip_tags` drops discriminated-union tags by position (for when the data is not at
    hand to tell a tag from a field named like one).
    """
    out = ""
    prev: Any = None
    for i, part in enumerate(loc):
        if (
            strip_tags
            and isinstance(part, str)
            and part in _UNION_TAGS
            and (prev == "when" or (isinstance(prev, int) and i >= 2 and loc[i - 2] == "actions"))
        ):
            prev = part
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and (not part.isidentifier() or part.startswith("[")):
            out += f"[{part!r}]" if out else part
        else:
            out += f".{part}" if out else str(part)
        prev = part
    return out or "<document>"


class DocumentError(ValueError):
    """A document that cannot be used: names the file, the place inside it and the problem."""

    def __init__(self, file: str | Path | None, path: str, problem: str, *, more: int = 0) -> None:
        self.file = str(file) if file is not None else None
        self.path = path
        self.problem = problem
        self.more = more
        where = f"{self.file}: " if self.file else ""
        extra = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        super().__init__(f"{where}{path}: {problem}{extra}")

    @classmethod
    def from_validation(
        cls,
        error: ValidationError,
        file: str | Path | None,
        prefix: str = "",
        data: Any = None,
    ) -> DocumentError:
        """The first problem of a pydantic ValidationError, located in the document.

        With the validated `data`, locations are walked through it, which drops the
        labels pydantic adds for union members (`'list[str]'`) that no user wrote.
        """
        errors = error.errors(include_url=False)
        if data is not None:
            errors = _dedupe([{**e, "loc": _user_location(e["loc"], data)} for e in errors])
        first = errors[0]
        path = format_location(first["loc"], strip_tags=data is None)
        if prefix:
            path = f"{prefix}.{path}" if path != "<document>" else prefix
        problem = first["msg"].removeprefix("Value error, ")
        if first["type"] not in ("missing", "extra_forbidden") and "input" in first:
            shown = repr(first["input"])
            problem += f" (got {shown[:60] + '...' if len(shown) > 60 else shown})"
        if first["type"] == "extra_forbidden":
            problem = "unknown field"
        return cls(file, path, problem, more=len(errors) - 1)


def _user_location(loc: Sequence[Any], data: Any) -> tuple[Any, ...]:
    """`loc` with the parts that do not name a key or index of `data` left out."""
    out: list[Any] = []
    node = data
    tagged: Any = None
    for part in loc:
        if (
            isinstance(node, dict)
            and part in _UNION_TAGS
            and node.get("type") == part
            and tagged is not node
        ):
            tagged = node  # the tag of a discriminated union (once: a field may share its name)
            continue
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        ):
            node = node[part]
            out.append(part)
        elif isinstance(part, str) and not isinstance(node, dict | list):
            continue  # a union label below a leaf value
        elif isinstance(part, str) and isinstance(node, dict) and not _is_label(part):
            out.append(part)  # a missing or unknown field: keep its name
            node = None
        elif not _is_label(part) and not isinstance(part, str):
            out.append(part)
            node = None
    return tuple(out)


def _is_label(part: Any) -> bool:
    return isinstance(part, str) and (
        "[" in part
        or part in {"str", "int", "float", "bool", "list", "dict", "timedelta"}
        or part.startswith("function-")
    )


def _dedupe(errors: list[Any]) -> list[Any]:
    seen: set[tuple[Any, ...]] = set()
    out = []
    for error in errors:
        if error["loc"] not in seen:
            seen.add(error["loc"])
            out.append(error)
    return out
