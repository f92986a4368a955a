"""The WebSocket handshake's cross-site and DNS-rebinding checks.

`serve._guard.RequestGuard` checks HTTP requests only: a WebSocket handshake is an ASGI
`websocket` scope, which it lets through untouched. A browser page may open a WebSocket to
any address without a CORS preflight, so in trusted local mode (the role taken at its
word) a page the user opens could drive the server over `/ws` exactly as it could over a
cross-site form. Browsers always send `Origin` on a WebSocket handshake, so the same two
header checks close that door:

- **Host** (loopback bind, trusted mode): a loopback name (`localhost`, `127.0.0.1`,
  `[::1]`, any port) or the address the connection reached; else 421.
- **Origin** (trusted mode): absent (not a browser) or a loopback origin; else 403.

The checks, verdicts and messages are RequestGuard's own (`_guard`'s `authority_name`,
`local_name`, `local_origin`, `host_refusal`, `origin_refusal`); a test
(`tests/serve/test_ws_handshake.py`) sends the same headers to both and checks that they
agree.
"""

from __future__ import annotations

from starlette.types import Scope

from agentenv.serve._guard import (
    authority_name,
    host_refusal,
    local_name,
    local_origin,
    origin_refusal,
)


class Refusal:
    """Why a handshake is refused: the HTTP status and the error fields of its answer."""

    __slots__ = ("hint", "kind", "message", "status")

    def __init__(self, status: int, kind: str, message: str, hint: str) -> None:
        self.status = status
        self.kind = kind
        self.message = message
        self.hint = hint


def handshake_refusal(scope: Scope, *, loopback: bool, trusted: bool) -> Refusal | None:
    """Why this handshake must be refused (Host, then Origin), or None to let it in."""
    if not trusted:
        return None  # with tokens the bearer protects: a page has none
    bad_host = bad_origin = None
    for name, value in scope["headers"]:
        if name == b"host":
            if loopback and not local_name(authority_name(value), scope):
                bad_host = bad_host or value
        elif name == b"origin" and not local_origin(value, scope):
            bad_origin = bad_origin or value
    if bad_host is not None:
        return Refusal(*host_refusal(bad_host))
    if bad_origin is not None:
        return Refusal(*origin_refusal(bad_origin))
    return None
