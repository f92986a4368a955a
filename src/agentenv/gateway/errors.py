"""Errors of the gateway's control plane (a bad tool call is a result, never an error)."""

from __future__ import annotations

import re

DEFAULT_INSTANCE = "default"

INSTANCE_ID_RULE = "1 to 128 characters of A-Z a-z 0-9 . _ -, starting with a letter or a digit"
"""What an instance id may be: a safe URL path segment and file name on every system
(no `/`, no `.` or `..`, no hidden or option-like names)."""

_INSTANCE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class GatewayError(Exception):
    """A control-plane request that cannot be done; nothing was changed."""

    status = 400


class UnknownInstance(GatewayError, KeyError):
    """No instance with that id."""

    status = 404

    def __str__(self) -> str:
        return str(self.args[0])


class Forbidden(GatewayError):
    """The principal may not use the control plane."""

    status = 403


class ClockError(GatewayError):
    """A clock request that cannot be done (e.g. reading an unarmed clock)."""


class DataError(GatewayError):
    """A data-plane request that cannot be applied."""


def check_instance_id(instance_id: object) -> str:
    """`instance_id` if it follows INSTANCE_ID_RULE; else GatewayError (a 400) saying so."""
    if isinstance(instance_id, str) and _INSTANCE_ID.fullmatch(instance_id):
        return instance_id
    shown = (
        ascii(instance_id)
        if len(str(instance_id)) <= 140
        else ascii(str(instance_id)[:140]) + "..."
    )
    raise GatewayError(f"instance id {shown} is not allowed: an id is {INSTANCE_ID_RULE}")


class ToolRaised(Exception):
    """Carries what a tool's code raised that is not an `Exception` (KeyboardInterrupt,
    SystemExit, GeneratorExit, CancelledError) out of a worker thread or task, where
    letting it go would stop the thread's caller or the event loop; the call fails with a
    tool error naming it."""

    def __init__(self, raised: BaseException) -> None:
        super().__init__(raised)
        self.raised = raised
