"""The AgentEnv backend: an environment server with a card, an MCP endpoint and a data plane.

`GET <base>/.well-known/agent-env.json` gives the card (kept raw on `Child.card`, checked
against our `EnvironmentCard` model); its `additionalInterfaces` entry with transport `mcp`
names the MCP endpoint and its `url` the JSON-RPC 2.0 data plane (`data/reset`, `data/add`,
`data/get`), both resolved against the base URL. The card's extensions stay on the card
(`child.card["capabilities"]["extensions"]`); `invoke_extension` calls one of their REST
methods (e.g. the clock's `sync_time`). `connect_agentenv` is the whole connection, for
backends that start such a server themselves (an upstream env folder).
"""

from __future__ import annotations

import itertools
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from pydantic import ValidationError

from agentenv.env.servers.base import DataMethodMissing, ServerBackend, ServerError
from agentenv.env.servers.http import open_mcp_child, request_headers
from agentenv.env.servers.session import McpChild
from agentenv.spec.card import EnvironmentCard
from agentenv.spec.server import ServerSpec

CARD_PATH = "/.well-known/agent-env.json"
"""Where an AgentEnv environment server serves its card (upstream's path)."""

_ids = itertools.count(1)


@dataclass
class AgentEnvChild(McpChild):
    """A McpChild whose server also has an AgentEnv card and data plane."""

    data_url: str | None = None
    headers: dict[str, str] | None = None

    @property
    def has_data_plane(self) -> bool:
        """Whether the card named a data-plane URL."""
        return self.data_url is not None

    async def data(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """One JSON-RPC 2.0 request to the data plane; its `result`. ServerError naming the
        URL, the method and the server's error code and message when it answers an error."""
        if self.data_url is None:
            raise ServerError(f"{self.label} has no data plane")
        self.used = self.used or method != "data/get"
        body = {"jsonrpc": "2.0", "id": next(_ids), "method": method, "params": params or {}}
        try:
            async with httpx2.AsyncClient(headers=self.headers or {}, timeout=120) as client:
                answer = await client.post(self.data_url, json=body)
        except httpx2.HTTPError as exc:
            raise ServerError(f"{self.data_url}: {method} failed: {exc!r}") from None
        try:
            reply = answer.json()
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            raise ServerError(
                f"{self.data_url}: {method} answered {answer.status_code} with no JSON-RPC "
                f"reply: {answer.text[:200]!r}"
            )
        error = reply.get("error")
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            message = error.get("message") if isinstance(error, dict) else error
            failure = DataMethodMissing if code == -32601 else ServerError
            raise failure(f"{self.data_url}: {method} failed with error {code}: {message}")
        if answer.status_code >= 400 or "result" not in reply:
            raise ServerError(f"{self.data_url}: {method} answered {answer.status_code}: {reply}")
        return reply["result"]


def resolve(base_url: str, path: str) -> str:
    """A card's URL or path made absolute: paths are relative to the address the card was
    fetched from (`<base>/svc/x` + `/mcp` is `<base>/svc/x/mcp`), as upstream's client reads
    them; a full URL is kept."""
    if path.startswith(("http://", "https://")):
        return path
    return base_url.rstrip("/") + "/" + path.lstrip("/")


async def fetch_card(base_url: str, headers: dict[str, str], timeout: float) -> dict[str, Any]:
    """The card at `<base_url>/.well-known/agent-env.json` as JSON; ServerError naming the
    URL when it does not answer, is not found, or is not a JSON object."""
    url = base_url.rstrip("/") + CARD_PATH
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as client:
            answer = await client.get(url)
    except httpx2.HTTPError as exc:
        raise ServerError(f"{url}: the server did not answer ({type(exc).__name__})") from None
    if answer.status_code in (401, 403):
        raise ServerError(f"{url}: the server refused the request with {answer.status_code}")
    if answer.status_code != 200:
        raise ServerError(f"{url}: no card (HTTP {answer.status_code})")
    try:
        card = answer.json()
    except (ValueError, json.JSONDecodeError):
        raise ServerError(f"{url}: the card is not JSON: {answer.text[:120]!r}") from None
    if not isinstance(card, dict):
        raise ServerError(f"{url}: the card is not a JSON object")
    return card


def check_card(card: dict[str, Any], where: str) -> None:
    """ServerError naming `where` and the field when the card's frame does not fit the
    protocol (our `EnvironmentCard`: name, url, interfaces). Its capabilities are only
    advertisements and differ between servers (upstream's SDK sends `extensions: null` and
    tools with `inputSchema`), so only their outline is checked; extra keys are fine."""
    capabilities = card.get("capabilities")
    if capabilities is not None and not isinstance(capabilities, dict):
        raise ServerError(f"{where}: not an AgentEnv card: capabilities is not an object")
    for key in ("tools", "extensions", "operations"):
        value = (capabilities or {}).get(key)
        if value is not None and not isinstance(value, list):
            raise ServerError(f"{where}: not an AgentEnv card: capabilities.{key} is not a list")
    frame = {
        **card,
        "capabilities": {"tools": [], "extensions": [], "operations": []},
        "children_environments": None,
    }
    try:
        EnvironmentCard.model_validate(frame)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(p) for p in first["loc"]) or "(card)"
        raise ServerError(f"{where}: not an AgentEnv card: {path}: {first['msg']}") from None


