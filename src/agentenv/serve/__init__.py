"""Transports over the gateway: REST (/step, card, control), JSON-RPC data plane, MCP and
the WebSocket session transport (/ws)."""

from agentenv.serve.card import build_card
from agentenv.serve.rest import CARD_PATH, create_app
from agentenv.serve.server import make_server
from agentenv.serve.ws_client import WebSocketError, WebSocketSession

__all__ = [
    "CARD_PATH",
    "WebSocketError",
    "WebSocketSession",
    "build_card",
    "create_app",
    "make_server",
]
