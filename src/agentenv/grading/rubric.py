"""Rubric grading: an LLM judge, through any OpenAI-compatible endpoint.

The judge sees the task prompt, the agent's tool calls (optional), its final response,
the task's grading policy and the criteria, and answers a JSON verdict per criterion.
Verdicts are parsed leniently (fenced or embedded JSON, `pass`/`met`/`yes`, a list or
a mapping by id), and combined with the usual aggregators (all must pass by default).

Configuration: `model` (or `AGENTENV_JUDGE_MODEL`), `base_url` (or `OPENAI_BASE_URL`)
and `api_key` (or `OPENAI_API_KEY`). It needs the optional `openai` package
(`pip install 'agentenv-kit[llm]'`), imported only when a judge is called. With
no endpoint or no package it raises `RubricError`; it never makes up a score.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from agentenv.gateway.trajectory import TrajectoryRecord
from agentenv.grading.aggregate import Aggregator, aggregate
from agentenv.grading.checklist import VerifierError, short
from agentenv.grading.response_checks import extract_json
from agentenv.grading.score import Score

ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_API_KEY = "OPENAI_API_KEY"
ENV_MODEL = "AGENTENV_JUDGE_MODEL"
NO_KEY = "not-needed"
"""The API key sent to an endpoint given without one (local servers ignore it)."""


class RubricError(VerifierError):
    """The judge could not be asked (not configured, no `openai`, endpoint down) or its
    answer could not be read."""


class Criterion(BaseModel):
    """One rubric criterion. Extra fields are shown to the judge as they are."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    id: str | None = Field(default=None, description="Default: c1, c2, ... by position.")
    criterion: str = Field(
        min_length=1,
        validation_alias=AliasChoices("criterion", "description", "text", "rubric", "requirement"),
    )
    weight: float = Field(
        default=1.0,
        description="For `weighted` and `weighted_average` (where a negative weight is a penalty).",
    )


CriterionLike = str | Criterion | Mapping[str, Any]


def normalize_criteria(items: Iterable[CriterionLike]) -> list[Criterion]:
    """Criteria from strings, dicts or models, with ids filled in (`c1`, ...); RubricError
    for an empty list, a bad entry or a repeated id."""
    out: list[Criterion] = []
    for i, item in enumerate(items):
        try:
            if isinstance(item, str):
                criterion = Criterion(criterion=item)
            elif isinstance(item, Criterion):
                criterion = item.model_copy()
            else:
                criterion = Criterion.model_validate(dict(item))
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(p) for p in first["loc"])
            raise RubricError(
                f"criteria[{i}]{'.' + where if where else ''}: {first['msg']}"
            ) from None
        if criterion.id is None:
            criterion.id = f"c{i + 1}"
        out.append(criterion)
    if not out:
        raise RubricError("a rubric needs at least one criterion")
    ids = [c.id for c in out]
    repeated = sorted({i for i in ids if ids.count(i) > 1 and i is not None})
    if repeated:
        raise RubricError(f"criterion ids must be unique: {', '.join(repeated)} repeated")
    return out


SYSTEM_PROMPT = """You are a strict, fair grader of an AI agent's work.
You get the task the agent was given, what it did, its final response, and a list of
criteria. Judge each criterion on its own, only from the evidence shown; when the
evidence does not show that a criterion is met, it is not met.

Answer with one JSON object and nothing else, in exactly this shape:
{"criteria": [{"id": "<criterion id>", "passed": true or false, "reason": "<one sentence>"}]}
with one entry per criterion, using the criterion ids given."""


def render_trajectory(
    records: Iterable[TrajectoryRecord | Mapping[str, Any]],
    *,
    max_calls: int = 50,
    max_chars: int = 400,
) -> str:
    """The tool calls of a trajectory as numbered lines a judge can read."""
    lines = []
    calls = [r for r in records if _get(r, "kind") in (None, "call")]
    for n, record in enumerate(calls[:max_calls], 1):
        args = json.dumps(_get(record, "args") or {}, sort_keys=True, default=str)
        error = _get(record, "error")
        if error is not None:
            message = error.get("message") if isinstance(error, Mapping) else error.message
            outcome = f"ERROR: {message}"
        else:
            outcome = json.dumps(_get(record, "result"), sort_keys=True, default=str)
        text = f"{n}. {_get(record, 'tool')}({args}) -> {outcome}"
        lines.append(text if len(text) <= max_chars else text[: max_chars - 3] + "...")
    if len(calls) > max_calls:
        lines.append(f"... and {len(calls) - max_calls} more calls")
    return "\n".join(lines) if lines else "(no tool calls)"


