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
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from agentenv.grading.score import Score
from agentenv.registry import Registry
from agentenv.spec.task import StepSpec

if TYPE_CHECKING:
    from agentenv.tasks.context import TaskContext


class StepError(Exception):
    """A step that cannot do its job; the message says why."""


class NoParams(BaseModel):
    """For step types with no fields of their own."""

    model_config = ConfigDict(extra="forbid")


class Step(ABC):
    """One typed step of a task. Instances are built per run from a StepSpec."""

    type_name: ClassVar[str]
    Params: ClassVar[type[BaseModel]] = NoParams
    is_verifier: ClassVar[bool] = False
    default_timeout: ClassVar[float | None] = None

    def __init__(self, spec: StepSpec, params: BaseModel) -> None:
        self.spec = spec
        self.params = params

    @property
    def id(self) -> str:
        """The step's id in its task."""
        return self.spec.id

    @abstractmethod
    async def run(self, ctx: TaskContext) -> Any:
        """Do the step's work; return JSON-able output (a Score for verifiers)."""


__all__ = ["STEPS", "NoParams", "Score", "Step", "StepError"]

STEPS: Registry[type[Step]] = Registry(
    kind="step type",
    group="agentenv.steps",
    config_key="steps",
    name_of=lambda cls: cls.type_name,
)
