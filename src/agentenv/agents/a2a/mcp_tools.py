"""Tools over MCP: what an agent served over A2A calls its environment's tools through.

An A2A request names the environment in its `urn:agentenv:mcp-config/v1` metadata: the
MCP endpoint of the env instance, the bearer token to present, the role and an env_id.
`McpTools` connects to each with the official MCP client (Streamable HTTP), lists the
tools once, and implements the `Tools` protocol of `agents.base`, so an agent runs the
same code in process (a ToolClient) and behind A2A (this).

With several environments, tools are offered as `<env_id>__<tool>` exactly as a
ToolClient names them.
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from agentenv.gateway.results import CallResult
from agentenv.spec.wire import CallError, ToolInfo
from agentenv.state import SEPARATOR

ROLE_HEADER = "AgentEnv-Role"
SESSION_HEADER = "AgentEnv-Session"
DEFAULT_TIMEOUT = 60.0

# MCP carries no error kind, only the text; the gateway's own messages tell these apart.
_DENIED = re.compile(r"^role '.*' may not call ")
_UNKNOWN = re.compile(r"^unknown tool ")


class McpConnectError(Exception):
    """An MCP server that cannot be reached, refuses the credentials, or answers garbage."""


@dataclass(frozen=True)
class McpConfig:
    """One environment an agent may act in (`urn:agentenv:mcp-config/v1`).

    `url` is the MCP endpoint (`http://host:port/mcp` or `.../instances/{id}/mcp`).
    With `token`, calls carry `Authorization: Bearer <token>` and the server takes the
    role from it; without, they carry `AgentEnv-Role: <role>` (honoured only by a server
    in trusted local mode). `headers` are sent as they are on every request (upstream's
    mcp-config `add` carries its credentials this way); the token and role win over them.
    """

    url: str
    token: str | None = None
    role: str | None = None
    env_id: str | None = None
    headers_extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"'url' must be an http(s) URL, got {self.url!r}")

    @classmethod
    def parse(cls, value: Any) -> list[McpConfig]:
        """One config object or a list of them; ValueError naming what is wrong."""
        items = value if isinstance(value, list) else [value]
        out = []
        for i, item in enumerate(items):
            where = f"[{i}]" if isinstance(value, list) else ""
            if not isinstance(item, dict):
                raise ValueError(f"{where or 'the value'} must be an object with 'url'")
            unknown = sorted(set(item) - {"url", "token", "role", "env_id"})
            if unknown:
                raise ValueError(f"{where}unknown field {unknown[0]!r}".lstrip())
            if not isinstance(item.get("url"), str):
                raise ValueError(f"{where}.url is required (the MCP endpoint)".lstrip("."))
            for key in ("token", "role", "env_id"):
                if item.get(key) is not None and not isinstance(item[key], str):
                    raise ValueError(f"{where}.{key} must be a string".lstrip("."))
            try:
                out.append(
                    cls(
                        url=item["url"],
                        token=item.get("token") or None,
                        role=item.get("role") or None,
                        env_id=item.get("env_id") or None,
                    )
                )
            except ValueError as exc:
                raise ValueError(f"{where}: {exc}" if where else str(exc)) from None
        names = [c.env_id for c in out if c.env_id]
        if len(out) > 1 and len(set(names)) != len(out):
            raise ValueError("several environments need distinct 'env_id's")
        return out

    def to_wire(self) -> dict[str, str]:
        """The metadata form (only the fields that are set)."""
        out = {"url": self.url}
        for key in ("token", "role", "env_id"):
            value = getattr(self, key)
            if value:
                out[key] = value
        return out

    def headers(self, session: str | None) -> dict[str, str]:
        """The HTTP headers every MCP request to this server carries."""
        headers: dict[str, str] = dict(self.headers_extra)
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        elif self.role:
            headers[ROLE_HEADER] = self.role
        if session:
            headers[SESSION_HEADER] = session
        return headers


def _leaf(exc: BaseException) -> BaseException:
    """The first real error inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """An exception as one line: its message, or its type when it has none."""
    exc = _leaf(exc)
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _diagnose(config: McpConfig, session: str | None) -> str | None:
    """Why a server refused us, as its HTTP answer says (the MCP client only reports 'an
    error response'): one plain request, on the failure path only."""
    import httpx

    try:
        async with httpx.AsyncClient(timeout=5.0) as http:
            answer = await http.post(
                config.url,
                json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
                headers={
                    **config.headers(session),
                    "Accept": "application/json, text/event-stream",
                },
            )
    except Exception:
        return None
    if answer.status_code < 400:
        return None
    try:
        error = answer.json().get("error", {})
        message = error.get("message") if isinstance(error, dict) else None
    except Exception:
        message = None
    message = message or answer.text.strip()[:200] or answer.reason_phrase
    return f"HTTP {answer.status_code}: {message}"


def _failure(kind: Any, message: str) -> CallResult:
    return CallResult(
        ok=False,
        value=None,
        text=f"Error: {message}",
        error=CallError(kind=kind, message=message),
        changelog_id=-1,
        seq=-1,
        state_hash="",
    )


@dataclass
class _Env:
    env_id: str
    config: McpConfig
    client: Any
    tools: list[ToolInfo] = field(default_factory=list)


