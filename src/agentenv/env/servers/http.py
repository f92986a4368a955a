"""The Streamable HTTP backend: an MCP server someone else runs, reached at a URL.

`url` may be the MCP endpoint itself or the server's base URL: we try `<url>` first, then
`<url>/mcp` (the path the official SDK and upstream's servers use), and keep the first that
initialises a session. Every request carries the spec's `headers` and, with a `token`,
`Authorization: Bearer <token>` (`${NAME}` in either reads our environment). Nothing is
started, so all instances share the one server (`starts_processes = False`).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from agentenv.env.servers.base import ServerBackend, ServerError
from agentenv.env.servers.session import McpChild
from agentenv.env.servers.stdio import expand
from agentenv.spec.server import ServerSpec


def request_headers(spec: ServerSpec) -> dict[str, str]:
    """The headers every request to the server carries: the spec's, plus the bearer token."""
    headers = {k: expand(v, None) for k, v in spec.headers.items()}
    if spec.token:
        headers["Authorization"] = f"Bearer {expand(spec.token, None)}"
    return headers


def mcp_candidates(url: str) -> list[str]:
    """The URLs tried as the MCP endpoint, in order: the URL itself, then `<url>/mcp`."""
    url = url.rstrip("/") or url
    return [url] if url.endswith("/mcp") else [url, f"{url}/mcp"]


async def http_status(url: str, headers: dict[str, str], timeout: float) -> int | None:
    """The status a POST of an MCP `initialize`-shaped probe gets at `url` (None when the
    URL does not answer): tells a refused token (401/403) from a wrong path (404/405)."""
    body = {"jsonrpc": "2.0", "id": 0, "method": "ping"}
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as client:
            answer = await client.post(
                url,
                json=body,
                headers={"Accept": "application/json, text/event-stream"},
            )
            return answer.status_code
    except httpx2.HTTPError:
        return None


async def open_mcp_child(url: str, spec: ServerSpec, child: McpChild, timeout: float) -> McpChild:
    """Open `child`'s session on the Streamable HTTP endpoint `url`; ServerError naming the
    URL (and a refused token) when it cannot be opened, nothing left open."""
    headers = request_headers(spec)

    @contextlib.asynccontextmanager
    async def streams() -> AsyncIterator[Any]:
        async with (
            create_mcp_http_client(headers=headers) as client,
            streamable_http_client(url, http_client=client) as opened,
        ):
            yield opened

    try:
        await child.open(streams, timeout)
    except ServerError as exc:
        # A server that hung has spent the budget: no probe then (it would hang too).
        hung = "did not answer within" in str(exc)
        status = None if hung else await http_status(url, headers, min(timeout, 10.0))
        if status in (401, 403):
            who = "the token" if spec.token else "no token was sent and it"
            raise ServerError(
                f"{url}: the server refused the request with {status} "
                f"({'unauthorized' if status == 401 else 'forbidden'}): {who} was not accepted"
            ) from None
        raise ServerError(f"{url}: no MCP session could be opened: {exc}") from None
    return child


class HttpBackend(ServerBackend):
    """`server.url`: an MCP server over Streamable HTTP, already running."""

    name = "http"
    starts_processes = False

    def describe(self) -> str:
        """The URL."""
        return self.spec.url or ""

    async def start(self, log_dir: Path) -> McpChild:
        """Open a session on `<url>`, else on `<url>/mcp`; ServerError naming the URL."""
        url = self.describe()
        if not url.startswith(("http://", "https://")):
            raise ServerError(f"server url {url!r} is not an http(s) URL")
        errors: list[str] = []
        deadline = time.monotonic() + self.spec.startup_timeout
        for candidate in mcp_candidates(url):
            left = deadline - time.monotonic()
            if left <= 0:
                errors.append(f"{candidate}: not tried, startup_timeout spent")
                continue
            try:
                child = McpChild(label=candidate, base_url=candidate)
                return await open_mcp_child(candidate, self.spec, child, left)
            except ServerError as exc:
                if "refused the request" in str(exc):
                    raise
                errors.append(str(exc))
        raise ServerError(
            f"MCP server at {url} did not answer (tried {', '.join(mcp_candidates(url))}): "
            + "; ".join(errors)
        )
