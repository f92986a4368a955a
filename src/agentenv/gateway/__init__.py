"""The Gateway: the one door to every tool call; clock, triggers, RBAC, trajectory."""

from agentenv.gateway.access import AccessControl
from agentenv.gateway.auth import ADMIN_ROLE, Authenticator, AuthError, is_loopback, parse_tokens
from agentenv.gateway.client import Binding, ToolClient
from agentenv.gateway.clock import ClockState, VirtualClock
from agentenv.gateway.gateway import (
    DEFAULT_INSTANCE,
    GET_TIME,
    ClockError,
    DataError,
    Forbidden,
    Gateway,
    GatewayError,
    GatewayStatus,
    UnknownInstance,
)
from agentenv.gateway.instance import Instance
from agentenv.gateway.results import CallResult
from agentenv.gateway.trajectory import Trajectory, TrajectoryRecord
from agentenv.gateway.triggers import LogEntry, TriggerEngine, TriggerInfo, TriggersState

__all__ = [
    "ADMIN_ROLE",
    "DEFAULT_INSTANCE",
    "GET_TIME",
    "AccessControl",
    "AuthError",
    "Authenticator",
    "Binding",
    "CallResult",
    "ClockError",
    "ClockState",
    "DataError",
    "Forbidden",
    "Gateway",
    "GatewayError",
    "GatewayStatus",
    "Instance",
    "LogEntry",
    "ToolClient",
    "Trajectory",
    "TrajectoryRecord",
    "TriggerEngine",
    "TriggerInfo",
    "TriggersState",
    "UnknownInstance",
    "VirtualClock",
    "is_loopback",
    "parse_tokens",
]
