"""Environment and task synthesis: procedural tool checks, and more to come."""

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

__all__ = [
    "CheckCall",
    "CheckError",
    "CheckReport",
    "CheckSummary",
    "ToolReport",
    "Violation",
    "check_environment",
    "check_environment_async",
]
