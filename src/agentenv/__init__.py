"""agentenv: declare, serve, run and synthesize environments for LLM agents."""

from agentenv.env import (
    SYSTEM,
    Environment,
    Principal,
    Tool,
    ToolContext,
    ToolError,
    load_environment,
    tool,
)
from agentenv.episodes import (
    EnvironmentCache,
    Episode,
    EpisodeRecord,
    EpisodeSpec,
    Task,
    Turn,
    TurnTools,
)
from agentenv.gateway import CallResult, Gateway
from agentenv.spec import DocumentError, EnvironmentSpec, load_environment_spec
from agentenv.state import Snapshot, State, StateDiff, diff

__version__ = "0.1.0"

__all__ = [
    "SYSTEM",
    "CallResult",
    "DocumentError",
    "Environment",
    "EnvironmentCache",
    "EnvironmentSpec",
    "Episode",
    "EpisodeRecord",
    "EpisodeSpec",
    "Gateway",
    "Principal",
    "Snapshot",
    "State",
    "StateDiff",
    "Task",
    "Tool",
    "ToolContext",
    "ToolError",
    "Turn",
    "TurnTools",
    "__version__",
    "diff",
    "load_environment",
    "load_environment_spec",
    "tool",
]
