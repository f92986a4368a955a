"""Response checklists: checks over an agent's final answer text.

Declarative checks:

* `{contains: "text", ignore_case?: false}` and `{not_contains: "text", ignore_case?}`;
* `{regex: "pattern", ignore_case?: false}` (searched anywhere; `re` syntax);
* `{json_field: "a.b.0", equals?: value, exists?: true}`: the response parsed as JSON
  (or the first JSON object found in it, fenced or not), a dotted path into it, which
  must exist (and equal `equals`, when given).

Python checks are callables `(text) -> bool`. `check_response` scores the share that
passed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    field_validator,
)

from agentenv.grading.checklist import (
    MISSING,
    CheckResult,
    NamedFn,
    checklist_score,
    json_equal,
    key_discriminator,
    lookup,
    parse_checks,
    short,
    unique_names,
)
from agentenv.grading.score import Score

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n(.*?)```", re.DOTALL)


def extract_json(text: str) -> Any:
    """The response as JSON: the whole text, else the first fenced block that parses,
    else the first JSON object (`{...}`) embedded in the text. ValueError if none."""
    stripped = text.strip()
    try:
        return json.loads(stripped)
    except ValueError:
        pass
    for block in _FENCE.findall(text):
        try:
            return json.loads(block.strip())
        except ValueError:
            continue
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            start = text.find("{", start + 1)
            continue
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    raise ValueError("no JSON found in the response")


class _Check(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str | None = None


class ContainsCheck(_Check):
    """The response contains a text."""

    contains: str
    ignore_case: bool = False

    def evaluate(self, text: str) -> CheckResult:
        """Run the check."""
        ok = _find(self.contains, text, self.ignore_case)
        return CheckResult(
            self.name or f"contains {self.contains!r}",
            ok,
            "" if ok else f"not in the response: {short(text, 120)}",
        )


class NotContainsCheck(_Check):
    """The response does not contain a text."""

    not_contains: str
    ignore_case: bool = False

    def evaluate(self, text: str) -> CheckResult:
        """Run the check."""
        found = _find(self.not_contains, text, self.ignore_case)
        return CheckResult(
            self.name or f"does not contain {self.not_contains!r}",
            not found,
            "found in the response" if found else "",
        )


class RegexCheck(_Check):
    """A regular expression matches somewhere in the response."""

    regex: str
    ignore_case: bool = False

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"bad regular expression {value!r}: {exc}") from None
        return value

    def evaluate(self, text: str) -> CheckResult:
        """Run the check."""
        flags = re.IGNORECASE if self.ignore_case else 0
        found = re.search(self.regex, text, flags)
        return CheckResult(
            self.name or f"matches /{self.regex}/",
            found is not None,
            "" if found else f"no match in: {short(text, 120)}",
        )


class JsonFieldCheck(_Check):
    """A field of the response's JSON exists (and equals a value)."""

    json_field: str = Field(description="A dotted path; '' for the whole document.")
    equals: Any = None
    exists: bool = True

    def evaluate(self, text: str) -> CheckResult:
        """Run the check."""
        has_equals = "equals" in self.model_fields_set
        label = self.name or (
            f"json {self.json_field or '<root>'} == {short(self.equals, 60)}"
            if has_equals
            else f"json {self.json_field or '<root>'} {'exists' if self.exists else 'is absent'}"
        )
        try:
            document = extract_json(text)
        except ValueError as exc:
            return CheckResult(label, False, str(exc))
        value = lookup(document, self.json_field)
        if value is MISSING:
            ok = not self.exists and not has_equals
            return CheckResult(label, ok, "" if ok else f"{self.json_field!r} is absent")
        if not self.exists:
            return CheckResult(label, False, f"{self.json_field!r} exists")
        if has_equals and not json_equal(value, self.equals):
            return CheckResult(label, False, f"is {short(value)}")
        return CheckResult(label, True)


_TAGS = {
    "contains": "contains",
    "not_contains": "not_contains",
    "regex": "regex",
    "json_field": "json_field",
}
_CLASSES = {
    ContainsCheck: "contains",
    NotContainsCheck: "not_contains",
    RegexCheck: "regex",
    JsonFieldCheck: "json_field",
}


_which = key_discriminator(_TAGS, _CLASSES)


ResponseCheck = Annotated[
    Annotated[ContainsCheck, Tag("contains")]
    | Annotated[NotContainsCheck, Tag("not_contains")]
    | Annotated[RegexCheck, Tag("regex")]
    | Annotated[JsonFieldCheck, Tag("json_field")],
    Discriminator(
        _which,
        custom_error_type="response_check",
        custom_error_message="a response check has one of 'contains', 'not_contains', "
        "'regex' or 'json_field'",
    ),
]
"""A declarative response check, as a task document writes it."""

RESPONSE_CHECKS: TypeAdapter[list[ResponseCheck]] = TypeAdapter(list[ResponseCheck])

ResponseFn = Callable[[str], bool]
"""A Python response check: gets the text, returns whether it holds."""

_Declarative = ContainsCheck | NotContainsCheck | RegexCheck | JsonFieldCheck


class NamedResponseCheck(NamedFn[str]):
    """A Python response check with a name."""


def parse_response_checks(
    checks: Iterable[Any] | Mapping[str, ResponseFn],
) -> list[_Declarative | NamedResponseCheck]:
    """Checks from models, dicts, callables, `(name, fn)` pairs or `{name: fn}`;
    VerifierError naming the first bad one."""
    return parse_checks(
        checks,
        kind="response check",
        adapter=RESPONSE_CHECKS,
        declarative=(
            ContainsCheck,
            NotContainsCheck,
            RegexCheck,
            JsonFieldCheck,
            NamedResponseCheck,
        ),
        named=NamedResponseCheck,
    )


def check_response(
    response: str | None,
    checks: Iterable[Any] | Mapping[str, ResponseFn],
    *,
    threshold: float = 1.0,
) -> Score:
    """Run a response checklist: score = passed / total. No response counts as ''."""
    parsed = parse_response_checks(checks)
    text = response or ""
    results = unique_names([c.evaluate(text) for c in parsed])
    score = checklist_score(results, kind="response_checks", threshold=threshold)
    if response is None:
        score.details["note"] = "the agent gave no response"
    return score


def _find(needle: str, haystack: str, ignore_case: bool) -> bool:
    if ignore_case:
        return needle.casefold() in haystack.casefold()
    return needle in haystack
