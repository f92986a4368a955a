"""Transports over the gateway: REST (/step, card, control), JSON-RPC data plane."""

from agentenv.serve.card import build_card
from agentenv.serve.rest import CARD_PATH, create_app
from agentenv.serve.server import make_server

__all__ = ["CARD_PATH", "build_card", "create_app", "make_server"]
