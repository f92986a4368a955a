"""The Environment Card (`GET /.well-known/agent-env.json`), protocol version 1.0.

Field names and nesting are upstream AgentEnv's (`EnvironmentCard` of its protocol package and
the card its gateway serves); `description` and `version` on the card are ours, added keys.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from agentenv.spec.wire import ToolInfo

PROTOCOL_VERSION = "1.0"


class _Card(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class Interface(_Card):
    """Another way to reach the environment (e.g. MCP)."""

    url: str
    transport: str


class ExtensionMethod(_Card):
    """One method of an extension, as `params.methods[<name>]` lists it.

    `method` is the HTTP verb; `endpoint` is the method's own path (absent: the extension's
    `params.endpoint`); `request` is the JSON Schema of the body (or query, for GET).
    Absent fields are left out of the card rather than sent as null.
    """

    method: str
    endpoint: str | None = None
    request: dict[str, Any] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}


class ExtensionParams(_Card):
    """Where an extension is served and its methods, keyed by method name.

    `features` is the triggers extension's list of supported features; other extensions
    leave it out.
    """

    endpoint: str
    methods: dict[str, ExtensionMethod] = Field(default_factory=dict)
    features: list[str] | None = None

    @model_serializer(mode="wrap")
    def _drop_absent(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if data.get("features") is None:
            data.pop("features", None)
        return data


class Extension(_Card):
    """A protocol extension the gateway supports."""

    uri: str
    description: str
    params: ExtensionParams
    required: bool = False


class Capabilities(_Card):
    """What the environment offers: tools, extensions, data-plane operations."""

    tools: list[ToolInfo]
    extensions: list[Extension]
    operations: list[str]


class EnvironmentCard(_Card):
    """The card that tells a client what this environment is and where to reach it."""

    name: str
    description: str = ""
    version: str = ""
    protocol_version: str = Field(default=PROTOCOL_VERSION, alias="protocolVersion")
    url: str = "/agentenv"
    preferred_transport: str = Field(default="JSONRPC", alias="preferredTransport")
    additional_interfaces: list[Interface] = Field(
        default_factory=list, alias="additionalInterfaces"
    )
    capabilities: Capabilities
    children_environments: list[EnvironmentCard] | None = None

    def to_json(self) -> dict[str, Any]:
        """The card as served: protocol field names, nulls kept."""
        return self.model_dump(by_alias=True, mode="json")
