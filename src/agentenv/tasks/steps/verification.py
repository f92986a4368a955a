"""Verifier steps: env_outcome_verifier, agent_prompt_response_verifier, rubrics_verifier,
aggregate_verifiers.

Each returns a `Score` (the runner records it under the step id). They are thin: the
grading lives in `agentenv.grading`, usable from Python without a task. A verifier
finds what a prompt did by its `prompt_id`: the trajectory slice between the prompt's
start and end, the environments' states when it started, and its response.
"""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from agentenv.env.tool import Principal
from agentenv.gateway.trajectory import TrajectoryRecord
from agentenv.grading.aggregate import AGGREGATE_STEP, Aggregator, aggregate
from agentenv.grading.checklist import VerifierError
from agentenv.grading.gold_replay import ReplayEnv, gold_replay_envs
from agentenv.grading.response_checks import ResponseCheck, check_response
from agentenv.grading.rubric import Criterion, RubricJudge
from agentenv.grading.score import Score
from agentenv.grading.state_checks import StateCheck, check_state
from agentenv.grading.trajectory_checks import TrajectoryCheck, check_trajectory, records_between
from agentenv.registry import RegistryError
from agentenv.tasks.context import DeployedEnv, PromptRecord, TaskContext
from agentenv.tasks.step import STEPS, Step, StepError

PROMPT_STEP = "prompt_agent"


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _threshold() -> Any:
    return Field(default=1.0, ge=0, le=1, description="Passed when the score reaches this.")


# -- finding what a prompt did ----------------------------------------------------------


def planned_prompt_ids(ctx: TaskContext) -> list[str]:
    """The prompt ids the task's `prompt_agent` steps will use."""
    out = []
    for step in ctx.task.steps:
        if step.type == PROMPT_STEP:
            out.append(str(step.params.get("prompt_id") or step.id))
    return out


def prompt_record(ctx: TaskContext, prompt_id: str) -> PromptRecord:
    """The record of a prompt; StepError naming the known ones when it was never sent."""
    found = ctx.prompts.get(prompt_id)
    if found is not None:
        return found
    sent = ", ".join(ctx.prompts) or "none yet"
    if prompt_id in planned_prompt_ids(ctx):
        raise StepError(
            f"prompt_id {prompt_id!r} has not been prompted yet (prompted: {sent}); make this "
            "step depend on the prompt_agent step that sends it"
        )
    planned = ", ".join(planned_prompt_ids(ctx)) or "none"
    raise StepError(
        f"no prompt_agent step sends prompt_id {prompt_id!r} (prompted: {sent}; "
        f"the task's prompt ids: {planned})"
    )


def prompt_records(deployed: DeployedEnv, record: PromptRecord) -> list[TrajectoryRecord]:
    """The trajectory records of one environment made during a prompt (its agent's calls,
    and triggers that fired meanwhile)."""
    env_id = deployed.env_id
    if env_id not in record.start_seq:
        raise StepError(
            f"prompt {record.prompt_id!r} did not use environment {env_id!r} "
            f"(its environments: {', '.join(record.start_seq) or 'none'})"
        )
    trajectory = deployed.gateway.instance(deployed.instance).trajectory
    start, end = record.start_seq[env_id], record.end_seq.get(env_id)
    during = trajectory.since(start)
    if end is not None:
        during = during[: max(end - start, 0)]
    return records_between(during, session=record.prompt_id)


def _grading(what: str, exc: VerifierError) -> StepError:
    return StepError(f"{what}: {exc}")


# -- env_outcome_verifier ---------------------------------------------------------------


class GoldReplayParams(_Params):
    """Replay the task's reference solution for a prompt and compare final states."""

    prompt_id: str
    role: str | None = Field(default=None, description="Default: the prompted agent's role.")


class TrajectoryParams(_Params):
    """Checks over the calls a prompt's agent made."""

    prompt_id: str
    checks: list[TrajectoryCheck] = Field(min_length=1)


