"""The Environment document: what an environment is, as data.

An environment document is YAML or JSON with `apiVersion: agentenv/v1` and
`kind: Environment`. It names the roles, the state collections with their schemas, the seed
data, the tools (Python functions, a Python class, or CRUD on a collection with no Python),
the clock defaults, the triggers and the tool-access rules. See docs/documents.md.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentenv.spec.quantities import Duration
from agentenv.spec.roles import RESERVED_ROLE
from agentenv.spec.server import ServerSpec
from agentenv.spec.triggers import TriggerRegistration
from agentenv.spec.workspace import WorkspaceSpec

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
GatewayMode = Literal["consistent", "performance"]
"""How a gateway runs calls on one instance: one at a time, or overlapping."""
JSON_TYPES = ("string", "integer", "number", "boolean", "array", "object")


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class RoleSpec(_Doc):
    """A role a principal can act in (e.g. `agent`, `supervisor`, `user`)."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = ""

    @field_validator("name")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value == RESERVED_ROLE:
            raise ValueError(f"{RESERVED_ROLE!r} is reserved for the gateway's own principal")
        return value


class CollectionSpec(_Doc):
    """One state collection: its key field and a JSON schema its records must satisfy."""

    key: str = "id"
    description: str = ""
    record_schema: dict[str, Any] | None = Field(default=None, alias="schema")

    @field_validator("record_schema")
    @classmethod
    def _check_schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            from jsonschema import Draft202012Validator
            from jsonschema.exceptions import SchemaError

            try:
                Draft202012Validator.check_schema(value)
            except SchemaError as exc:
                raise ValueError(f"not a valid JSON schema: {exc.message}") from None
        return value


class ParamSpec(_Doc):
    """A tool parameter declared in the document (JSON-schema subset)."""

    type: Literal["string", "integer", "number", "boolean", "array", "object"] = "string"
    description: str = ""
    enum: list[Any] | None = None
    default: Any = None
    required: bool | None = None
    minimum: float | None = Field(default=None, strict=True, allow_inf_nan=False)
    maximum: float | None = Field(default=None, strict=True, allow_inf_nan=False)
    items: dict[str, Any] | None = None


CrudOp = Literal["get", "list", "search", "create", "update", "delete"]


class CrudSpec(_Doc):
    """A tool that reads or writes one collection with no Python behind it."""

    collection: str
    op: CrudOp
    fields: list[str] | None = Field(
        default=None, description="For list/search: the fields a caller may filter or search on."
    )


class ToolSpec(_Doc):
    """One entry of `tools:`: a function, every `@tool` of a module, or a CRUD tool.

    Exactly one of `function`, `module` and `crud` is set. The other fields override
    what the function declares (or describe the CRUD tool).
    """

    function: str | None = Field(default=None, description="'file.py:name' or 'package.mod:name'")
    method: str | None = Field(
        default=None,
        description="Class-backed environments: the method whose options this entry sets.",
    )
    module: str | None = Field(default=None, description="'file.py' or 'package.mod'")
    crud: CrudSpec | None = None
    name: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_-]*$")
    description: str | None = None
    roles: list[str] | None = None
    kind: Literal["read", "write"] | None = None
    duration: Duration | None = None
    timeout: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False)
    params: dict[str, ParamSpec] | None = None
    hidden_by_default: bool | None = Field(
        default=None,
        description="Hidden from every role until an access rule names it (listed with "
        "`_meta agentenv.io/hiddenByDefault`).",
    )

    @model_validator(mode="after")
    def _one_source(self) -> ToolSpec:
        sources = [
            k for k in ("function", "module", "crud", "method") if getattr(self, k) is not None
        ]
        if len(sources) != 1:
            raise ValueError(
                "a tool needs exactly one of 'function', 'module', 'crud' or 'method'"
                + (f" (has {', '.join(sources)})" if sources else "")
            )
        if self.crud is not None and self.name is None:
            raise ValueError("a crud tool needs a 'name'")
        if (self.module is not None or self.method is not None) and self.name:
            raise ValueError("'name' cannot be set on a 'module' or 'method' entry")
        if self.params is not None and self.crud is None:
            raise ValueError(
                "'params' is only for crud tools; a function's parameters come from its "
                "signature and docstring"
            )
        return self


