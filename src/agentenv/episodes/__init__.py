"""Episodes: the pull-style SDK a trainer drives (EpisodeSpec, Episode, Turn, Task)."""

from agentenv.episodes.episode import Episode, EpisodeSpec, Turn
from agentenv.tasks.bundle import Task, TaskNotFound

__all__ = ["Episode", "EpisodeSpec", "Task", "TaskNotFound", "Turn"]
