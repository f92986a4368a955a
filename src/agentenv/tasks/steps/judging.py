"""Verifier steps that judge or combine: rubrics_verifier (an LLM judge) and
aggregate_verifiers (one score from several verifiers)."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field, model_validator

from agentenv.gateway.trajectory import TrajectoryRecord
from agentenv.grading.aggregate import AGGREGATE_STEP, Aggregator, aggregate, aggregate_rows
from agentenv.grading.checklist import VerifierError
from agentenv.grading.rubric import Criterion, RubricJudge
from agentenv.grading.score import Score
from agentenv.registry import RegistryError
from agentenv.spec.task import TaskSpec
from agentenv.tasks.context import TaskContext
from agentenv.tasks.step import STEPS, Step, StepError, Unhonoured
from agentenv.tasks.steps.verification import (
    VerifierParams,
    grading_error,
    prompt_record,
    prompt_records,
    threshold_field,
)

# -- rubrics_verifier -------------------------------------------------------------------

_JUDGE = "the judge is one OpenAI-compatible chat model (default_model)"


class RubricsParams(VerifierParams):
    """Fields of `rubrics_verifier` (the protocol's, plus `base_url`, `threshold` and
    `include_trajectory`, which the protocol spells `use_trajectory`)."""

    criteria: list[str | Criterion] = Field(min_length=1)
    prompt_id: str
    default_model: str | None = Field(
        default=None, description="The judge model; default: $AGENTENV_JUDGE_MODEL."
    )
    grading_policy_prompt: str | None = None
    base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("base_url", "default_model_api_base"),
        description="An OpenAI-compatible endpoint; default: $OPENAI_BASE_URL.",
    )
    include_trajectory: bool = Field(
        default=True,
        validation_alias=AliasChoices("include_trajectory", "use_trajectory"),
        description="Show the judge the tool calls.",
    )
    threshold: float = threshold_field()


@STEPS.add_builtin
class RubricsVerifier(Step):
    """Grade a prompt's outcome with an LLM judge against criteria (see `grading.rubric`).

    The API key comes from `$OPENAI_API_KEY`, never from the task document.
    """

    type_name = "rubrics_verifier"
    Params = RubricsParams
    is_verifier = True
    default_timeout = 300.0
    unhonoured = {
        "agent_name": Unhonoured("the judge sees the prompt's agent's calls already"),
        "trajectory_filter": Unhonoured("the judge sees every call of the prompt"),
        "max_thinking_tokens": Unhonoured(_JUDGE),
        "effort": Unhonoured(_JUDGE),
        "use_agent_judge": Unhonoured(_JUDGE, honoured=(False,)),
        "judge_a2a_agent_id": Unhonoured(_JUDGE, refuse=True),
        "judge_sandbox_type": Unhonoured(_JUDGE),
        "judge_timeout_seconds": Unhonoured("the step's timeout_seconds bounds the judge"),
        "output_format": Unhonoured(
            "verdicts are binary with a reason", honoured=("rubric_binary",)
        ),
        "context_facts_for_judge": Unhonoured("not shown to the judge yet"),
        "grade_up_to_turn": Unhonoured("the judge grades the whole prompt"),
        "run_context_for_judge": Unhonoured("not shown to the judge yet"),
        "judge_batch_size": Unhonoured("all criteria go to the judge at once"),
        "judge_batch_concurrency": Unhonoured("all criteria go to the judge at once"),
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: RubricsParams = self.params  # type: ignore[assignment]
        record = prompt_record(ctx, p.prompt_id)
        trajectory: list[TrajectoryRecord] | None = None
        if p.include_trajectory:
            trajectory = []
            for env_id in record.start_seq:
                trajectory += prompt_records(ctx.env(env_id), record)
        judge = RubricJudge(p.default_model, base_url=p.base_url)
        try:
            score = await judge.grade(
                record.response,
                p.criteria,
                prompt=record.prompt,
                policy=p.grading_policy_prompt,
                trajectory=trajectory,
                aggregator=p.score_aggregator or "all_pass",
                threshold=p.threshold,
            )
        except VerifierError as exc:
            raise grading_error("rubrics_verifier", exc) from None
        score.details["prompt_id"] = p.prompt_id
        return score


# -- aggregate_verifiers ----------------------------------------------------------------


class AggregateParams(VerifierParams):
    """Fields of `aggregate_verifiers`: the protocol's `verifier_ids` (their result rows
    pooled, then `score_aggregator`, default weighted_average), or our
    `verifier_step_ids` (their scores combined by `aggregator`, default all_pass)."""

    verifier_ids: list[str] | None = Field(
        default=None, description="The protocol's: verifiers by verifier_id (or step id)."
    )
    verifier_step_ids: list[str] | None = Field(
        default=None, description="Ours; with neither list: every verifier step before this."
    )
    aggregator: Aggregator | None = Field(
        default=None, description="Ours: how scores combine (alias of score_aggregator)."
    )
    weights: dict[str, float] = Field(default_factory=dict)
    threshold: float = threshold_field()

    @model_validator(mode="before")
    @classmethod
    def _normalise_ours(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("aggregator"), str):
            data = {**data, "aggregator": data["aggregator"].strip().lower().replace("-", "_")}
        return data

    @model_validator(mode="after")
    def _one_list(self) -> AggregateParams:
        if self.verifier_ids is not None and self.verifier_step_ids is not None:
            raise ValueError("give 'verifier_ids' or 'verifier_step_ids', not both")
        if self.verifier_ids is not None and self.aggregator is not None:
            raise ValueError("with 'verifier_ids', say how with 'score_aggregator'")
        if self.verifier_ids is not None and not self.verifier_ids:
            raise ValueError("'verifier_ids' is empty")
        return self


def _is_verifier(step_type: str) -> bool:
    try:
        return bool(STEPS.get(step_type).is_verifier)
    except RegistryError:
        return False


def verifier_ids(task: TaskSpec) -> dict[str, str]:
    """Every verifier step of a task by its verifier id (`verifier_id`, else its step
    id; a step is also found by its step id)."""
    out: dict[str, str] = {}
    for step in task.steps:
        if _is_verifier(step.type):
            out.setdefault(step.id, step.id)
            named = step.params.get("verifier_id")
            if isinstance(named, str) and named:
                out[named] = step.id
    return out


@STEPS.add_builtin
class AggregateVerifiers(Step):
    """Combine earlier verifiers into one score; the task's score is its last
    `aggregate_verifiers`. A listed verifier with no score (it failed, or was skipped)
    counts as 0 (one failed row, with `verifier_ids`)."""

    type_name = AGGREGATE_STEP
    Params = AggregateParams
    is_verifier = True

    def static_problems(self, task: TaskSpec) -> list[tuple[tuple[Any, ...], str]]:
        """Every listed verifier must be an earlier verifier step of the task."""
        p: AggregateParams = self.params  # type: ignore[assignment]
        if p.verifier_ids is None:
            return []
        known = verifier_ids(task)
        order = [s.id for s in task.steps]
        mine = order.index(self.id)
        out: list[tuple[tuple[Any, ...], str]] = []
        for i, vid in enumerate(p.verifier_ids):
            step_id = known.get(vid)
            if step_id is None:
                names = ", ".join(k for k, v in known.items() if order.index(v) < mine)
                out.append((("verifier_ids", i), f"no verifier {vid!r} (verifiers: {names})"))
            elif order.index(step_id) >= mine:
                out.append((("verifier_ids", i), f"{vid!r} does not come before this step"))
            elif step_id == self.id:
                out.append((("verifier_ids", i), "a verifier cannot aggregate itself"))
        return out

    async def run(self, ctx: TaskContext) -> Any:
        p: AggregateParams = self.params  # type: ignore[assignment]
        if p.verifier_ids is not None:
            return self._pool_rows(ctx, p)
        order = [s.id for s in ctx.task.steps]
        types = {s.id: s.type for s in ctx.task.steps}
        mine = order.index(self.id)
        earlier = order[:mine]
        verifiers = [
            sid for sid in earlier if _is_verifier(types[sid]) and types[sid] != AGGREGATE_STEP
        ]
        if p.verifier_step_ids is None:
            ids = verifiers
            if not ids:
                raise StepError("no verifier step comes before this one")
        else:
            ids = list(dict.fromkeys(p.verifier_step_ids))
            for sid in ids:
                if sid not in types:
                    raise StepError(
                        f"verifier_step_ids: no step {sid!r} (verifier steps before this one: "
                        f"{', '.join(verifiers) or 'none'})"
                    )
                if sid not in earlier:
                    raise StepError(f"verifier_step_ids: {sid!r} does not come before this step")
                if not _is_verifier(types[sid]):
                    raise StepError(
                        f"verifier_step_ids: {sid!r} is a {types[sid]} step, not a verifier"
                    )
        unknown = sorted(set(p.weights) - set(ids))
        if unknown:
            raise StepError(f"weights: {', '.join(unknown)} not among {', '.join(ids)}")
        scores: dict[str, Score] = {}
        missing = []
        for sid in ids:
            found = ctx.scores.get(sid)
            if found is None:
                missing.append(sid)
                found = Score(score=0.0, passed=False, details={"error": "no score"})
            scores[sid] = found
        how = p.aggregator or p.score_aggregator or "all_pass"
        score = aggregate(scores, how, weights=p.weights, threshold=p.threshold)
        score.details["results"] = [
            {"id": sid, "result": s.passed, "score": s.score, "weight": p.weights.get(sid, 1.0)}
            for sid, s in scores.items()
        ]
        if missing:
            score.details["missing"] = missing
            score.details["note"] = "a verifier with no score (failed or skipped) counts as 0"
        return score

    def _pool_rows(self, ctx: TaskContext, p: AggregateParams) -> Score:
        known = verifier_ids(ctx.task)
        rows: list[dict[str, Any]] = []
        missing = []
        for vid in p.verifier_ids or []:
            step_id = known.get(vid)
            found = ctx.scores.get(step_id) if step_id is not None else None
            if found is None:
                missing.append(vid)
                rows.append({"id": vid, "result": False, "score": 0.0, "error": "no score"})
                continue
            rows += [dict(r) for r in found.details.get("results") or []]
        how = p.score_aggregator or "weighted_average"
        value = aggregate_rows(rows, how)
        details: dict[str, Any] = {
            "score_aggregator": how,
            "source_verifier_ids": list(p.verifier_ids or []),
            "results": rows,
            "threshold": p.threshold,
        }
        if missing:
            details["missing"] = missing
        return Score(score=value, passed=value >= p.threshold, details=details)
