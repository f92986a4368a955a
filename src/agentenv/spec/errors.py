"""DocumentError: one clear message for a bad document."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

# Tags of discriminated unions; pydantic puts them in error locations, users never wrote them.
_UNION_TAGS = {"action", "state", "time", "tool", "nl", "permission"}


def format_location(loc: Sequence[Any]) -> str:
    """Turn ('tools', 3, 'params', 'amount') into 'tools[3].params.amount'."""
    out = ""
    prev: Any = None
    for i, part in enumerate(loc):
        if (
            isinstance(part, str)
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
        cls, error: ValidationError, file: str | Path | None, prefix: str = ""
    ) -> DocumentError:
        """The first problem of a pydantic ValidationError, located in the document."""
        errors = error.errors(include_url=False)
        first = errors[0]
        path = format_location(first["loc"])
        if prefix:
            path = f"{prefix}.{path}" if path != "<document>" else prefix
        problem = first["msg"].removeprefix("Value error, ")
        if first["type"] not in ("missing", "extra_forbidden") and "input" in first:
            shown = repr(first["input"])
            problem += f" (got {shown[:60] + '...' if len(shown) > 60 else shown})"
        if first["type"] == "extra_forbidden":
            problem = "unknown field"
        return cls(file, path, problem, more=len(errors) - 1)
