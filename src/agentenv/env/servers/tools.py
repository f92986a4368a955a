"""Remote tools: a server's tool list (`ToolListing`) as our `Tool`s, and its answers as
our results.

A remote tool keeps the server's name, description and input schema (pydantic's `title`s
dropped, as for our own tools). It is a read tool when the server marks it `readOnlyHint`
or the document lists it in `server.read_tools`; hidden by default when the server lists it
with `_meta {"agentenv.io/hiddenByDefault": true}`; its timeout is `server.call_timeout`.
Arguments are checked against the server's JSON Schema (compiled once per tool, through
`Tool.check_args`), so a bad call is refused by the gateway and never reaches the server.
The call goes to the instance's child with the caller's role and session in `_meta`
(`agentenv.io/role`, `agentenv.io/session`).

What a call returns (the value the gateway records and encodes):

- `structuredContent` when the server sends it; a `{"result": x}` that is exactly the
  wrapping the MCP SDKs put around a non-object return value (the tool's `outputSchema` has
  the one required property `result`) is unwrapped to `x`;
- else a single text content: its text, as text (not parsed as JSON: the server chose
  text, and an agent sees it unchanged);
- else the content list as MCP gives it (images, resources, several texts); no content
  is None.

`isError` fails the call with the server's text (a `tool_error`); a child that died or
broke its connection fails it with a ToolError naming the server and its stderr tail.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from pydantic import ConfigDict, create_model

from agentenv.env.servers.base import (
    ROLE_META_KEY,
    SESSION_META_KEY,
    ServerError,
    ToolAnswer,
    ToolListing,
)
from agentenv.env.tool import (
    HIDDEN_BY_DEFAULT_META_KEY,
    ArgumentsInvalid,
    Tool,
    ToolContext,
    ToolError,
    clean_schema,
)
from agentenv.spec.errors import DocumentError

if TYPE_CHECKING:
    from agentenv.env.servers.runtime import ServerRuntime

_ANY_ARGS = create_model("remote_args", __config__=ConfigDict(extra="allow"))
"""`args_model` of every remote tool: accepts anything (the server's schema decides), and
is not simple enough for `fast_args`, so the gateway asks `check_args`."""


def remote_tools(runtime: ServerRuntime, listings: list[ToolListing]) -> dict[str, Tool]:
    """Every listed tool as a remote Tool; DocumentError (naming the tool) for a schema
    that is not a JSON Schema, or a name listed twice."""
    tools: dict[str, Tool] = {}
    for listing in listings:
        if listing.name in tools:
            raise DocumentError(
                runtime.document,
                "server",
                f"{runtime.describe()} lists two tools named {listing.name!r}",
            )
        tools[listing.name] = remote_tool(runtime, listing)
    return tools


def remote_tool(runtime: ServerRuntime, listing: ToolListing) -> Tool:
    """One listed tool as a Tool that calls the server."""
    spec = runtime.spec
    schema = listing.input_schema if isinstance(listing.input_schema, dict) else {}
    check = _schema_check(schema, runtime, listing.name)
    annotations = listing.annotations or {}
    read = bool(annotations.get("readOnlyHint")) or listing.name in spec.read_tools
    hidden = bool((listing.meta or {}).get(HIDDEN_BY_DEFAULT_META_KEY))
    wrapped = _wraps_result(getattr(listing, "output_schema", None))
    name, timeout = listing.name, spec.call_timeout
    mirror = spec.mirror and runtime.has_data_plane and not read

    async def invoke(ctx: ToolContext, args: dict[str, Any]) -> Any:
        meta = {ROLE_META_KEY: ctx.principal.role}
        if ctx.session is not None:
            meta[SESSION_META_KEY] = ctx.session
        try:
            answer = await runtime.call(ctx.instance_id, name, args, meta, timeout)
        except ServerError as exc:  # the child died or its connection broke
            raise ToolError(str(exc)) from None
        value = answer_value(answer, wrapped)
        if mirror:
            from agentenv.env.servers.mirror import mirror_into

            try:
                got = await runtime.data(ctx.instance_id, "data/get", {})
            except ServerError as exc:
                raise ToolError(
                    f"{name!r} ran, but reading the server's data failed: {exc}"
                ) from None
            mirror_into(ctx.state, got)
        return value

    return Tool(
        name=name,
        description=listing.description or name,
        input_schema=clean_schema(schema),
        args_model=_ANY_ARGS,
        invoke=invoke,
        is_async=True,
        kind="read" if read else "write",
        timeout=timeout,
        source=f"server:{runtime.describe()}",
        hidden_by_default=hidden,
        check_args=check,
        remote=True,
    )


def _schema_check(schema: dict[str, Any], runtime: ServerRuntime, tool: str) -> Any:
    """The compiled argument check of a tool's input schema."""
    try:
        cls = validator_for(schema)
        cls.check_schema(schema)
        validator = cls(schema)
    except SchemaError as exc:
        where = "/".join(map(str, exc.path)) or "the schema"
        raise DocumentError(
            runtime.document,
            "server",
            f"{runtime.describe()}: tool {tool!r} has an invalid input schema ({where}): {exc.message}",
        ) from None
    is_valid = validator.is_valid

    def check(args: dict[str, Any]) -> dict[str, Any]:
        if is_valid(args):
            return dict(args)
        problems = []
        for error in sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.path))):
            where = ".".join(map(str, error.path)) or "arguments"
            problems.append(f"{where}: {error.message}")
        raise ArgumentsInvalid("; ".join(problems[:10]))

    return check


def _wraps_result(output_schema: Any) -> bool:
    """Whether an output schema is the SDKs' wrapping of a non-object value."""
    if not isinstance(output_schema, dict):
        return False
    props = output_schema.get("properties")
    return (
        isinstance(props, dict)
        and set(props) == {"result"}
        and output_schema.get("required") == ["result"]
    )


def answer_value(answer: ToolAnswer, wrapped: bool = False) -> Any:
    """The value of a server's answer (see the module docstring); ToolError for `isError`."""
    if answer.is_error:
        raise ToolError(_text(answer.content) or "the server reported an error")
    structured = answer.structured
    if structured is not None:
        if (
            wrapped
            and isinstance(structured, dict)
            and len(structured) == 1
            and "result" in structured
        ):
            return structured["result"]
        return structured
    content = answer.content
    if not content:
        return None
    if len(content) == 1 and content[0].get("type") == "text":
        return content[0].get("text", "")
    return content


def _text(content: list[dict[str, Any]]) -> str:
    return "\n".join(c.get("text", "") for c in content if c.get("type") == "text").strip()
