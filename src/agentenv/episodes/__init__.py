"""Episodes: the pull-style SDK a trainer drives (EpisodeSpec, Episode, Turn, Task)."""

from agentenv.episodes.episode import Episode, EpisodeSpec, Task, TaskNotFound, Turn

__all__ = ["Episode", "EpisodeSpec", "Task", "TaskNotFound", "Turn"]
