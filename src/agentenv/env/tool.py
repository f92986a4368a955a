"""Tools: what an agent can call. Every way of authoring one ends as a `Tool`.

A Tool carries its name, description, JSON-schema input (built from type hints and the
docstring, or from the document), the roles that may call it, whether it reads or writes,
how long it takes in virtual time, and the callable behind it. Validation of arguments uses
a pydantic model built once per tool, which is both strict about shape and fast.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Literal, get_type_hints

import docstring_parser
from pydantic import BaseModel, ConfigDict, Field, create_model

from agentenv.env.fast_args import FastArgs
from agentenv.spec.wire import ToolInfo
from agentenv.state import State, StateView

ToolKind = Literal["read", "write"]


class ToolError(Exception):
    """Raise from a tool to fail the call with this message; the state is rolled back."""


class ArgumentsInvalid(ValueError):
    """Raised by a tool's `check_args`: the arguments are refused, for the reason given."""


@dataclass(frozen=True)
class Principal:
    """Who is calling: a role, and optionally a name (an agent, a user, a token's owner).

    `admin` principals may use the control plane (clock, triggers, tool access, data,
    instances); the authenticator decides who is one.
    """

    role: str
    name: str | None = None
    admin: bool = False

    def __str__(self) -> str:
        return f"{self.name}({self.role})" if self.name else self.role


HIDDEN_BY_DEFAULT_META_KEY = "agentenv.io/hiddenByDefault"
"""The MCP `_meta` key of a tool hidden from every role until an access rule names it."""

SYSTEM = Principal(role="system", name="agentenv", admin=True)
"""The principal of trigger actions and control operations; passes every access rule."""


@dataclass(slots=True)
class ToolContext:
    """What a tool sees besides its arguments: the state, the time and the caller."""

    state: State | StateView
    now: datetime
    principal: Principal
    instance_id: str = "default"
    spent: timedelta = timedelta(0)
    session: str | None = None
    """The caller's session (MCP session, `/step` session header), if it named one."""
    resources: dict[str, Any] | None = None
    """Live objects that belong to the instance and outlive one call (a workspace's work
    folder and sandbox), by the key their owner chose; closed when the instance is dropped.
    None where a call has no instance (a tool invoked directly)."""

    def on(self, state: State | StateView) -> ToolContext:
        """The same call's context over another state (a fork it runs on, a composed
        child's view): the caller, time, session and resources kept; its own time spent."""
        return ToolContext(
            state,
            self.now,
            self.principal,
            self.instance_id,
            session=self.session,
            resources=self.resources,
        )

    def spend(self, duration: float | timedelta) -> None:
        """Let this call take longer than the tool's declared duration (e.g. a `wait` tool).

        The virtual clock moves by the extra time once the call succeeds.
        """
        extra = duration if isinstance(duration, timedelta) else timedelta(seconds=duration)
        if extra < timedelta(0):
            raise ValueError("a call cannot spend negative time")
        self.spent += extra


@dataclass(frozen=True)
class ToolOptions:
    """Options given to `@tool`, kept on the function until it becomes a Tool."""

    name: str | None = None
    description: str | None = None
    roles: tuple[str, ...] | None = None
    kind: ToolKind = "write"
    duration: timedelta | None = None
    timeout: float | None = None
    blocking: bool = False
    hidden_by_default: bool = False


_MARK = "__agentenv_tool__"


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    roles: list[str] | tuple[str, ...] | None = None,
    kind: ToolKind = "write",
    duration: float | timedelta | None = None,
    timeout: float | None = None,
    blocking: bool = False,
    hidden_by_default: bool = False,
) -> Any:
    """Mark a function (or method) as a tool. The function itself is returned unchanged.

    The first parameter may be a `ToolContext` (annotate it, or name it `ctx`); the other
    parameters are the tool's arguments. `kind="read"` promises not to write the state (the
    gateway holds the tool to it). `duration` is how far a stepped clock moves per call.
    `blocking=True` runs a sync function in a worker thread, off the event loop.
    `hidden_by_default=True` hides the tool from every role until an access rule names it
    (for plumbing a task drives but the agent must not see); it is listed with the
    protocol's `_meta {"agentenv.io/hiddenByDefault": true}`.
    """
    if isinstance(duration, int | float):
        duration = timedelta(seconds=duration)
    options = ToolOptions(
        name=name,
        description=description,
        roles=tuple(roles) if roles is not None else None,
        kind=kind,
        duration=duration,
        timeout=timeout,
        blocking=blocking,
        hidden_by_default=hidden_by_default,
    )

    def mark(func: Callable[..., Any]) -> Callable[..., Any]:
        setattr(func, _MARK, options)
        return func

    return mark(fn) if fn is not None else mark


def tool_options(fn: Any) -> ToolOptions | None:
    """The `@tool` options of a function, or None if it is not marked."""
    return getattr(fn, _MARK, None)