class McpTools:
    """The `Tools` protocol over MCP, for one turn. Use as `async with McpTools(...) as t`.

    Entering connects to every environment and lists its tools (McpConnectError if one
    cannot be reached or refuses the credentials); `call` never raises for a bad call.
    Every call is kept in `calls` (the agent's own view of its trajectory).
    """

    def __init__(
        self,
        configs: list[McpConfig],
        *,
        session: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        if not configs:
            raise ValueError("McpTools needs at least one environment")
        self.configs = list(configs)
        self.session = session
        self.timeout = timeout
        self.calls: list[dict[str, Any]] = []
        self._envs: dict[str, _Env] = {}
        self._stack: contextlib.AsyncExitStack | None = None

    @property
    def env_ids(self) -> list[str]:
        """The environments this reaches (their env_id, or `env<i>` when none was given)."""
        return list(self._envs)

    async def __aenter__(self) -> McpTools:
        import httpx2
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client

        stack = contextlib.AsyncExitStack()
        await stack.__aenter__()
        try:
            for i, config in enumerate(self.configs):
                env_id = config.env_id or f"env{i}"
                try:
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(
                            headers=config.headers(self.session), timeout=self.timeout
                        )
                    )
                    client = await stack.enter_async_context(
                        Client(
                            streamable_http_client(config.url, http_client=http),
                            cache=None,
                            read_timeout_seconds=self.timeout,
                        )
                    )
                    env = _Env(env_id, config, client)
                    env.tools = await self._list(client)
                except Exception as exc:
                    why = await _diagnose(config, self.session) or describe(exc)
                    raise McpConnectError(
                        f"cannot use the environment's MCP server at {config.url}: {why}"
                    ) from None
                self._envs[env_id] = env
        except BaseException:
            await stack.aclose()
            raise
        self._stack = stack
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        stack, self._stack = self._stack, None
        for env in self._envs.values():
            env.client = None
        if stack is not None:
            with contextlib.suppress(Exception):
                await stack.aclose()

    @staticmethod
    async def _list(client: Any) -> list[ToolInfo]:
        tools: list[ToolInfo] = []
        cursor = None
        for _ in range(100):  # a server that pages forever is not followed forever
            listed = await client.list_tools(cursor=cursor)
            for tool in listed.tools:
                tools.append(
                    ToolInfo.model_validate(
                        {
                            "name": tool.name,
                            "description": tool.description or "",
                            "inputSchema": tool.input_schema or {"type": "object"},
                        }
                    )
                )
            cursor = listed.next_cursor
            if not cursor:
                break
        return tools

    # -- the Tools protocol ---------------------------------------------------------------

    def list_tools(self) -> list[ToolInfo]:
        """The tools the agent's role may call, named as `call` expects them."""
        single = len(self._envs) == 1
        out = []
        for env_id, env in self._envs.items():
            for info in env.tools:
                if not single:
                    info = info.model_copy(update={"name": f"{env_id}{SEPARATOR}{info.name}"})
                out.append(info)
        return out

    def _route(self, name: str, env_id: str | None) -> tuple[_Env, str] | None:
        if env_id is not None:
            env = self._envs.get(env_id)
            return (env, name) if env else None
        if len(self._envs) == 1:
            return next(iter(self._envs.values())), name
        prefix, sep, rest = name.partition(SEPARATOR)
        if sep and prefix in self._envs:
            return self._envs[prefix], rest
        return None

    async def call(
        self, name: str, args: dict[str, Any] | None = None, *, env_id: str | None = None
    ) -> CallResult:
        """Call a tool over MCP; never raises for a bad call (the result says why)."""
        route = self._route(name, env_id)
        if route is None:
            where = f" in {env_id!r}" if env_id else ""
            result = _failure("unknown_tool", f"unknown tool {name!r}{where}")
        else:
            env, tool = route
            result = await self._call(env, tool, args or {})
        self.calls.append(
            {
                "tool": name,
                "env_id": env_id,
                "ok": result.ok,
                "error": result.error.message if result.error else None,
            }
        )
        return result

    async def _call(self, env: _Env, tool: str, args: dict[str, Any]) -> CallResult:
        if env.client is None:
            return _failure("tool_error", "the MCP connection is closed (the turn is over)")
        try:
            answer = await env.client.call_tool(tool, args)
        except Exception as exc:
            return _failure("tool_error", f"the MCP call failed: {describe(exc)}")
        text = "\n".join(c.text for c in answer.content if getattr(c, "type", "") == "text")
        if answer.is_error:
            message = text.removeprefix("Error: ")
            kind = (
                "denied"
                if _DENIED.match(message)
                else "unknown_tool"
                if _UNKNOWN.match(message)
                else "tool_error"
            )
            return _failure(kind, message)
        return CallResult(
            ok=True,
            value=_value(answer.structured_content, text),
            text=text,
            error=None,
            changelog_id=-1,
            seq=-1,
            state_hash="",
        )


def _value(structured: dict[str, Any] | None, text: str) -> Any:
    """The tool's value. The gateway wraps a value that is not an object as
    `{"result": value}` in structuredContent; its text then is not that object."""
    if structured is None:
        return text
    if set(structured) == {"result"}:
        try:
            as_json = json.loads(text)
        except ValueError:
            as_json = None
        if as_json != structured:
            return structured["result"]
    return structured


class NoTools:
    """The `Tools` of an agent that was given no environment: nothing to call."""

    def list_tools(self) -> list[ToolInfo]:
        """No tools."""
        return []

    async def call(
        self, name: str, args: dict[str, Any] | None = None, *, env_id: str | None = None
    ) -> CallResult:
        """Every call fails, saying why."""
        return _failure(
            "unknown_tool",
            f"no environment was given to this agent, so there is no tool {name!r} "
            "(send urn:agentenv:mcp-config/v1 in the request metadata)",
        )
