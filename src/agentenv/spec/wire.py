"""Wire shapes of the AgentEnv protocol: /step, tool results, data-plane parts, JSON-RPC.

Field names are the protocol's, including its camelCase where it has it.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class StepRequest(_Wire):
    """Body of `POST /step`."""

    action: Literal["list_tools", "call_tool"]
    tool_name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _needs_tool(self) -> StepRequest:
        if self.action == "call_tool" and not self.tool_name:
            raise ValueError("call_tool needs 'tool_name'")
        return self


class TextContent(_Wire):
    """MCP text content."""

    type: Literal["text"] = "text"
    text: str


class CallError(_Wire):
    """Why a call failed, for programs (ours; `isError` and the text are for agents)."""

    kind: Literal[
        "unknown_tool",
        "invalid_arguments",
        "denied",
        "tool_error",
        "invalid_result",
        "timeout",
        "unauthenticated",
    ]
    message: str


class StepResult(_Wire):
    """The answer to a tool call: MCP's CallToolResult plus the protocol's `changelog_id`."""

    content: list[TextContent]
    is_error: bool = Field(default=False, alias="isError")
    structured_content: dict[str, Any] | None = Field(default=None, alias="structuredContent")
    changelog_id: int
    error: CallError | None = None


class ToolInfo(_Wire):
    """A tool as agents see it (MCP's Tool shape)."""

    name: str
    description: str
    input_schema: dict[str, Any] = Field(alias="inputSchema")
    meta: dict[str, Any] | None = Field(
        default=None,
        alias="_meta",
        description="MCP `_meta` of the tool, e.g. `agentenv.io/hiddenByDefault`; left out if none.",
    )

    @model_serializer(mode="wrap")
    def _drop_empty_meta(self, handler: Any) -> dict[str, Any]:
        # An absent `_meta` stays absent on the wire rather than `null`.
        out = handler(self)
        if self.meta is None:
            out.pop("_meta", None)
            out.pop("meta", None)
        return out


class ToolList(_Wire):
    """The answer to `list_tools`."""

    tools: list[ToolInfo]


# -- data plane -------------------------------------------------------------------------


class TextPart(_Wire):
    """An A2A text part."""

    kind: Literal["text"]
    text: str
    metadata: dict[str, Any] | None = None


class FileContent(_Wire):
    """A file, inline (`bytes`, base64) or by `uri`."""

    bytes: str | None = None
    uri: str | None = None
    mime_type: str | None = Field(default=None, alias="mimeType")
    name: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> FileContent:
        if (self.bytes is None) == (self.uri is None):
            raise ValueError("a file needs exactly one of 'bytes' or 'uri'")
        return self


class FilePart(_Wire):
    """An A2A file part."""

    kind: Literal["file"]
    file: FileContent
    metadata: dict[str, Any] | None = None


class DataPart(_Wire):
    """An A2A data part. To seed records: `{"data": {"<collection>": [records...]}}`."""

    kind: Literal["data"]
    data: dict[str, Any]
    metadata: dict[str, Any] | None = None


Part = Annotated[TextPart | FilePart | DataPart, Field(discriminator="kind")]


class DataAddParams(_Wire):
    """Params of `data/add`."""

    parts: list[Part] = Field(min_length=1)


class JsonRpcRequest(BaseModel):
    """A JSON-RPC 2.0 request (unknown members are ignored, as upstream's SDK does)."""

    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] | list[Any] | None = None
    id: str | int | None = None


class JsonRpcError(BaseModel):
    """A JSON-RPC 2.0 error object."""

    code: int
    message: str
    data: Any = None


class JsonRpcResponse(BaseModel):
    """A JSON-RPC 2.0 response: `result` or `error`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: str | int | None
    result: Any = None
    error: JsonRpcError | None = None


# -- control plane ----------------------------------------------------------------------


class SetTimeBody(_Wire):
    """Body of `PUT /clock/set-time`. `mode` is ours (`stepped` or `wall`)."""

    virtual_time: datetime
    # strict: `false` is not a rate of 0, and "2" is not a number.
    virtual_seconds_per_real_second: float | None = Field(default=None, ge=0, le=86400, strict=True)
    mode: Literal["stepped", "wall"] | None = None


class AdvanceClockBody(_Wire):
    """Body of `POST /clock/advance` (ours): move a clock forward by some seconds."""

    seconds: float = Field(
        gt=0, le=100 * 365 * 86400, strict=True, description="At most a century."
    )


class ToolAccessBody(_Wire):
    """Body of `POST /tools/disable` and `POST /tools/enable`."""

    role: str = Field(min_length=1)
    tools: list[str] | Literal["*"]


class RemoveTriggersBody(_Wire):
    """Body of `POST /triggers/remove`: non-empty ids (an empty list removes nothing)."""

    ids: list[Annotated[str, Field(min_length=1)]]


class ErrorFields(BaseModel):
    """The `error` object of a non-2xx answer: upstream's fields (`code`, `message`,
    `retryable`, `applied`, `hint`) and ours (`kind`, the same as `code` or finer)."""

    model_config = ConfigDict(extra="allow")

    code: str
    message: str
    retryable: bool = False
    applied: Literal["yes", "no", "unknown"] = "no"
    hint: str | None = None
    kind: str


class ErrorBody(BaseModel):
    """Every non-2xx answer of the REST surface: `{"ok": false, "error": {...}}`."""

    ok: Literal[False] = False
    error: ErrorFields


class StepTool(BaseModel):
    """A tool as `/step list_tools` and `/state` list it: upstream's `name`, `description`,
    `parameters` (the input JSON Schema); `inputSchema` (the same schema, MCP's name) is ours."""

    model_config = ConfigDict(extra="allow")

    name: str
    description: str
    parameters: dict[str, Any]


class McpServerInfo(BaseModel):
    """One entry of `/state`'s `mcp_servers`: a server (here: the environment or a composed
    child) and the tools it serves."""

    model_config = ConfigDict(extra="allow")

    name: str
    tools: list[StepTool]


class RoleAccess(BaseModel):
    """A role's own tool-access rules as upstream lists them: the tool names (or `*`, or a
    `prefix*` pattern) it has disabled and those it has allowed."""

    disabled: list[str]
    allowed: list[str]

    @classmethod
    def of(cls, rules: dict[str, bool]) -> RoleAccess:
        """From our rules table (name -> allowed)."""
        return cls(
            disabled=sorted(n for n, ok in rules.items() if not ok),
            allowed=sorted(n for n, ok in rules.items() if ok),
        )
