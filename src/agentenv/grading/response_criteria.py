"""Response criteria in the protocol's shape: `{type: ..., ...}` items of an
`agent_prompt_response_verifier`'s `criteria`.

* `{type: response_contains, needles: [text, ...]}`: every needle is in the response;
* `{type: response_regex_present, pattern: "...", flags?: ["IGNORECASE", ...]}`: the
  pattern matches somewhere (`re.search`; without `flags`, `.` also matches newlines).

Each may carry `criterion` (what it checks, in words), `id` and `weight`. Each gives one
result row `{**criterion, criterion_index, score, result, justification}`, the rows the
protocol's score aggregators fold into one score.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

CRITERION_TYPES = ("response_contains", "response_regex_present")


class _Criterion(BaseModel):
    model_config = ConfigDict(extra="allow")

    criterion: str | None = Field(default=None, description="What it checks, in words.")
    id: str | None = None
    weight: float = 1.0

    def row(self, index: int, passed: bool, justification: str) -> dict[str, Any]:
        """The criterion's result row."""
        return {
            **self.model_dump(exclude_none=True),
            "criterion_index": index,
            "score": 1.0 if passed else 0.0,
            "result": passed,
            "justification": justification,
        }


class ResponseContains(_Criterion):
    """Every needle appears in the response (case-sensitive)."""

    type: Literal["response_contains"]
    needles: list[str] = Field(min_length=1)

    def evaluate(self, index: int, response: str) -> dict[str, Any]:
        """The row for a response."""
        missing = [n for n in self.needles if n not in response]
        why = "every needle is in the response" if not missing else f"missing: {missing}"
        return self.row(index, not missing, why)


class ResponseRegexPresent(_Criterion):
    """A regular expression matches somewhere in the response."""

    type: Literal["response_regex_present"]
    pattern: str = Field(min_length=1)
    flags: list[str] | None = Field(default=None, description="Names of `re` flags; unset: DOTALL.")

    @field_validator("flags")
    @classmethod
    def _known_flags(cls, flags: list[str] | None) -> list[str] | None:
        for name in flags or []:
            if not isinstance(getattr(re, name, None), re.RegexFlag):
                raise ValueError(f"{name!r} is not a flag of Python's re module")
        return flags

    def compiled(self) -> re.Pattern[str]:
        """The pattern with its flags."""
        if self.flags is None:
            return re.compile(self.pattern, re.DOTALL)
        value = 0
        for name in self.flags:
            value |= getattr(re, name)
        return re.compile(self.pattern, value)

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, pattern: str) -> str:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ValueError(f"bad regular expression {pattern!r}: {exc}") from None
        return pattern

    def evaluate(self, index: int, response: str) -> dict[str, Any]:
        """The row for a response."""
        found = self.compiled().search(response) is not None
        why = "the pattern matched" if found else f"no match for {self.pattern!r}"
        return self.row(index, found, why)


ResponseCriterion = Annotated[ResponseContains | ResponseRegexPresent, Field(discriminator="type")]
"""One protocol response criterion."""

RESPONSE_CRITERIA: TypeAdapter[list[ResponseCriterion]] = TypeAdapter(list[ResponseCriterion])


def criteria_rows(
    response: str | None, criteria: list[ResponseContains | ResponseRegexPresent]
) -> list[dict[str, Any]]:
    """Every criterion's row for a response (no response counts as '')."""
    text = response or ""
    return [c.evaluate(i, text) for i, c in enumerate(criteria)]
