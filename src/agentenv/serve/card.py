"""Building the Environment Card for a served gateway.

The extensions, their method names, verbs, endpoints and request schemas are those upstream
AgentEnv's gateway advertises (eight of them). A composed environment's card nests one card
per child, as upstream's gateway nests the rewritten card of each backing server: the
child's data plane at `/svc/<key>/agentenv`, no interfaces of its own (its tools are served
by the parent's MCP endpoint) and the gateway's own extensions at the gateway's routes.
"""

from __future__ import annotations

from typing import Any

from agentenv.env.environment import Environment
from agentenv.env.tool import Principal
from agentenv.gateway import Gateway
from agentenv.gateway.errors import DEFAULT_INSTANCE
from agentenv.gateway.triggers import SUPPORTED_TRIGGER_FEATURES
from agentenv.spec.card import (
    Capabilities,
    EnvironmentCard,
    Extension,
    ExtensionMethod,
    ExtensionParams,
    Interface,
)
from agentenv.spec.wire import ToolInfo
from agentenv.state import SEPARATOR

DATA_OPERATIONS = ["data/reset", "data/add", "data/get"]
RPC_PATH = "/agentenv"
SVC_PREFIX = "/svc"
CHANGES_PAGE_MAX = 10000

_EMPTY: dict[str, Any] = {"type": "object", "properties": {}}
_TOOL_ACCESS_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {"type": "string"},
        "tools": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"const": "*"}]},
    },
    "required": ["role", "tools"],
}
_STEP_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": ["list_tools", "call_tool"]},
        "tool_name": {"type": "string", "minLength": 1},
        "arguments": {"type": "object"},
    },
    "required": ["action"],
    "if": {"properties": {"action": {"const": "call_tool"}}},
    "then": {"required": ["tool_name"]},
}
_REGISTER_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "watch_roles": {"type": "array", "items": {"type": "string"}},
        "executor": {"type": "object"},
        "executors": {"type": "object"},
        "triggers": {"type": "array"},
    },
    "required": ["triggers"],
}
_SET_TIME_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "virtual_time": {"type": "string"},
        "virtual_seconds_per_real_second": {"type": "number"},
        "mode": {"enum": ["stepped", "wall"]},  # ours: the stepped clock
    },
    "required": ["virtual_time"],
}
_CHANGES_REQUEST: dict[str, Any] = {
    "type": "object",
    "properties": {
        "after_id": {"type": "integer", "minimum": 0},
        "limit": {"type": "integer", "minimum": 1, "maximum": CHANGES_PAGE_MAX},
    },
}

# (uri, description, extension endpoint, {name: (verb, own endpoint or None, request)})
_Methods = dict[str, tuple[str, str | None, dict[str, Any] | None]]
_EXTENSIONS: list[tuple[str, str, str, _Methods]] = [
    (
        "urn:agentenv:disable-tool/v1",
        "Turn tools off for a role.",
        "/tools/disable",
        {"disable": ("POST", None, _TOOL_ACCESS_REQUEST)},
    ),
    (
        "urn:agentenv:enable-tool/v1",
        "Turn tools back on for a role.",
        "/tools/enable",
        {"enable": ("POST", None, _TOOL_ACCESS_REQUEST)},
    ),
    (
        "urn:agentenv:triggers/v1",
        "Triggers: add by id, remove, clear, and read their statuses and firing log.",
        "/triggers/register",
        {
            "register": ("POST", "/triggers/register", _REGISTER_REQUEST),
            "remove": (
                "POST",
                "/triggers/remove",
                {
                    "type": "object",
                    "properties": {"ids": {"type": "array", "items": {"type": "string"}}},
                    "required": ["ids"],
                },
            ),
            "clear": ("POST", "/triggers/clear", _EMPTY),
            "state": ("GET", "/triggers/state", _EMPTY),
        },
    ),
    (
        "urn:agentenv:clock/v1",
        "The virtual clock: read it (also the get_time tool), set it, clear it, inspect it.",
        "/clock/time",
        {
            "get_time": ("GET", "/clock/time", None),
            "set_time": ("PUT", "/clock/set-time", _SET_TIME_REQUEST),
            "clear": ("POST", "/clock/clear", _EMPTY),
            "state": ("GET", "/clock/state", _EMPTY),
        },
    ),
    (
        "urn:agentenv:trajectory/v1",
        "The append-only JSONL record of tool calls, results and trigger firings.",
        "/trajectory",
        {"get": ("GET", "/trajectory", None)},
    ),
    (
        "urn:agentenv:step/v1",
        "List or call tools over REST, as the AgentEnv-Role header's role sees them.",
        "/step",
        {"step": ("POST", "/step", _STEP_REQUEST)},
    ),
    (
        "urn:agentenv:state/v1",
        "Servers and their tools, tool name clashes, the changelog id and the role rules.",
        "/state",
        {"get": ("GET", "/state", None)},
    ),
    (
        "urn:agentenv:changes/v1",
        "Changelog rows after after_id, oldest first, each with the actors that wrote it.",
        "/changes",
        {"get": ("GET", "/changes", _CHANGES_REQUEST)},
    ),
]


