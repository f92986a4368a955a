"""Running a served gateway with uvicorn."""

from __future__ import annotations

import gc
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
    freeze_gc: bool = True,
) -> uvicorn.Server:
    """A uvicorn server for the gateway's app; trusted local mode only on loopback with no
    tokens. Call `.run()` (blocking) or `await .serve()`.

    With `freeze_gc` (the default) the objects alive once the app is built, the
    environment and its seed data among them, are moved out of the cyclic garbage
    collector's reach (`gc.collect()` then `gc.freeze()`): they live as long as the server,
    and every full collection would otherwise walk all of them again, a pause that grows
    with the seed data and lands in some request's latency. Objects made later (instances,
    trajectories) are collected as usual. It is process-wide: pass `freeze_gc=False` when
    embedding a server in a process that builds and drops many gateways.
    """
    auth = Authenticator.for_host(host, tokens, default_role=gateway.env.default_role)
    app = create_app(gateway, auth=auth, max_body=max_body, loopback=is_loopback(host))
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=5,  # a client holding a connection cannot pin the server
        # uvicorn closes bigger frames (1009) before /ws can answer them in the error shape
        ws_max_size=max(16 * 1024 * 1024, 2 * max_body),
    )
    server = uvicorn.Server(config)
    if freeze_gc:
        freeze_long_lived()
    return server


def freeze_long_lived() -> None:
    """Collect what is garbage now, then freeze every object still alive (see
    `make_server`): the cyclic GC skips them from then on."""
    gc.collect()
    gc.freeze()
