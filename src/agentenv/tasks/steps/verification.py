"""Verifier steps: env_outcome_verifier, agent_prompt_response_verifier (rubrics_verifier
and aggregate_verifiers are in `judging`).

Each returns a `Score` (the runner records it under the step id, with its `verifier_id`
and result rows: see `grading.aggregate.finish_verifier`). They are thin: the grading
lives in `agentenv.grading`, usable from Python without a task. A verifier finds what a
prompt did by its `prompt_id`: the trajectory slice between the prompt's start and end,
the environments' states when it started, and its response.

Every verifier takes the protocol's `verifier_id` (default: the step id) and
`score_aggregator` (`all_pass`, `any_pass`, `weighted_average`, or ours). With the
protocol's own fields (`file_artifact_id`, `criteria`) the protocol's default,
`all_pass`, applies; with ours (`checks`, ...) the score is the share that passed.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentenv.env.tool import Principal
from agentenv.gateway.trajectory import TrajectoryRecord
from agentenv.grading.aggregate import Aggregator, aggregate_rows, aggregator_name
from agentenv.grading.checklist import VerifierError
from agentenv.grading.gold_replay import ReplayEnv, gold_replay_envs
from agentenv.grading.response_checks import ResponseCheck, check_response
from agentenv.grading.response_criteria import ResponseCriterion, criteria_rows
from agentenv.grading.score import Score
from agentenv.grading.state_checks import StateCheck, check_state
from agentenv.grading.trajectory_checks import TrajectoryCheck, check_trajectory, records_between
from agentenv.tasks.context import DeployedEnv, PromptRecord, TaskContext
from agentenv.tasks.step import STEPS, Step, StepError, Unhonoured
from agentenv.tasks.verify_script import find_script, run_script

PROMPT_STEP = "prompt_agent"


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class VerifierParams(_Params):
    """The fields every verifier has (the protocol's)."""

    verifier_id: str | None = Field(
        default=None, description="The id aggregate_verifiers names it by; default: step id."
    )
    score_aggregator: Aggregator | None = Field(
        default=None,
        description="How its result rows make its score: all_pass, any_pass, "
        "weighted_average (the protocol's), mean, weighted, min (ours).",
    )

    @model_validator(mode="before")
    @classmethod
    def _normalise(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("score_aggregator"), str):
            data = {**data, "score_aggregator": aggregator_name(data["score_aggregator"])}
        return data


def threshold_field() -> Any:
    """The `threshold` field every verifier has: passed when the score reaches it."""
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


def grading_error(what: str, exc: VerifierError) -> StepError:
    """A grading error as the step's failure, saying what was graded."""
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


class EnvOutcomeParams(VerifierParams):
    """Fields of `env_outcome_verifier`: the protocol's verifier script
    (`file_artifact_id`), and ours: a state checklist, a gold replay and trajectory
    checks. With one part, its score is the step's; with several, their mean."""

    env_id: str | None = Field(default=None, description="Default: the only deployed env.")
    file_artifact_id: str | None = Field(
        default=None,
        description="An artifact whose verify.py has `async def verify(mcp_url)`, run "
        "against the env's MCP endpoint (see `tasks.verify_script`).",
    )
    prompt_id: str | None = Field(
        default=None, description="The protocol's: the prompt graded (kept in the details)."
    )
    checks: list[StateCheck] = Field(default_factory=list)
    gold_replay: GoldReplayParams | None = None
    trajectory: TrajectoryParams | None = None
    threshold: float = threshold_field()

    @model_validator(mode="after")
    def _something(self) -> EnvOutcomeParams:
        parts = (self.file_artifact_id, self.gold_replay, self.trajectory)
        if not self.checks and all(p is None for p in parts):
            raise ValueError(
                "give 'file_artifact_id', 'checks', 'gold_replay' or 'trajectory' (or several)"
            )
        return self


@STEPS.add_builtin
class EnvOutcomeVerifier(Step):
    """Grade an environment's final state: declarative checks (partial credit), a replay
    of the reference solution compared by state hash, and checks of the agent's calls."""

    type_name = "env_outcome_verifier"
    Params = EnvOutcomeParams
    is_verifier = True
    default_timeout = 300.0  # a verifier script that hangs must not hold the run forever
    unhonoured = {
        "file_artifact_version": Unhonoured(
            "artifacts are not versioned here; the bundle's current file runs"
        ),
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: EnvOutcomeParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        parts: dict[str, Score] = {}
        rows: list[dict[str, Any]] | None = None
        if p.file_artifact_id is not None:
            script = find_script(ctx, p.file_artifact_id)
            rows = await run_script(ctx, deployed, script)
            how = p.score_aggregator or "all_pass"
            value = aggregate_rows(rows, how)
            parts["script"] = Score(
                score=value,
                passed=value >= p.threshold,
                details={"script": str(script), "score_aggregator": how, "results": rows},
            )
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
            raise grading_error(f"env {deployed.env_id!r}", exc) from None
        value = sum(s.score for s in parts.values()) / len(parts)
        details: dict[str, Any] = {
            "env_id": deployed.env_id,
            "threshold": p.threshold,
            "parts": {name: s.model_dump(mode="json") for name, s in parts.items()},
        }
        if p.prompt_id is not None:
            details["prompt_id"] = p.prompt_id
        if len(parts) == 1:  # one part: its rows are the verifier's
            only = next(iter(parts.values()))
            for key in ("results", "checks"):
                if key in only.details:
                    details[key] = only.details[key]
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


class ResponseParams(VerifierParams):
    """Fields of `agent_prompt_response_verifier`: the protocol's `criteria`, or our
    `checks` (exactly one)."""

    prompt_id: str
    criteria: list[ResponseCriterion] | None = Field(
        default=None, description="The protocol's: response_contains, response_regex_present."
    )
    checks: list[ResponseCheck] | None = Field(
        default=None, description="Ours: contains, not_contains, regex, json_field."
    )
    threshold: float = threshold_field()

    @model_validator(mode="after")
    def _one_list(self) -> ResponseParams:
        if (self.criteria is None) == (self.checks is None):
            raise ValueError("give exactly one of 'criteria' or 'checks'")
        if not (self.criteria or self.checks):
            raise ValueError("give at least 1 criterion (or check)")
        return self


@STEPS.add_builtin
class AgentPromptResponseVerifier(Step):
    """Check an agent's final answer to a prompt: the protocol's criteria
    (response_contains, response_regex_present), or our checks (contains, not_contains,
    regex, JSON field; partial credit)."""

    type_name = "agent_prompt_response_verifier"
    Params = ResponseParams
    is_verifier = True

    async def run(self, ctx: TaskContext) -> Any:
        p: ResponseParams = self.params  # type: ignore[assignment]
        record = prompt_record(ctx, p.prompt_id)
        if p.criteria is not None:
            rows = criteria_rows(record.response, p.criteria)
            how = p.score_aggregator or "all_pass"
            value = aggregate_rows(rows, how)
            score = Score(
                score=value,
                passed=value >= p.threshold,
                details={"kind": "response_criteria", "score_aggregator": how, "results": rows},
            )
        else:
            try:
                score = check_response(record.response, p.checks or [], threshold=p.threshold)
            except VerifierError as exc:
                raise grading_error(f"prompt {p.prompt_id!r}", exc) from None
        score.details["prompt_id"] = p.prompt_id
        if record.error is not None:
            score.details["prompt_error"] = record.error
        return score
