"""Errors of the gateway's control plane (a bad tool call is a result, never an error)."""

from __future__ import annotations

DEFAULT_INSTANCE = "default"


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
