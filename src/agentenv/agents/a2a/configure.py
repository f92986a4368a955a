"""Telling a remote agent where to act the way upstream AgentEnv does: through the HTTP
endpoints its card declares for `urn:agentenv:mcp-config/v1` (`add`) and
`urn:agentenv:peer-agents/v1` (`set`) before the first message, and the turn's settings
through `urn:agentenv:agent-config/v1` (`set`, only the fields the card supports).

Our own served agents take the same facts in each message's metadata (the card says so
with `params.metadata_key`), so they are never configured this way: a shared agent then
holds no state from one task to the next. An agent whose card offers only the endpoints
(upstream's, a2a-sdk 0.3 era) is configured through them.
"""

from __future__ import annotations

from typing import Any

import httpx
from a2a.types import AgentCard
from google.protobuf.json_format import MessageToDict

from agentenv.agents.a2a import AGENT_CONFIG_URI, MCP_CONFIG_URI, PEER_AGENTS_URI
from agentenv.agents.a2a.mcp_tools import McpConfig, describe
from agentenv.agents.base import AgentError

SETUP_TIMEOUT = 30.0


def extension_params(card: AgentCard, uri: str) -> dict[str, Any] | None:
    """The `params` of the card's extension `uri` as plain JSON (None when not declared)."""
    for ext in card.capabilities.extensions:
        if ext.uri == uri:
            return MessageToDict(ext.params) if ext.HasField("params") else {}
    return None


def _endpoint(params: dict[str, Any], method: str) -> tuple[str, str] | None:
    """(HTTP verb, path) of an extension method declared in upstream's layout."""
    declared = (params.get("methods") or {}).get(method)
    if not isinstance(declared, dict):
        return None
    path = declared.get("endpoint") or params.get("endpoint")
    if not isinstance(path, str) or not path.startswith("/"):
        return None
    return str(declared.get("method") or "POST").upper(), path


def _accepts(params: dict[str, Any], method: str, name: str) -> bool:
    """Whether the method's declared request takes the field `name`."""
    request = ((params.get("methods") or {}).get(method) or {}).get("request") or {}
    fields = {*request.get("required", ()), *request.get("optional", ())}
    fields.update(request.get("supported", ()))
    for branch in request.get("oneOf") or ():
        fields.update(branch.get("required", ()), branch.get("optional", ()))
    return name in fields


def wants_registration(card: AgentCard) -> bool:
    """Whether the agent learns its environment only through mcp-config `add`."""
    params = extension_params(card, MCP_CONFIG_URI)
    return (
        params is not None
        and params.get("metadata_key") != MCP_CONFIG_URI
        and _endpoint(params, "add") is not None
    )


def registration_body(params: dict[str, Any], config: McpConfig) -> dict[str, Any]:
    """The mcp-config `add` body for one environment: the credential as headers, the
    env_id as the name, each only when the card's `add` takes that field."""
    body: dict[str, Any] = {"url": config.url}
    headers = config.headers(None)  # Authorization: Bearer, or AgentEnv-Role
    if headers and _accepts(params, "add", "headers"):
        body["headers"] = headers
    if config.env_id and _accepts(params, "add", "name"):
        body["name"] = config.env_id
    return body


async def _holds(
    http: httpx.AsyncClient, url: str, params: dict[str, Any], body: dict[str, Any]
) -> bool:
    """Whether the agent's mcp-config `list` already shows this registration's URL (a
    conflict that is our own earlier `add`, not someone else's name)."""
    listing = _endpoint(params, "list")
    if listing is None:
        return False
    try:
        answer = await http.request(listing[0], url + listing[1])
        servers = answer.json().get("mcp_servers") or {}
    except Exception:
        return False
    return isinstance(servers, dict) and any(
        isinstance(s, dict) and s.get("url") == body["url"] for s in servers.values()
    )


def agent_config_body(card: AgentCard, desired: dict[str, Any]) -> dict[str, Any] | None:
    """The agent-config `set` body: the desired fields the card lists as `supported` (how
    upstream negotiates it), None when the card takes none of them."""
    params = extension_params(card, AGENT_CONFIG_URI)
    if params is None or params.get("metadata_key") or _endpoint(params, "set") is None:
        return None
    request = (params.get("methods") or {}).get("set", {}).get("request") or {}
    supported = set(request.get("supported") or ())
    body = {k: v for k, v in desired.items() if k in supported and v is not None}
    return body or None


async def configure(
    url: str,
    card: AgentCard,
    configs: list[McpConfig],
    peers: dict[str, str],
    desired: dict[str, Any] | None = None,
    *,
    register: bool = True,
) -> None:
    """Register the environments (and peers, when `register`) with an agent that wants
    them through its extension endpoints, and set the `desired` agent-config fields it
    supports; nothing for an agent that reads them from the metadata.

    AgentError naming the endpoint when the agent refuses. A URL its `list` already shows
    (a 409 for our own earlier `add`) is fine: a second turn registers nothing new.
    """
    if not wants_registration(card):
        return
    mcp = extension_params(card, MCP_CONFIG_URI) or {}
    # (verb, path, body, whether "already registered" is fine)
    calls: list[tuple[str, str, dict[str, Any], bool]] = []
    if register:
        verb, path = _endpoint(mcp, "add") or ("POST", "/ext/mcp-config")
        calls += [(verb, path, registration_body(mcp, c), True) for c in configs]
        peer_params = extension_params(card, PEER_AGENTS_URI)
        peer_set = _endpoint(peer_params, "set") if peer_params is not None else None
        if peers and peer_set is not None:
            body = {"peers": [{"name": n, "url": u} for n, u in sorted(peers.items())]}
            calls.append((*peer_set, body, False))
    settings = agent_config_body(card, desired or {})
    if settings is not None:
        params = extension_params(card, AGENT_CONFIG_URI) or {}
        calls.append((*_endpoint(params, "set"), settings, False))  # type: ignore[misc]
    if not calls:
        return
    async with httpx.AsyncClient(timeout=SETUP_TIMEOUT) as http:
        for verb, path, body, repeatable in calls:
            try:
                answer = await http.request(verb, url + path, json=body)
            except httpx.HTTPError as exc:
                raise AgentError(
                    f"the A2A agent at {url} could not be configured ({path}): {describe(exc)}"
                ) from None
            if answer.status_code == 409 and repeatable and await _holds(http, url, mcp, body):
                continue
            if answer.status_code >= 400:
                detail = answer.text.strip()[:300] or answer.reason_phrase
                raise AgentError(
                    f"the A2A agent at {url} refused {verb} {path} "
                    f"(HTTP {answer.status_code}): {detail}"
                )
