"""The WebSocket session transport: one connection per episode, one frame per call.

Not built yet (issue 12): `websocket_routes` serves no route until it is.
"""

from __future__ import annotations

from starlette.routing import BaseRoute

from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator


def websocket_routes(gateway: Gateway, auth: Authenticator) -> list[BaseRoute]:
    """The app's WebSocket routes (none yet)."""
    return []
