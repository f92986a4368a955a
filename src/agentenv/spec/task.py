"""Task documents: a DAG of typed steps, in the shapes of the AgentEnv protocol.

A task file is a JSON/YAML list of steps, or a document `{name, description, seed,
steps, solution}`. Every step has the protocol's base fields; the rest of a step's fields
belong to its type and are checked by that type's `Params` model when the task is
validated against a step registry (see `agentenv.tasks`).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

STEP_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
PLACEHOLDER = re.compile(r"<([A-Za-z_][A-Za-z0-9_]*)>")


class DependsOn(BaseModel):
    """One dependency: the id of a step that must finish first. Written either as the
    plain step id or as `{task_step_id: <id>}` (both are the protocol's)."""

    model_config = ConfigDict(extra="forbid")

    task_step_id: str

    @model_validator(mode="before")
    @classmethod
    def _plain_id(cls, data: Any) -> Any:
        return {"task_step_id": data} if isinstance(data, str) else data


class RetryConfig(BaseModel):
    """What to do when a step fails: retry from an earlier step (rolling back environment
    state to what it was before that step) or jump to a step, at most `max_retries` times."""

    model_config = ConfigDict(extra="forbid")

    retry_from_step_id: str | None = None
    go_to_step_id: str | None = None
    max_retries: int = Field(default=1, ge=0, le=100)

    @model_validator(mode="after")
    def _one_target(self) -> RetryConfig:
        if (self.retry_from_step_id is None) == (self.go_to_step_id is None):
            raise ValueError("give exactly one of 'retry_from_step_id' or 'go_to_step_id'")
        return self

    @property
    def target(self) -> str:
        """The step id to go back to."""
        return self.retry_from_step_id or self.go_to_step_id or ""


BASE_FIELDS = {
    "id",
    "type",
    "version",
    "description",
    "depends_on",
    "fail_task_on_error",
    "retry_config",
    "timeout_seconds",
}


class StepSpec(BaseModel):
    """One step: the protocol's base fields; everything else is the type's parameters."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(pattern=STEP_ID_PATTERN)
    type: str = Field(min_length=1)
    version: int | str | None = Field(
        default=None, description="The protocol's is an integer; a string is kept as it is."
    )
    description: str = ""
    depends_on: list[DependsOn] | None = Field(
        default=None, description="Absent means: after every earlier step."
    )
    fail_task_on_error: bool | None = Field(
        default=None,
        description="Unset: the step type's default (true, except reset_env's false).",
    )
    retry_config: RetryConfig | None = None
    timeout_seconds: float | None = Field(
        default=None, gt=0, description="Ours on every step; the protocol's on prompt_agent."
    )

    @field_validator("depends_on", mode="before")
    @classmethod
    def _a_list(cls, value: Any) -> Any:
        if isinstance(value, str | dict):
            raise ValueError(
                "depends_on is a list of step ids (or of {task_step_id} objects), "
                f"not a single {type(value).__name__}: write [{value!r}]"
            )
        return value

    @property
    def params(self) -> dict[str, Any]:
        """The type-specific fields."""
        return dict(self.model_extra or {})


class SolutionCall(BaseModel):
    """One tool call of a reference solution."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    args: dict[str, Any] = Field(default_factory=dict)
    env_id: str | None = Field(default=None, description="When the agent has several envs.")


class SolutionTurn(BaseModel):
    """The reference answer to one prompt: tool calls, then the final response."""

    model_config = ConfigDict(extra="forbid")

    calls: list[SolutionCall] = Field(default_factory=list)
    response: str = ""


class TaskSpec(BaseModel):
    """A task document.

    `seed` fills `<key>` placeholders in step fields. `solution` is the reference
    solution, per `prompt_id`, that the `oracle` agent replays and gold-replay verifiers
    compare against.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="task", pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")
    description: str = ""
    seed: dict[str, Any] = Field(default_factory=dict)
    steps: list[StepSpec] = Field(min_length=1)
    solution: dict[str, SolutionTurn] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _list_is_steps(cls, data: Any) -> Any:
        return {"steps": data} if isinstance(data, list) else data

    def dependencies(self) -> dict[str, list[str]]:
        """Each step's dependencies, with the protocol's default filled in."""
        out: dict[str, list[str]] = {}
        earlier: list[str] = []
        for step in self.steps:
            if step.depends_on is None:
                out[step.id] = list(earlier)
            else:
                out[step.id] = [d.task_step_id for d in step.depends_on]
            earlier.append(step.id)
        return out

    def structure_problems(self) -> list[tuple[tuple[Any, ...], str]]:
        """Duplicate ids, missing or forward dependencies, bad retry targets."""
        problems: list[tuple[tuple[Any, ...], str]] = []
        index: dict[str, int] = {}
        for i, step in enumerate(self.steps):
            if step.id in index:
                problems.append((("steps", i, "id"), f"a second step with id {step.id!r}"))
            index.setdefault(step.id, i)
        for i, step in enumerate(self.steps):
            for j, dep in enumerate(step.depends_on or []):
                target = dep.task_step_id
                where = ("steps", i, "depends_on", j, "task_step_id")
                if target not in index:
                    problems.append((where, f"no step {target!r}"))
                elif index[target] >= i:
                    problems.append(
                        (where, f"{target!r} is not an earlier step (forward reference or cycle)")
                    )
            if step.retry_config is not None:
                target = step.retry_config.target
                if target not in index or index[target] > i:
                    problems.append(
                        (
                            ("steps", i, "retry_config"),
                            f"retry target {target!r} is not this or an earlier step",
                        )
                    )
        return problems

    def placeholders(self) -> set[str]:
        """Every `<key>` used in step fields."""
        found: set[str] = set()

        def walk(value: Any) -> None:
            if isinstance(value, str):
                found.update(PLACEHOLDER.findall(value))
            elif isinstance(value, dict):
                for v in value.values():
                    walk(v)
            elif isinstance(value, list):
                for v in value:
                    walk(v)

        for step in self.steps:
            walk(step.params)
        return found


def fill_shell_placeholders(value: Any, seed: dict[str, Any]) -> Any:
    """`fill_placeholders` for shell commands (a string, or a list of them): each value is
    shell-quoted, so it stays one word whatever it holds."""
    import shlex

    if isinstance(value, list):
        return [fill_shell_placeholders(v, seed) for v in value]
    if not isinstance(value, str):
        return value
    return PLACEHOLDER.sub(
        lambda m: shlex.quote(str(seed[m.group(1)])) if m.group(1) in seed else m.group(0), value
    )


def fill_placeholders(value: Any, seed: dict[str, Any]) -> Any:
    """Replace `<key>` with seed values; a lone placeholder keeps the value's type."""
    if isinstance(value, str):
        whole = PLACEHOLDER.fullmatch(value)
        if whole and whole.group(1) in seed:
            return seed[whole.group(1)]
        return PLACEHOLDER.sub(lambda m: str(seed.get(m.group(1), m.group(0))), value)
    if isinstance(value, dict):
        return {k: fill_placeholders(v, seed) for k, v in value.items()}
    if isinstance(value, list):
        return [fill_placeholders(v, seed) for v in value]
    return value
