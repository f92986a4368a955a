"""Rollouts: many episodes of a plan (tasks x agents x seeds x repeats) on this machine or
a Ray cluster (or every core of this machine: ProcessRunner), into a resumable run folder; exporters for training; metrics.

    plan = RolloutPlan.build(["examples/bundles/support-desk"], ["oracle"], repeats=8)
    summary = LocalRunner(plan, "runs/r1", concurrency=256).run_sync()
    metrics = compute_metrics(RolloutStore("runs/r1").records())
    export_run("runs/r1", "sft-chat", Path("sft.jsonl"))
"""

from agentenv.rollout.episode import EnvironmentCache, run_episode, run_episodes
from agentenv.rollout.exporters import (
    EXPORTERS,
    Exporter,
    ExportError,
    ExportFilter,
    export_run,
    get_exporter,
)
from agentenv.rollout.local import LocalRunner, RolloutSummary
from agentenv.rollout.metrics import (
    RunMetrics,
    SliceMetrics,
    compute_metrics,
    pass_at_k,
    pass_hat_k,
)
from agentenv.rollout.plan import (
    PlanAgent,
    PlanError,
    PlannedEpisode,
    RolloutPlan,
    episode_id,
    resolve_targets,
)
from agentenv.rollout.processes import ProcessRunner, WorkerStartError
from agentenv.rollout.progress import Progress, RichProgress
from agentenv.rollout.ray_runner import RayRunner, RayUnavailable
from agentenv.rollout.store import (
    CorruptRecordWarning,
    EpisodeRecord,
    PromptEntry,
    RolloutStore,
    StoreError,
    StoreLocked,
)
from agentenv.rollout.trials import run_trials

__all__ = [
    "EXPORTERS",
    "CorruptRecordWarning",
    "EnvironmentCache",
    "EpisodeRecord",
    "ExportError",
    "ExportFilter",
    "Exporter",
    "LocalRunner",
    "PlanAgent",
    "PlanError",
    "PlannedEpisode",
    "ProcessRunner",
    "Progress",
    "PromptEntry",
    "RayRunner",
    "RayUnavailable",
    "RichProgress",
    "RolloutPlan",
    "RolloutStore",
    "RolloutSummary",
    "RunMetrics",
    "SliceMetrics",
    "StoreError",
    "StoreLocked",
    "WorkerStartError",
    "compute_metrics",
    "episode_id",
    "export_run",
    "get_exporter",
    "pass_at_k",
    "pass_hat_k",
    "resolve_targets",
    "run_episode",
    "run_episodes",
    "run_trials",
]