def mcp_endpoint(card: dict[str, Any], base_url: str, where: str) -> str:
    """The card's MCP interface URL resolved against `base_url`; ServerError naming `where`
    when the card declares none."""
    for interface in card.get("additionalInterfaces") or []:
        if (
            isinstance(interface, dict)
            and interface.get("transport") == "mcp"
            and interface.get("url")
        ):
            return resolve(base_url, str(interface["url"]))
    raise ServerError(
        f"{where}: the card has no MCP interface (additionalInterfaces transport mcp)"
    )


async def connect_agentenv(
    base_url: str,
    spec: ServerSpec,
    *,
    label: str,
    log_path: Path | None = None,
    process_alive: Any = None,
    workspace: Path | None = None,
    child_class: type[AgentEnvChild] | None = None,
    extra: dict[str, Any] | None = None,
) -> AgentEnvChild:
    """Connect to the AgentEnv environment server at `base_url`: its card, an MCP session on
    its MCP interface, its data plane. ServerError naming the URL when any part fails
    (nothing left open); the caller still owns (and stops) any process it started.
    `child_class` (an AgentEnvChild subclass) and `extra` let a backend that starts the
    server give the child its own `close` and what that needs (the folder backend's process)."""
    headers = request_headers(spec)
    where = base_url.rstrip("/") + CARD_PATH
    deadline = time.monotonic() + spec.startup_timeout  # card and session share the budget
    card = await fetch_card(base_url, headers, spec.startup_timeout)
    check_card(card, where)
    endpoint = mcp_endpoint(card, base_url, where)
    child = (child_class or AgentEnvChild)(
        label=label,
        card=card,
        base_url=base_url.rstrip("/"),
        log_path=log_path,
        workspace=workspace,
        process_alive=process_alive,
        data_url=resolve(base_url, card["url"]) if card.get("url") else None,
        headers=headers,
        extra=dict(extra or {}),
    )
    workspace_kept, child.workspace = child.workspace, None  # the caller's until we succeed
    await open_mcp_child(endpoint, spec, child, max(deadline - time.monotonic(), 1.0))
    child.workspace = workspace_kept
    return child


def find_extension(card: dict[str, Any], uri: str) -> dict[str, Any] | None:
    """The card's extension with this `uri`, or None."""
    for ext in (card.get("capabilities") or {}).get("extensions") or []:
        if isinstance(ext, dict) and ext.get("uri") == uri:
            return ext
    return None


async def invoke_extension(
    child: Any, uri: str, method: str, params: dict[str, Any] | None = None
) -> Any:
    """Call the REST method `method` of the child's card extension `uri` (its endpoint and
    HTTP verb as the card lists them; GET sends `params` as the query, others as the JSON
    body); the parsed JSON answer. ServerError naming the URL on a missing extension or
    method, or an answer of 400 and up."""
    card = child.card or {}
    child.used = True  # an extension may change the server (the clock's sync_time does)
    ext = find_extension(card, uri)
    if ext is None:
        raise ServerError(f"{child.label}: the card has no extension {uri}")
    advertised = ext.get("params") or {}
    methods = advertised.get("methods") or {}
    if method not in methods:
        offered = ", ".join(methods) or "none"
        raise ServerError(f"{child.label}: extension {uri} has no method {method!r} ({offered})")
    entry = methods[method] or {}
    endpoint = entry.get("endpoint") or advertised.get("endpoint")
    if not endpoint or not child.base_url:
        raise ServerError(f"{child.label}: extension {uri} method {method!r} has no endpoint")
    url = resolve(child.base_url, str(endpoint))
    verb = str(entry.get("method") or "POST").upper()
    headers = getattr(child, "headers", None) or {}
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=30) as client:
            if verb == "GET":
                answer = await client.get(url, params=params or {})
            else:
                answer = await client.request(verb, url, json=params or {})
    except httpx2.HTTPError as exc:
        raise ServerError(f"{verb} {url}: {exc!r}") from None
    if answer.status_code >= 400:
        raise ServerError(f"{verb} {url} answered {answer.status_code}: {answer.text[:200]}")
    try:
        return answer.json()
    except ValueError:
        raise ServerError(f"{verb} {url}: the answer is not JSON") from None


class AgentEnvBackend(ServerBackend):
    """`server.url` of an AgentEnv environment server (one with a card)."""

    name = "agentenv"
    starts_processes = False

    def describe(self) -> str:
        """The base URL."""
        return self.spec.url or ""

    async def start(self, log_dir: Path) -> AgentEnvChild:
        """Connect to the server at `url` (its card, MCP session and data plane)."""
        url = self.describe()
        if not url.startswith(("http://", "https://")):
            raise ServerError(f"server url {url!r} is not an http(s) URL")
        return await connect_agentenv(url, self.spec, label=url)
