"""The Environment Card (`GET /.well-known/agent-env.json`), protocol version 1.0."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agentenv.spec.wire import ToolInfo

PROTOCOL_VERSION = "1.0"


class _Card(BaseModel):
    model_config = ConfigDict(populate_by_name=True)


class Interface(_Card):
    """Another way to reach the environment (e.g. MCP)."""

    url: str
    transport: str


class ExtensionMethod(_Card):
    """One endpoint of an extension."""

    method: str
    endpoint: str
    request_json_schema: dict[str, Any] | None = Field(default=None, alias="request-json-schema")


class ExtensionParams(_Card):
    """Where an extension is served."""

    endpoint: str
    methods: list[ExtensionMethod] = Field(default_factory=list)


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