class EnvOutcomeParams(_Params):
    """Fields of `env_outcome_verifier`: any of a state checklist, a gold replay and
    trajectory checks; the score is the mean of the parts given."""

    env_id: str | None = Field(default=None, description="Default: the only deployed env.")
    checks: list[StateCheck] = Field(default_factory=list)
    gold_replay: GoldReplayParams | None = None
    trajectory: TrajectoryParams | None = None
    threshold: float = _threshold()

    @model_validator(mode="after")
    def _something(self) -> EnvOutcomeParams:
        if not self.checks and self.gold_replay is None and self.trajectory is None:
            raise ValueError("give 'checks', 'gold_replay' or 'trajectory' (or several)")
        return self


@STEPS.add_builtin
class EnvOutcomeVerifier(Step):
    """Grade an environment's final state: declarative checks (partial credit), a replay
    of the reference solution compared by state hash, and checks of the agent's calls."""

    type_name = "env_outcome_verifier"
    Params = EnvOutcomeParams
    is_verifier = True

    async def run(self, ctx: TaskContext) -> Any:
        p: EnvOutcomeParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        parts: dict[str, Score] = {}
        try:
            if p.checks:
                parts["state"] = check_state(deployed.state, p.checks)
            if p.gold_replay is not None:
                parts["gold_replay"] = await self._gold_replay(ctx, deployed, p.gold_replay)
            if p.trajectory is not None:
                record = prompt_record(ctx, p.trajectory.prompt_id)
                records = prompt_records(deployed, record)
                parts["trajectory"] = check_trajectory(records, p.trajectory.checks)
        except VerifierError as exc:
            raise _grading(f"env {deployed.env_id!r}", exc) from None
        value = sum(s.score for s in parts.values()) / len(parts)
        details: dict[str, Any] = {
            "env_id": deployed.env_id,
            "threshold": p.threshold,
            "parts": {name: s.model_dump(mode="json") for name, s in parts.items()},
        }
        if "gold_replay" in parts and "diff" in parts["gold_replay"].details:
            details["diff"] = parts["gold_replay"].details["diff"]
        return Score(score=value, passed=value >= p.threshold, details=details)

    async def _gold_replay(
        self, ctx: TaskContext, deployed: DeployedEnv, p: GoldReplayParams
    ) -> Score:
        record = prompt_record(ctx, p.prompt_id)
        solution = ctx.task.solution.get(p.prompt_id)
        if solution is None:
            known = ", ".join(ctx.task.solution) or "none"
            raise StepError(
                f"gold_replay: the task has no reference solution for prompt {p.prompt_id!r} "
                f"(solutions for: {known}); add it under `solution:`"
            )
        if deployed.env_id not in record.initial:
            raise StepError(
                f"gold_replay: prompt {p.prompt_id!r} did not use environment "
                f"{deployed.env_id!r} (its environments: {', '.join(record.initial) or 'none'})"
            )
        agent = ctx.agents.get(record.agent_name)
        role = p.role or (agent.role if agent is not None else None)
        if role is None:
            raise StepError(f"gold_replay: agent {record.agent_name!r} is unknown; give 'role'")
        envs = {}
        for env_id, snapshot in record.initial.items():
            env = ctx.env(env_id)
            clock = env.gateway.instance(env.instance).clock
            at = None
            if clock.armed:
                started = [r for r in prompt_records(env, record) if r.virtual_time is not None]
                at = started[0].virtual_time if started else clock.now()
            envs[env_id] = ReplayEnv(
                gateway=env.gateway,
                initial=snapshot,
                # The state as the prompt left it (later prompts must not count).
                actual=(record.final.get(env_id) or env.snapshot())
                if env_id == deployed.env_id
                else None,
                clock_at=at,
                clock_mode=clock.mode if at is not None else None,
                clock_rate=clock.rate if at is not None else None,
            )
        score = await gold_replay_envs(
            envs,
            solution.calls,
            principal=Principal(role=role, name=record.agent_name),
            compare=[deployed.env_id],
        )
        score.details["prompt_id"] = p.prompt_id
        score.details["role"] = role
        return score


# -- agent_prompt_response_verifier -----------------------------------------------------


