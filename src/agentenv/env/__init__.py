"""Environment runtime: seeded state plus tools (function-, document- and class-backed)."""

from agentenv.env.classenv import ClassBinding
from agentenv.env.environment import Environment, load_environment
from agentenv.env.tool import (
    SYSTEM,
    ArgumentsInvalid,
    Principal,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    ToolOptions,
    tool,
    tool_options,
)

__all__ = [
    "SYSTEM",
    "ArgumentsInvalid",
    "ClassBinding",
    "Environment",
    "Principal",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolOptions",
    "load_environment",
    "tool",
    "tool_options",
]