class ClockSpec(_Doc):
    """Clock defaults for every instance. A clock with a `start` is armed from the outset.

    `mode: stepped` (ours) moves time only by each tool's duration, so runs are
    reproducible to the second; `mode: wall` is the protocol's t0 + real elapsed x rate.
    """

    start: datetime | None = None
    mode: Literal["stepped", "wall"] = "stepped"
    rate: float = Field(default=1.0, ge=0, le=86400, strict=True)
    default_duration: Duration = timedelta(seconds=1)

    @field_validator("start")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("start needs a timezone, e.g. 2026-03-02T09:00:00Z")
        return value


class AccessRuleSpec(_Doc):
    """A tool-access rule: enable or disable some tools (or `*`) for a role (or `*`)."""

    role: str
    action: Literal["disable", "enable"] = "disable"
    tools: list[str] | Literal["*"]


class ComposeSpec(_Doc):
    """A child environment: a document path (relative to this one), or a server, and its
    namespace.

    The child's tools are served as `<as>__<tool>` and its collections stored as
    `<as>__<collection>`; `as` defaults to the child document's name, and is required for
    a `server:` child (which has no document to name it). A document child may itself be
    a process environment (a document with `server:`).
    """

    env: str | None = Field(default=None, description="A child document (file or folder).")
    server: ServerSpec | None = Field(
        default=None, description="A server child: the `server:` block of a process environment."
    )
    as_: str | None = Field(
        default=None, alias="as", pattern=r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$"
    )

    @model_validator(mode="after")
    def _one_child(self) -> ComposeSpec:
        if (self.env is None) == (self.server is None):
            raise ValueError("a compose entry needs exactly one of 'env' and 'server'")
        if self.server is not None and self.as_ is None:
            raise ValueError("a 'server' child needs 'as' (the namespace of its tools)")
        return self