def _get(record: Any, name: str) -> Any:
    if isinstance(record, Mapping):
        return record.get(name)
    return getattr(record, name, None)


def build_messages(
    criteria: Sequence[Criterion],
    response: str | None,
    *,
    prompt: str | None = None,
    policy: str | None = None,
    trajectory: str | None = None,
) -> list[dict[str, str]]:
    """The chat messages a judge gets: the instructions, then the evidence and criteria."""
    sections = []
    if prompt is not None:
        sections.append(f"## Task given to the agent\n{prompt}")
    if trajectory is not None:
        sections.append(f"## The agent's tool calls\n{trajectory}")
    sections.append(
        "## The agent's final response\n"
        + (response if response is not None else "(the agent gave no response)")
    )
    if policy:
        sections.append(f"## Grading policy\n{policy}")
    listed = [{"id": c.id, "criterion": c.criterion, **(c.model_extra or {})} for c in criteria]
    sections.append("## Criteria\n" + json.dumps(listed, indent=2, default=str))
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(sections)},
    ]


@dataclass
class CriterionVerdict:
    """The judge's verdict on one criterion."""

    id: str
    passed: bool
    score: float
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The verdict as JSON data."""
        return {"id": self.id, "passed": self.passed, "score": self.score, "reason": self.reason}


_TRUE = {"true", "pass", "passed", "yes", "y", "met", "satisfied", "ok", "correct", "1"}
_FALSE = {
    "false",
    "fail",
    "failed",
    "no",
    "n",
    "not met",
    "not_met",
    "unmet",
    "unsatisfied",
    "incorrect",
    "0",
}
_PASS_KEYS = ("passed", "pass", "met", "satisfied", "result", "verdict", "value", "answer")
_REASON_KEYS = ("reason", "reasoning", "explanation", "rationale", "evidence", "justification")
_LIST_KEYS = ("criteria", "results", "verdicts", "evaluations", "scores", "grades")


def _as_bool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value >= 0.5 if 0 <= value <= 1 else None
    if isinstance(value, str):
        word = value.strip().strip(".").lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return None


def _verdict(criterion_id: str, item: Any) -> CriterionVerdict | None:
    passed = _as_bool(item)
    if passed is not None:
        return CriterionVerdict(criterion_id, passed, 1.0 if passed else 0.0)
    if not isinstance(item, Mapping):
        return None
    for key in _PASS_KEYS:
        if key in item and (passed := _as_bool(item[key])) is not None:
            break
    score = item.get("score")
    if isinstance(score, bool) or not isinstance(score, int | float):
        score = None
    elif score > 1 and score <= 10:
        score = score / 10
    if score is not None:
        score = min(max(float(score), 0.0), 1.0)
    if passed is None:
        if score is None:
            return None
        passed = score >= 0.5
    if score is None:
        score = 1.0 if passed else 0.0
    reason = next((str(item[k]) for k in _REASON_KEYS if item.get(k)), "")
    return CriterionVerdict(criterion_id, passed, score, reason)


def parse_verdicts(text: str, criteria: Sequence[Criterion]) -> dict[str, CriterionVerdict]:
    """Read a judge's answer: a verdict per criterion id. A criterion the judge left out
    fails (its reason says so); an answer with no verdict at all raises RubricError."""
    try:
        document = extract_json(text)
    except ValueError:
        raise RubricError(f"the judge's answer is not JSON: {short(text, 300)}") from None
    ids = [c.id or "" for c in criteria]
    items: Any = document
    if isinstance(document, Mapping):
        listed = next((document[k] for k in _LIST_KEYS if k in document), None)
        if isinstance(listed, Mapping | list):
            items = listed
        elif len(ids) == 1 and ids[0] not in document:
            items = [document]  # a bare verdict for the only criterion
    found: dict[str, CriterionVerdict] = {}
    if isinstance(items, Mapping):
        for cid in ids:
            if cid in items and (v := _verdict(cid, items[cid])) is not None:
                found[cid] = v
    elif isinstance(items, list):
        positional = len(items) == len(ids)
        for n, item in enumerate(items):
            cid = None
            if isinstance(item, Mapping):
                raw = item.get("id", item.get("criterion_id"))
                cid = str(raw) if raw is not None else None
            if cid not in ids:
                cid = ids[n] if positional else None
            if cid is not None and cid not in found and (v := _verdict(cid, item)) is not None:
                found[cid] = v
    if not found:
        raise RubricError(f"the judge's answer has no verdicts: {short(text, 300)}")
    for cid in ids:
        if cid not in found:
            found[cid] = CriterionVerdict(cid, False, 0.0, "the judge gave no verdict")
    return {cid: found[cid] for cid in ids}


class RubricJudge:
    """An LLM judge on an OpenAI-compatible chat completions endpoint."""

    def __init__(
        self,
        model: str | None = None,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 120.0,
        max_attempts: int = 2,
        temperature: float | None = 0.0,
        extra_params: Mapping[str, Any] | None = None,
    ) -> None:
        self.model = model or os.environ.get(ENV_MODEL) or None
        self.base_url = base_url or os.environ.get(ENV_BASE_URL) or None
        self.api_key = api_key or os.environ.get(ENV_API_KEY) or None
        self.timeout = timeout
        self.max_attempts = max(1, max_attempts)
        self.temperature = temperature
        self.extra_params = dict(extra_params or {})

    def _check_config(self) -> None:
        if self.base_url is None and self.api_key is None:
            raise RubricError(
                "no LLM judge endpoint is configured: set OPENAI_BASE_URL (and OPENAI_API_KEY "
                "if it needs one), or give base_url"
            )
        if not self.model:
            raise RubricError(
                f"no judge model: give the model (default_model in a task) or set {ENV_MODEL}"
            )

    def _client(self) -> Any:
        self._check_config()
        try:
            import openai
        except ImportError:
            raise RubricError(
                "the LLM judge needs the 'openai' package: pip install 'agentenv-kit[llm]'"
            ) from None
        return openai.AsyncOpenAI(
            base_url=self.base_url,
            api_key=self.api_key or NO_KEY,
            timeout=self.timeout,
            max_retries=1,
        )

    async def complete(self, messages: list[dict[str, str]]) -> str:
        """One chat completion; RubricError when the endpoint fails."""
        client = self._client()
        params: dict[str, Any] = {"model": self.model, "messages": messages, **self.extra_params}
        if self.temperature is not None:
            params.setdefault("temperature", self.temperature)
        try:
            completion = await client.chat.completions.create(**params)
        except Exception as exc:
            where = self.base_url or "the OpenAI API"
            raise RubricError(
                f"the judge request to {where} failed: {type(exc).__name__}: {exc}"
            ) from None
        finally:
            await client.close()
        choices = getattr(completion, "choices", None) or []
        content = choices[0].message.content if choices else None
        if not content:
            raise RubricError("the judge answered with no content")
        return str(content)

    async def grade(
        self,
        response: str | None,
        criteria: Iterable[CriterionLike],
        *,
        prompt: str | None = None,
        policy: str | None = None,
        trajectory: Iterable[TrajectoryRecord | Mapping[str, Any]] | None = None,
        aggregator: Aggregator = "all_pass",
        threshold: float = 1.0,
    ) -> Score:
        """Ask the judge about every criterion and combine the verdicts.

        An unreadable answer is asked again (up to `max_attempts` in all), then raises.
        """
        items = normalize_criteria(criteria)
        self._check_config()
        rendered = render_trajectory(trajectory) if trajectory is not None else None
        messages = build_messages(
            items, response, prompt=prompt, policy=policy, trajectory=rendered
        )
        error: RubricError | None = None
        for _ in range(self.max_attempts):
            text = await self.complete(messages)
            try:
                verdicts = parse_verdicts(text, items)
                break
            except RubricError as exc:
                error = exc
        else:
            assert error is not None
            raise error
        scores = {
            cid: Score(score=v.score, passed=v.passed, details={"reason": v.reason})
            for cid, v in verdicts.items()
        }
        weights = {c.id or "": c.weight for c in items}
        final = aggregate(scores, aggregator, weights=weights, threshold=threshold)
        by_id = {c.id: c for c in items}
        final.details.update(
            kind="rubric",
            model=self.model,
            criteria=[
                {**v.to_json(), "criterion": by_id[cid].criterion} for cid, v in verdicts.items()
            ],
            failed=[cid for cid, v in verdicts.items() if not v.passed],
        )
        return final


async def judge_rubric(
    response: str | None,
    criteria: Iterable[CriterionLike],
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    prompt: str | None = None,
    policy: str | None = None,
    trajectory: Iterable[TrajectoryRecord | Mapping[str, Any]] | None = None,
    aggregator: Aggregator = "all_pass",
    threshold: float = 1.0,
) -> Score:
    """Grade a response against criteria with an LLM judge (see `RubricJudge`)."""
    judge = RubricJudge(model, base_url=base_url, api_key=api_key)
    return await judge.grade(
        response,
        criteria,
        prompt=prompt,
        policy=policy,
        trajectory=trajectory,
        aggregator=aggregator,
        threshold=threshold,
    )
