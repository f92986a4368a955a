"""WebSocketSession: an agent's episode over the WebSocket session transport (`serve.ws`).

    async with await WebSocketSession.connect("http://127.0.0.1:8765", reset=True) as ws:
        tools = await ws.list_tools()
        result = await ws.call("get_ticket", {"id": "T-1"})   # the /step result body
        print(result["structuredContent"], (await ws.state())["state_hash"])

One connection, one frame per call, answers in order. A call's result is what `POST /step`
answers (`isError`, `content`, `structuredContent`, `changelog_id`, `error`); a frame the
server cannot serve raises `WebSocketError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from types import TracebackType
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

DEFAULT_MAX_SIZE = 64 * 1024 * 1024
"""The largest answer frame the client takes (a listing of many records can be large)."""


class WebSocketError(Exception):
    """An error frame: the server could not serve what was sent (the session goes on).

    `code` is OpenEnv's (`VALIDATION_ERROR`, `INVALID_JSON`, ...), `kind` ours, and `data`
    the whole frame's data."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.code: str = data.get("code", "")
        self.kind: str = (data.get("error") or {}).get("kind", "")
        self.message: str = data.get("message", "")
        super().__init__(f"{self.message} ({self.code})")


def ws_url(url: str, instance: str | None = None) -> str:
    """The session URL for a server's base URL (`http://host:port`, `https://...`, `ws://...`):
    `ws://host:port/ws`, or `.../instances/{instance}/ws`. A URL ending in `/ws` is kept."""
    base = url.rstrip("/")
    if base.startswith("http://"):
        base = "ws://" + base[7:]
    elif base.startswith("https://"):
        base = "wss://" + base[8:]
    if base.endswith("/ws"):
        return base
    if instance is not None:
        base += f"/instances/{instance}"
    return base + "/ws"


class WebSocketSession:
    """One episode's connection: `call`, `list_tools`, `state`, `reset`, `close`."""

    def __init__(self, connection: ClientConnection, session_id: str | None) -> None:
        self._ws = connection
        self._lock = asyncio.Lock()
        self._next_id = 0
        self.session_id = session_id
        """The trajectory `session` the server records this connection's calls under."""
        self.instance: str | None = None
        """The instance a `reset` forked (None until then: the URL's instance)."""

    @classmethod
    async def connect(
        cls,
        url: str,
        *,
        instance: str | None = None,
        token: str | None = None,
        role: str | None = None,
        session: str | None = None,
        reset: bool = False,
        keep: bool = False,
        max_size: int | None = DEFAULT_MAX_SIZE,
        open_timeout: float = 10.0,
    ) -> WebSocketSession:
        """Open a session on the server at `url` (its base URL, or a full `/ws` URL).

        `token` is sent as `Authorization: Bearer`, `role` as `AgentEnv-Role` (trusted local
        mode only), `session` as `AgentEnv-Session`. With `reset` the connection forks its
        own fresh instance first (`keep`: leave it on the server after the session)."""
        headers: dict[str, str] = {}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        if role is not None:
            headers["AgentEnv-Role"] = role
        if session is not None:
            headers["AgentEnv-Session"] = session
        connection = await ws_connect(
            ws_url(url, instance),
            additional_headers=headers,
            compression=None,  # small JSON frames: deflate costs more CPU than it saves
            max_size=max_size,
            open_timeout=open_timeout,
        )
        response = connection.response
        given = response.headers.get("agentenv-session") if response is not None else None
        opened = cls(connection, given or session)
        if reset:
            try:
                await opened.reset(keep=keep)
            except BaseException:
                await connection.close()
                raise
        return opened

    async def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send one frame and return the data of its answer (WebSocketError for an error
        frame). Calls from several tasks are answered one at a time, in order."""
        async with self._lock:
            self._next_id += 1
            frame["id"] = self._next_id
            await self._ws.send(json.dumps(frame))
            answer = json.loads(await self._ws.recv())
        if answer.get("type") == "error":
            raise WebSocketError(answer.get("data") or {})
        data: dict[str, Any] = answer.get("data") or {}
        return data

    async def call(self, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool: what `POST /step` answers (a failed call is a result with
        `isError` and `error`, not an exception)."""
        data = await self.request(
            {
                "type": "step",
                "data": {"type": "call_tool", "tool_name": tool, "arguments": arguments or {}},
            }
        )
        result: dict[str, Any] = data["observation"]["result"]
        return result

    async def list_tools(self) -> list[dict[str, Any]]:
        """The tools this session's role may call, as `/step list_tools` lists them."""
        data = await self.request({"type": "step", "data": {"type": "list_tools"}})
        tools: list[dict[str, Any]] = data["observation"]["tools"]
        return tools

    async def state(self) -> dict[str, Any]:
        """`episode_id`, `step_count`, `instance`, `changelog_id` and `state_hash`."""
        return await self.request({"type": "state"})

    async def reset(self, *, episode_id: str | None = None, keep: bool = False) -> dict[str, Any]:
        """Fork a fresh instance for this connection (a new episode; admin only); the one a
        previous reset forked is dropped unless it was kept. Returns the observation
        (`episode_id`, `instance`, `url`)."""
        payload: dict[str, Any] = {"keep": keep}
        if episode_id is not None:
            payload["episode_id"] = episode_id
        data = await self.request({"type": "reset", "data": payload})
        observation: dict[str, Any] = data["observation"]
        self.session_id = observation["episode_id"]
        self.instance = observation["instance"]
        return observation

    async def close(self) -> None:
        """End the session (a `close` frame, then the closing handshake)."""
        async with self._lock:
            with contextlib.suppress(ConnectionClosed):  # already closed: nothing to end
                await self._ws.send(json.dumps({"type": "close"}))
            await self._ws.close()

    async def __aenter__(self) -> WebSocketSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