def gateway_extensions(prefix: str = "") -> list[Extension]:
    """The gateway's eight extensions, endpoints under `prefix` (an instance's URL prefix)."""
    extensions = []
    for uri, description, endpoint, methods in _EXTENSIONS:
        features = list(SUPPORTED_TRIGGER_FEATURES) if uri == "urn:agentenv:triggers/v1" else None
        params = ExtensionParams(
            endpoint=prefix + endpoint,
            features=features,
            methods={
                name: ExtensionMethod(
                    method=verb, endpoint=prefix + own if own else None, request=request
                )
                for name, (verb, own, request) in methods.items()
            },
        )
        extensions.append(Extension(uri=uri, description=description, params=params))
    return extensions


def child_key(namespace: str) -> str:
    """The `/svc/<key>` of a child served under `namespace` (`mid__inbox__` -> `mid__inbox`)."""
    return namespace.removesuffix(SEPARATOR)


def child_keys(env: Environment) -> list[str]:
    """The `/svc/<key>` of every composed child, to any depth, parents first."""
    keys: list[str] = []

    def walk(node: Environment, namespace: str) -> None:
        for alias, child in node.children:
            inner = f"{namespace}{alias}{SEPARATOR}"
            keys.append(child_key(inner))
            walk(child, inner)

    walk(env, "")
    return keys


def find_child_namespace(env: Environment, key: str) -> str | None:
    """The namespace of the composed child that `/svc/<key>` names, to any depth; None if
    none. `mcp-<key>` names the same child (upstream's gateway keys MCP services so), and
    so does the child's name (plain or `mcp-`) when exactly one child has it."""
    wanted = {key, key.removeprefix("mcp-")}
    children: list[tuple[str, Environment]] = []

    def walk(node: Environment, namespace: str) -> None:
        for alias, child in node.children:
            inner = f"{namespace}{alias}{SEPARATOR}"
            children.append((inner, child))
            walk(child, inner)

    walk(env, "")
    for namespace, _ in children:
        if child_key(namespace) in wanted:
            return namespace
    named = [namespace for namespace, child in children if child.name in wanted]
    return named[0] if len(named) == 1 else None


def _child_node(env: Environment, namespace: str) -> Environment:
    node = env
    for alias in namespace.removesuffix(SEPARATOR).split(SEPARATOR):
        node = dict(node.children)[alias]
    return node


def build_card(
    gateway: Gateway,
    principal: Principal,
    *,
    instance: str = DEFAULT_INSTANCE,
    prefix: str = "",
    interfaces: list[Interface] | None = None,
) -> EnvironmentCard:
    """The card as `principal` sees it: only the tools its role may call.

    `prefix` is the URL prefix of the instance (`/instances/{id}`), so every endpoint in
    the card can be used as it stands.
    """
    interfaces = [Interface(url=prefix + i.url, transport=i.transport) for i in interfaces or []]
    visible = gateway.list_tools(principal, instance)
    extensions = gateway_extensions(prefix)
    root = gateway.env
    return EnvironmentCard(
        name=root.name,
        description=root.description,
        version=root.version,
        url=prefix + RPC_PATH,
        additionalInterfaces=interfaces,
        capabilities=Capabilities(
            tools=visible, extensions=extensions, operations=list(DATA_OPERATIONS)
        ),
        children_environments=_children(root, "", visible, extensions, prefix),
    )


def build_child_card(
    gateway: Gateway,
    principal: Principal,
    namespace: str,
    *,
    instance: str = DEFAULT_INSTANCE,
    prefix: str = "",
) -> EnvironmentCard:
    """The card of one composed child, as the parent's card nests it (paths rooted at the
    environment's address, which is where `/svc/<key>/...` resolves too)."""
    visible = gateway.list_tools(principal, instance)
    return _child_card(
        _child_node(gateway.env, namespace), namespace, visible, gateway_extensions(prefix), prefix
    )


def _children(
    node: Environment,
    namespace: str,
    visible: list[ToolInfo],
    extensions: list[Extension],
    prefix: str,
) -> list[EnvironmentCard] | None:
    children = [
        _child_card(child, f"{namespace}{alias}{SEPARATOR}", visible, extensions, prefix)
        for alias, child in node.children
    ]
    return children or None


def _child_card(
    node: Environment,
    namespace: str,
    visible: list[ToolInfo],
    extensions: list[Extension],
    prefix: str,
) -> EnvironmentCard:
    # Tools keep their served (namespaced) names: agents call them through the parent's MCP
    # endpoint, where those are the names. Nested children stay nested (ours: composition nests).
    return EnvironmentCard(
        name=node.name,
        description=node.description,
        version=node.version,
        url=f"{prefix}{SVC_PREFIX}/{child_key(namespace)}{RPC_PATH}",
        additionalInterfaces=[],
        capabilities=Capabilities(
            tools=[t for t in visible if t.name.startswith(namespace)],
            extensions=extensions,
            operations=list(DATA_OPERATIONS),
        ),
        children_environments=_children(node, namespace, visible, extensions, prefix),
    )