class EnvironmentSpec(_Doc):
    """An environment, as a document. Load it with `load_environment_spec`."""

    api_version: Literal["agentenv/v1"] = Field(alias="apiVersion")
    kind: Literal["Environment"]
    name: str = Field(pattern=NAME_PATTERN, description="No whitespace.")
    version: str = "0.1.0"
    description: str = ""
    roles: list[RoleSpec] = Field(default_factory=lambda: [RoleSpec(name="default")])
    default_role: str | None = Field(
        default=None,
        description="The role of a caller that names none (or the protocol's `default`); "
        "the first role if unset.",
    )
    strict_roles: bool = Field(
        default=False,
        description="Serve only the declared roles: other role names are refused, in calls, "
        "in access rules and at /tools/disable|enable. Off: any role name works.",
    )
    gateway_mode: GatewayMode = Field(
        default="consistent",
        description="'consistent': calls on one instance run one at a time; 'performance': "
        "they may overlap (see docs/gateway.md).",
    )
    state: dict[str, CollectionSpec] = Field(default_factory=dict)
    seed: dict[str, list[dict[str, Any]] | str] = Field(
        default_factory=dict, description="Records per collection, inline or a file path."
    )
    tools: list[ToolSpec] = Field(default_factory=list)
    class_: str | None = Field(
        default=None,
        alias="class",
        description="'file.py:Class': a class whose public methods are the tools.",
    )
    clock: ClockSpec = Field(default_factory=ClockSpec)
    triggers: TriggerRegistration = Field(default_factory=TriggerRegistration)
    access: list[AccessRuleSpec] = Field(default_factory=list)
    compose: list[ComposeSpec] = Field(
        default_factory=list, description="Child environments served as one (see composition)."
    )
    server: ServerSpec | None = Field(
        default=None,
        description="A process environment: its tools are a server's (MCP over stdio or "
        "HTTP, an AgentEnv server, an upstream folder); see docs/process-envs.md.",
    )
    workspace: WorkspaceSpec | None = Field(
        default=None,
        description="A workspace environment: a directory tree as state, with bash and file "
        "tools run in a sandbox; see docs/workspaces.md.",
    )

    @field_validator("triggers", mode="before")
    @classmethod
    def _list_is_registration(cls, value: Any) -> Any:
        return {"triggers": value} if isinstance(value, list) else value

    def reference_problems(self) -> list[tuple[tuple[Any, ...], str]]:
        """Cross-references that do not resolve (roles, collections), each with its location.

        Structure is checked by pydantic; these need the whole document, so the loader
        asks for them after parsing and reports the first.
        """
        roles = set(self.role_names)
        problems: list[tuple[tuple[Any, ...], str]] = []
        if self.server is not None:
            # A process environment's tools and state are its server's.
            for field in ("tools", "class_", "state", "seed"):
                if getattr(self, field):
                    name = "class" if field == "class_" else field
                    problems.append(
                        (
                            (name,),
                            f"a document with 'server' has no '{name}' (the server's are used)",
                        )
                    )
        if self.workspace is not None:
            if self.server is not None:
                problems.append(
                    (("workspace",), "a document has 'server' or 'workspace', not both")
                )
            if self.workspace.collection in self.state:
                problems.append(
                    (
                        ("workspace", "collection"),
                        f"{self.workspace.collection!r} is also in 'state'",
                    )
                )
            for name, tool_roles in self.workspace.tool_roles().items():
                for j, role in enumerate(tool_roles or ()):
                    if role not in roles:
                        problems.append(
                            (("workspace", "tools", name, j), _unknown_role(role, roles))
                        )
        if self.default_role is not None and self.default_role not in roles:
            problems.append((("default_role",), _unknown_role(self.default_role, roles)))
        for i, tool in enumerate(self.tools):
            if tool.method is not None and self.class_ is None:
                problems.append((("tools", i, "method"), "'method' needs a 'class' environment"))
            if tool.crud is not None and tool.crud.collection not in self.state:
                known = ", ".join(self.state) or "none"
                problems.append(
                    (
                        ("tools", i, "crud", "collection"),
                        f"unknown collection {tool.crud.collection!r} (collections: {known})",
                    )
                )
            for j, role in enumerate(tool.roles or []):
                if role not in roles:
                    problems.append((("tools", i, "roles", j), _unknown_role(role, roles)))
        seen_alias: set[str] = set()
        for i, child in enumerate(self.compose):  # children without `as` are checked on load
            if child.as_ is not None and child.as_ in seen_alias:
                problems.append((("compose", i), f"a second child named {child.as_!r}"))
            seen_alias.add(child.as_ or "")
        for i, rule in enumerate(self.access):
            if self.compose or not self.strict_roles:
                # Rules take any role name unless roles are strict; children bring roles of
                # their own, so a composed document is checked once they are loaded.
                break
            if rule.role not in ("*", "default") and rule.role not in roles:
                problems.append((("access", i, "role"), _unknown_role(rule.role, roles)))
        if self.clock.start is None and not self.compose:
            for i, trigger in enumerate(self.triggers.triggers):
                when = trigger.when
                relative = when.type == "time" and when.at is None
                delayed = when.type in ("action", "state") and when.delay is not None
                if relative or delayed:
                    what = "a relative time trigger" if relative else "'delay'"
                    problems.append(
                        (("triggers", i, "when"), f"{what} needs an armed clock: set clock.start")
                    )
        for name in self.seed:
            if name not in self.state:
                problems.append((("seed", name), f"no collection {name!r} is declared in 'state'"))
        return problems

    @property
    def role_names(self) -> list[str]:
        """The declared role names, in order."""
        return [r.name for r in self.roles]


def _unknown_role(role: str, roles: set[str]) -> str:
    return f"unknown role {role!r} (roles: {', '.join(sorted(roles))})"
