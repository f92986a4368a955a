"""Tasks: DAGs of typed steps, the step registry, and the runner."""

from agentenv.tasks import steps as _builtin_steps  # registers the built-in step types
from agentenv.tasks.context import (
    DeployedAgent,
    DeployedAgentRequest,
    DeployedEnv,
    PromptRecord,
    TaskContext,
)
from agentenv.tasks.runner import (
    StepRecord,
    TaskError,
    TaskResult,
    TaskRunner,
    build_steps,
    run_task,
)
from agentenv.tasks.step import STEPS, NoParams, Score, Step, StepError

del _builtin_steps

__all__ = [
    "STEPS",
    "DeployedAgent",
    "DeployedAgentRequest",
    "DeployedEnv",
    "NoParams",
    "PromptRecord",
    "Score",
    "Step",
    "StepError",
    "StepRecord",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskRunner",
    "build_steps",
    "run_task",
]
