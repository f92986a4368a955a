"""Episodes: the pull-style SDK a trainer drives (EpisodeSpec, Episode, Turn, Task), and
what an episode leaves for training (its record, trajectory, chat messages, usage, final
state). See docs/sdk.md."""

from agentenv.episodes.episode import (
    DEFAULT_CACHE_TASKS,
    CacheChoice,
    Episode,
    EpisodeSpec,
    Turn,
    TurnTools,
    default_cache,
)
from agentenv.episodes.usage import UsageLike, usage_counters
from agentenv.rollout.episode import EnvironmentCache
from agentenv.rollout.store import EpisodeRecord
from agentenv.tasks.bundle import Task, TaskNotFound

__all__ = [
    "DEFAULT_CACHE_TASKS",
    "CacheChoice",
    "EnvironmentCache",
    "Episode",
    "EpisodeRecord",
    "EpisodeSpec",
    "Task",
    "TaskNotFound",
    "Turn",
    "TurnTools",
    "UsageLike",
    "default_cache",
    "usage_counters",
]
