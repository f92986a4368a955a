"""ASGI middleware that refuses requests a browser page could forge (not built yet: passes
everything through)."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send


class RequestGuard:
    """Refuses cross-site and DNS-rebinding requests on a server in trusted local mode."""

    def __init__(self, app: ASGIApp, *, loopback: bool = True) -> None:
        self.app = app
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)
