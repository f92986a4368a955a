"""Building the Environment Card for a served gateway."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from agentenv.env.environment import Environment
from agentenv.env.tool import Principal
from agentenv.gateway import Gateway
from agentenv.gateway.errors import DEFAULT_INSTANCE
from agentenv.spec.card import (
    Capabilities,
    EnvironmentCard,
    Extension,
    ExtensionMethod,
    ExtensionParams,
    Interface,
)
from agentenv.spec.triggers import TriggerRegistration
from agentenv.spec.wire import RemoveTriggersBody, SetTimeBody, StepRequest, ToolAccessBody
from agentenv.state import SEPARATOR

DATA_OPERATIONS = ["data/reset", "data/add", "data/get"]


def _schema(model: type[BaseModel] | None) -> dict[str, Any] | None:
    return model.model_json_schema(by_alias=True) if model else None


# (uri, description, [(method, path, body model)])
_EXTENSIONS: list[tuple[str, str, list[tuple[str, str, type[BaseModel] | None]]]] = [
    ("urn:agentenv:step/v1", "Call tools with POST /step.", [("POST", "/step", StepRequest)]),
    (
        "urn:agentenv:clock/v1",
        "Virtual clock: read, set, clear.",
        [
            ("GET", "/clock/time", None),
            ("PUT", "/clock/set-time", SetTimeBody),
            ("POST", "/clock/clear", None),
            ("GET", "/clock/state", None),
        ],
    ),
    (
        "urn:agentenv:triggers/v1",
        "Register, remove and inspect triggers.",
        [
            ("POST", "/triggers/register", TriggerRegistration),
            ("POST", "/triggers/remove", RemoveTriggersBody),
            ("POST", "/triggers/clear", None),
            ("GET", "/triggers/state", None),
        ],
    ),
    (
        "urn:agentenv:disable-tool/v1",
        "Disable tools for a role.",
        [("POST", "/tools/disable", ToolAccessBody)],
    ),
    (
        "urn:agentenv:enable-tool/v1",
        "Enable tools for a role.",
        [("POST", "/tools/enable", ToolAccessBody)],
    ),
    (
        "urn:agentenv:trajectory/v1",
        "Append-only JSONL of tool calls, results and trigger firings.",
        [("GET", "/trajectory", None)],
    ),
    (
        "urn:agentenv:state/v1",
        "Servers, tools, changelog id and role rules.",
        [("GET", "/state", None)],
    ),
]


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
    env = gateway.env
    interfaces = [Interface(url=prefix + i.url, transport=i.transport) for i in interfaces or []]
    visible = gateway.list_tools(principal, instance)
    extensions = [
        Extension(
            uri=uri,
            description=description,
            params=ExtensionParams(
                endpoint=prefix + methods[0][1],
                methods=[
                    ExtensionMethod(
                        method=verb,
                        endpoint=prefix + path,
                        **{"request-json-schema": _schema(body)},
                    )
                    for verb, path, body in methods
                ],
            ),
        )
        for uri, description, methods in _EXTENSIONS
    ]

    def card_of(node: Environment, namespace: str) -> EnvironmentCard:
        # A child is served by the same gateway: same endpoints, its tools under their
        # served (namespaced) names.
        children = [
            card_of(child, f"{namespace}{alias}{SEPARATOR}") for alias, child in node.children
        ]
        return EnvironmentCard(
            name=node.name,
            description=node.description,
            version=node.version,
            url=prefix + "/agentenv",
            additionalInterfaces=interfaces,
            capabilities=Capabilities(
                tools=[t for t in visible if t.name.startswith(namespace)],
                extensions=extensions,
                operations=list(DATA_OPERATIONS),
            ),
            children_environments=children or None,
        )

    return card_of(env, "")