@dataclass
class Tool:
    """A callable tool, however it was authored.

    `invoke(ctx, args)` runs it with already-validated arguments; the gateway does the
    rest (access, clock, validation, transaction, record).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    args_model: type[BaseModel]
    invoke: Callable[[ToolContext, dict[str, Any]], Any | Awaitable[Any]]
    is_async: bool = False
    roles: tuple[str, ...] | None = None
    kind: ToolKind = "write"
    duration: timedelta | None = None
    timeout: float | None = None
    blocking: bool = False
    source: str = ""
    hidden_by_default: bool = False
    check_args: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    """Where set, how the gateway checks arguments instead of `args_model` (remote tools:
    the server's JSON Schema): the values to call with, or `ArgumentsInvalid` saying why.
    `args_model` then accepts anything, so `fast_args()` is None."""
    remote: bool = False
    """Whether its work happens in a server process, outside our state: nothing it does can
    be rolled back, so a trigger check may call it only if it is a read."""
    _fast: tuple[type[BaseModel], FastArgs | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )
    _info: tuple[tuple[Any, ...], ToolInfo] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __getstate__(self) -> dict[str, Any]:
        # The caches are remade where the tool lands (a worker process, a Ray actor).
        return {**self.__dict__, "_fast": None, "_info": None}

    def fast_args(self) -> FastArgs | None:
        """The fast check of `args_model` for flat simple arguments (`env.fast_args`), made
        once per model; None when the model is not simple enough (then pydantic decides)."""
        cached = self._fast
        if cached is None or cached[0] is not self.args_model:
            cached = self._fast = (self.args_model, FastArgs.of(self.args_model))
        return cached[1]

    def info(self) -> ToolInfo:
        """The tool as agents see it. Made once and shared (gateways list it per episode):
        read it, or `model_copy` it to change it."""
        key = (self.name, self.description, id(self.input_schema), self.hidden_by_default)
        cached = self._info
        if cached is None or cached[0] != key:
            meta = {HIDDEN_BY_DEFAULT_META_KEY: True} if self.hidden_by_default else None
            info = ToolInfo(
                name=self.name,
                description=self.description,
                inputSchema=self.input_schema,
                _meta=meta,
            )
            cached = self._info = (key, info)
        return cached[1]

    def with_options(self, **changes: Any) -> Tool:
        """A copy with some fields replaced (used for document overrides)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], *, bound_self: bool = False, **overrides: Any
    ) -> Tool:
        """Build a Tool from a (possibly `@tool`-marked) function or method.

        The input schema comes from the parameters' type hints and defaults; descriptions
        come from the docstring (Google, NumPy or reST style).
        """
        options = tool_options(fn) or ToolOptions()
        doc = docstring_parser.parse(inspect.getdoc(fn) or "")
        param_docs = {p.arg_name: p.description or "" for p in doc.params}
        name = overrides.pop("name", None) or options.name or fn.__name__
        description = (
            overrides.pop("description", None) or options.description or _description(doc) or name
        )
        signature = inspect.signature(fn)
        try:
            hints = get_type_hints(fn)
        except Exception:  # unresolved forward references: fall back to Any
            hints = {}
        params = list(signature.parameters.values())
        if bound_self and params:
            params = params[1:]
        takes_ctx = _first_is_context(params, hints)
        if takes_ctx:
            params = params[1:]
        fields: dict[str, Any] = {}
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                raise TypeError(f"tool {name!r}: *args and **kwargs cannot be tool parameters")
            default = ... if p.default is p.empty else p.default
            fields[p.name] = (
                hints.get(p.name, Any),
                Field(default, description=param_docs.get(p.name) or None),
            )
        args_model = create_model(  # type: ignore[call-overload]
            f"{name}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
        is_async = inspect.iscoroutinefunction(fn)
        if takes_ctx:

            def invoke(ctx: ToolContext, args: dict[str, Any]) -> Any:
                return fn(ctx, **args)

        else:

            def invoke(ctx: ToolContext, args: dict[str, Any]) -> Any:
                return fn(**args)

        def pick(key: str) -> Any:
            # A document's value wins over the decorator's, even when it is 0 or empty.
            value = overrides.pop(key, None)
            return getattr(options, key) if value is None else value

        roles = pick("roles")
        hidden = overrides.pop("hidden_by_default", None)
        return cls(
            name=name,
            description=description.strip(),
            input_schema=clean_schema(args_model.model_json_schema()),
            args_model=args_model,
            invoke=invoke,
            is_async=is_async,
            roles=tuple(roles) if roles is not None else None,
            kind=pick("kind"),
            duration=pick("duration"),
            timeout=pick("timeout"),
            blocking=options.blocking,
            hidden_by_default=options.hidden_by_default if hidden is None else hidden,
            source=f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', name)}",
            **overrides,
        )


def _description(doc: docstring_parser.Docstring) -> str:
    """Summary and body of a docstring; a summary that wraps onto a second line stays one
    sentence."""
    short, long = doc.short_description or "", doc.long_description or ""
    if not long:
        return short
    return f"{short}\n\n{long}" if doc.blank_after_short_description else f"{short} {long}"


def _first_is_context(params: list[inspect.Parameter], hints: dict[str, Any]) -> bool:
    return bool(params) and (hints.get(params[0].name) is ToolContext or params[0].name == "ctx")


def takes_context(fn: Callable[..., Any], *, bound_self: bool = False) -> bool:
    """Whether a tool function (or method) wants the ToolContext as its first argument."""
    params = list(inspect.signature(fn).parameters.values())
    if bound_self and params:
        params = params[1:]
    try:
        hints = get_type_hints(fn)
    except Exception:
        hints = {}
    return _first_is_context(params, hints)


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles, which only add noise for agents."""

    literal = {"default", "examples", "const", "enum"}  # values, not schemas: keep as given

    def walk(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            return {
                k: (v if k in literal else walk(v, k == "properties"))
                for k, v in node.items()
                if not (k == "title" and not in_properties and isinstance(v, str))
            }
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    out = walk(schema)
    out.setdefault("properties", {})
    out["type"] = "object"
    return out