class ResponseParams(_Params):
    """Fields of `agent_prompt_response_verifier`."""

    prompt_id: str
    checks: list[ResponseCheck] = Field(min_length=1)
    threshold: float = _threshold()


@STEPS.add_builtin
class AgentPromptResponseVerifier(Step):
    """Check an agent's final answer to a prompt: contains, not_contains, regex, JSON
    field (partial credit)."""

    type_name = "agent_prompt_response_verifier"
    Params = ResponseParams
    is_verifier = True

    async def run(self, ctx: TaskContext) -> Any:
        p: ResponseParams = self.params  # type: ignore[assignment]
        record = prompt_record(ctx, p.prompt_id)
        try:
            score = check_response(record.response, p.checks, threshold=p.threshold)
        except VerifierError as exc:
            raise _grading(f"prompt {p.prompt_id!r}", exc) from None
        score.details["prompt_id"] = p.prompt_id
        if record.error is not None:
            score.details["prompt_error"] = record.error
        return score


# -- rubrics_verifier -------------------------------------------------------------------


def _aggregator_name(value: Any) -> Any:
    if isinstance(value, str):
        return value.strip().lower().replace("-", "_")
    return value


class RubricsParams(_Params):
    """Fields of `rubrics_verifier` (the protocol's, plus `base_url`, `threshold` and
    `include_trajectory`)."""

    criteria: list[str | Criterion] = Field(min_length=1)
    prompt_id: str
    score_aggregator: Aggregator = Field(
        default="all_pass", description="all_pass (default), mean, weighted (by weight), min."
    )
    default_model: str | None = Field(
        default=None, description="The judge model; default: $AGENTENV_JUDGE_MODEL."
    )
    grading_policy_prompt: str | None = None
    base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("base_url", "default_model_api_base"),
        description="An OpenAI-compatible endpoint; default: $OPENAI_BASE_URL.",
    )
    include_trajectory: bool = Field(default=True, description="Show the judge the tool calls.")
    threshold: float = _threshold()

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if isinstance(data, dict) and "score_aggregator" in data:
            data = {**data, "score_aggregator": _aggregator_name(data["score_aggregator"])}
        return data


@STEPS.add_builtin
class RubricsVerifier(Step):
    """Grade a prompt's outcome with an LLM judge against criteria (see `grading.rubric`).

    The API key comes from `$OPENAI_API_KEY`, never from the task document.
    """

    type_name = "rubrics_verifier"
    Params = RubricsParams
    is_verifier = True
    default_timeout = 300.0

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
                aggregator=p.score_aggregator,
                threshold=p.threshold,
            )
        except VerifierError as exc:
            raise _grading("rubrics_verifier", exc) from None
        score.details["prompt_id"] = p.prompt_id
        return score


# -- aggregate_verifiers ----------------------------------------------------------------


class AggregateParams(_Params):
    """Fields of `aggregate_verifiers`."""

    verifier_step_ids: list[str] | None = Field(
        default=None, description="Default: every verifier step before this one."
    )
    aggregator: Aggregator = "all_pass"
    weights: dict[str, float] = Field(default_factory=dict)
    threshold: float = _threshold()

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if isinstance(data, dict) and "aggregator" in data:
            data = {**data, "aggregator": _aggregator_name(data["aggregator"])}
        return data


def _is_verifier(step_type: str) -> bool:
    try:
        return bool(STEPS.get(step_type).is_verifier)
    except RegistryError:
        return False


@STEPS.add_builtin
class AggregateVerifiers(Step):
    """Combine earlier verifiers' scores into one; the task's score is its last
    `aggregate_verifiers`. A listed verifier with no score (it failed, or was skipped)
    counts as 0."""

    type_name = AGGREGATE_STEP
    Params = AggregateParams
    is_verifier = True

    async def run(self, ctx: TaskContext) -> Any:
        p: AggregateParams = self.params  # type: ignore[assignment]
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
        score = aggregate(scores, p.aggregator, weights=p.weights, threshold=p.threshold)
        if missing:
            score.details["missing"] = missing
            score.details["note"] = "a verifier with no score (failed or skipped) counts as 0"
        return score
