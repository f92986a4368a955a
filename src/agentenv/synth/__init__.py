"""Environment and task synthesis: procedural tool checks, the tool dependency graph,
verified task generation with difficulty knobs, and environments from SQLite databases."""

from agentenv.synth.check import (
    CheckCall,
    CheckError,
    CheckReport,
    CheckSummary,
    ToolReport,
    Violation,
    check_environment,
    check_environment_async,
)
from agentenv.synth.dataset import SynthError, write_bundle
from agentenv.synth.graph import Edge, ToolGraph, build_graph, build_graph_sync
from agentenv.synth.knobs import KnobError, Knobs
from agentenv.synth.sqlite import SqliteReport, TableReport, env_from_sqlite
from agentenv.synth.tasks import SynthConfig, SynthResult, SynthTask, TaskSynthesizer

__all__ = [
    "CheckCall",
    "CheckError",
    "CheckReport",
    "CheckSummary",
    "Edge",
    "KnobError",
    "Knobs",
    "SqliteReport",
    "SynthConfig",
    "SynthError",
    "SynthResult",
    "SynthTask",
    "TableReport",
    "TaskSynthesizer",
    "ToolGraph",
    "ToolReport",
    "Violation",
    "build_graph",
    "build_graph_sync",
    "check_environment",
    "check_environment_async",
    "env_from_sqlite",
    "write_bundle",
]
