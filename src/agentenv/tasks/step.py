"""The Step base class and the registry of step types.

To write a step type: subclass `Step`, set `type_name`, declare the type's own fields as
a pydantic model in `Params` (unknown fields are rejected), and implement `run`, which
returns the step's output (JSON data) or raises `StepError` with a clear message.
Verifier steps set `is_verifier = True` and return a `Score`. Register it with
`@STEPS.add_builtin` (ours) or ship it as a plugin through the `agentenv.steps` entry
point group or the `plugins.steps` list of an `agentenv.toml`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from agentenv.grading.score import Score
from agentenv.registry import Registry
from agentenv.spec.task import StepSpec, TaskSpec

if TYPE_CHECKING:
    from agentenv.tasks.context import TaskContext


class StepError(Exception):
    """A step that cannot do its job; the message says why."""


@dataclass(frozen=True)
class Unhonoured:
    """A field the protocol gives a step type that this runner does not act on.

    Such a field never fails the schema: it is taken off before the type's `Params` are
    checked, then either reported once as ignored (a warning in the run's result), or,
    with `refuse`, makes the task fail validation with `reason`. `honoured` lists the
    values that need no report (e.g. `sandbox_type: local`, which is what we do anyway).
    """

    reason: str
    refuse: bool = False
    honoured: tuple[Any, ...] = ()


class NoParams(BaseModel):
    """For step types with no fields of their own."""

    model_config = ConfigDict(extra="forbid")


class Step(ABC):
    """One typed step of a task. Instances are built per run from a StepSpec."""

    type_name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams
    is_verifier: ClassVar[bool] = False
    default_timeout: ClassVar[float | None] = None
    fail_task_on_error_default: ClassVar[bool] = True
    unhonoured: ClassVar[dict[str, Unhonoured]] = {}
    shell_fields: ClassVar[frozenset[str]] = frozenset()
    """Fields that are shell commands: their `<key>` placeholders get the seed's values
    shell-quoted, so a value cannot add commands of its own."""

    def __init__(self, spec: StepSpec, params: BaseModel) -> None:
        self.spec = spec
        self.params = params
        self.ignored: list[str] = []

    @property
    def fails_task(self) -> bool:
        """Whether this step failing stops the task (`fail_task_on_error`, else the
        type's default)."""
        if self.spec.fail_task_on_error is None:
            return self.fail_task_on_error_default
        return self.spec.fail_task_on_error

    @property
    def id(self) -> str:
        """The step's id in its task."""
        return self.spec.id

    def static_problems(self, task: TaskSpec) -> list[tuple[tuple[Any, ...], str]]:
        """What is wrong with this step in its task that can be seen before running it
        (e.g. a reference to a verifier the task lacks), as (location in the step,
        message) pairs. Default: nothing."""
        return []

    @abstractmethod
    async def run(self, ctx: TaskContext) -> Any:
        """Do the step's work; return JSON-able output (a Score for verifiers)."""


__all__ = ["STEPS", "NoParams", "Score", "Step", "StepError", "Unhonoured"]

STEPS: Registry[type[Step]] = Registry(
    kind="step type",
    group="agentenv.steps",
    config_key="steps",
    name_of=lambda cls: cls.type_name,
)
