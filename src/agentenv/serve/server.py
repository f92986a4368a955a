"""Running a served gateway with uvicorn."""

from __future__ import annotations

from collections.abc import Mapping

import uvicorn

from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator, is_loopback
from agentenv.serve._http import DEFAULT_MAX_BODY
from agentenv.serve.rest import create_app


def make_server(
    gateway: Gateway,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    tokens: Mapping[str, str] | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    log_level: str = "warning",
) -> uvicorn.Server:
    """A uvicorn server for the gateway's app; trusted local mode only on loopback with no
    tokens. Call `.run()` (blocking) or `await .serve()`."""
    auth = Authenticator.for_host(host, tokens, default_role=gateway.env.default_role)
    app = create_app(gateway, auth=auth, max_body=max_body, loopback=is_loopback(host))
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,  # a client holding a connection cannot pin the server
    )
    return uvicorn.Server(config)
