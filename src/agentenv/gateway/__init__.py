"""The Gateway: the one door to every tool call; clock, triggers, RBAC, trajectory."""

from agentenv.gateway.access import AccessControl
from agentenv.gateway.auth import ADMIN_ROLE, Authenticator, AuthError, is_loopback, parse_tokens
from agentenv.gateway.client import Binding, ToolClient
from agentenv.gateway.clock import GET_TIME, ClockState, VirtualClock
from agentenv.gateway.control import ControlPlane, GatewayStatus
from agentenv.gateway.errors import (
    DEFAULT_INSTANCE,
    ClockError,
    DataError,
    Forbidden,
    GatewayError,
    UnknownInstance,
)
from agentenv.gateway.gateway import Gateway
from agentenv.gateway.instance import Instance
from agentenv.gateway.results import CallResult
from agentenv.gateway.trajectory import Trajectory, TrajectoryRecord
from agentenv.gateway.trigger_state import LogEntry, TriggerInfo, TriggersState
from agentenv.gateway.triggers import TriggerEngine

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
    "ControlPlane",
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
