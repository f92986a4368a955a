"""Environment: the runtime built from a document (or a class): seeded state plus tools.

An Environment is immutable once built. It knows its roles, its collections, a frozen
seeded snapshot (every instance forks from it), its tools, and the defaults the gateway
applies per instance (clock, triggers, access rules). It knows nothing of the gateway.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from agentenv.env import compose
from agentenv.env.classenv import ClassBinding, class_tools
from agentenv.env.crud import build_crud_tool
from agentenv.env.parts import server_part, workspace_part
from agentenv.env.tool import Tool, tool_options
from agentenv.spec.environment import (
    AccessRuleSpec,
    ClockSpec,
    EnvironmentSpec,
    GatewayMode,
    RoleSpec,
    ToolSpec,
)
from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import find_environment_file, load_environment_spec
from agentenv.spec.triggers import TriggerRegistration
from agentenv.state import SEPARATOR, CollectionInfo, Snapshot, State, StateError

if TYPE_CHECKING:
    from agentenv.env.servers.runtime import ServerRuntime
    from agentenv.spec.server import ServerSpec
    from agentenv.workspace import Workspace

_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


@dataclass(frozen=True)
class Environment:
    """A declared environment, ready to be served: seeded state, tools and defaults."""

    name: str
    tools: dict[str, Tool]
    seed: Snapshot
    roles: tuple[str, ...] = ("default",)
    default_role: str = "default"
    version: str = "0.1.0"
    description: str = ""
    clock: ClockSpec = field(default_factory=ClockSpec)
    triggers: TriggerRegistration = field(default_factory=TriggerRegistration)
    access: tuple[AccessRuleSpec, ...] = ()
    role_descriptions: dict[str, str] = field(default_factory=dict)
    strict_roles: bool = False
    gateway_mode: GatewayMode = "consistent"
    source: Path | None = None
    children: tuple[tuple[str, Environment], ...] = ()
    server: ServerRuntime | None = field(default=None, compare=False, repr=False)
    """A process environment's runtime: the server its tools call (None for documents)."""
    workspace: Workspace | None = field(default=None, compare=False, repr=False)
    """A workspace environment's tree settings and folders (None for other kinds)."""

    def runtimes(self) -> list[tuple[str, ServerRuntime]]:
        """Every server runtime of this environment and its composed children, each with
        the namespace its tools are served under (`""` for this one's own)."""
        out: list[tuple[str, ServerRuntime]] = [("", self.server)] if self.server else []
        for alias, child in self.children:
            out += [(compose.namespaced(alias, ns), rt) for ns, rt in child.runtimes()]
        return out

    def close(self) -> None:
        """Stop every server process of this environment (and its children); idempotent.
        Documents without servers have nothing to stop."""
        for _, runtime in self.runtimes():
            runtime.close()

    def new_state(self) -> State:
        """A fresh state forked from the seed; cheap (copy on write)."""
        return self.seed.fork()

    def tool(self, name: str) -> Tool | None:
        """The tool of that name, or None."""
        return self.tools.get(name)

    @classmethod
    def load(cls, path: str | Path) -> Environment:
        """Load an environment from a document file or the folder holding one."""
        spec, file = load_environment_spec(path)
        return cls.from_spec(spec, file)

    @classmethod
    def from_spec(
        cls,
        spec: EnvironmentSpec,
        file: str | Path | None = None,
        *,
        target_class: type | None = None,
    ) -> Environment:
        """Build the runtime from a checked document; `file` anchors relative paths.

        `target_class` (or the document's `class:`) makes a class-backed environment.
        """
        base = Path(file).parent if file else Path.cwd()
        started: list[ServerRuntime] = []
        try:
            return cls._from_spec(spec, file, base, target_class, started)
        except BaseException:
            for runtime in started:  # nothing half-started is left running
                runtime.close()
            raise

    @classmethod
    def _from_spec(
        cls,
        spec: EnvironmentSpec,
        file: str | Path | None,
        base: Path,
        target_class: type | None,
        started: list[ServerRuntime],
    ) -> Environment:
        collections = {
            name: CollectionInfo.create(c.key, c.record_schema) for name, c in spec.state.items()
        }
        records: dict[str, list[dict[str, Any]]] = {name: [] for name in collections}
        tools: dict[str, Tool] = {}

        if spec.class_ is not None or target_class is not None:
            target = target_class or _resolve(spec.class_ or "", base, file, "class")
            if not inspect.isclass(target):
                raise DocumentError(file, "class", f"{spec.class_!r} is not a class")
            binding = ClassBinding(target)
            for name, info in binding.collections().items():
                if name in collections:
                    raise DocumentError(file, f"state.{name}", "also an attribute of the class")
                collections[name] = info
            records.update(binding.records(binding.initial))
            for t in class_tools(binding):
                tools[t.name] = t

        for i, tspec in enumerate(spec.tools):
            if tspec.method is not None:
                if tspec.method not in tools:
                    raise DocumentError(
                        file, f"tools[{i}].method", f"the class has no tool {tspec.method!r}"
                    )
                tools[tspec.method] = tools[tspec.method].with_options(
                    description=tspec.description,
                    roles=tuple(tspec.roles) if tspec.roles is not None else None,
                    kind=tspec.kind,
                    duration=tspec.duration,
                    timeout=tspec.timeout,
                    hidden_by_default=tspec.hidden_by_default,
                )
                continue
            for t in _tools_of(tspec, spec, base, file, f"tools[{i}]"):
                if t.name in tools:
                    raise DocumentError(file, f"tools[{i}]", f"a second tool named {t.name!r}")
                tools[t.name] = t

        runtime: ServerRuntime | None = None
        if spec.server is not None:
            runtime, server_tools, infos, rows = server_part(spec.server, spec.name, base, file)
            started.append(runtime)
            collections.update(infos)
            records.update(rows)
            tools.update(server_tools)

        workspace = None
        if spec.workspace is not None:
            workspace = workspace_part(spec, base, file, collections, records, tools)

        children = _load_children(spec, base, file, started)
        roles = list(spec.role_names)
        access = list(spec.access)
        triggers = list(spec.triggers.triggers)
        clock = spec.clock
        for alias, child in children:
            for name, info in compose.child_collections(alias, child.seed.infos()).items():
                collections[name] = info
            for name, rows in child.seed.to_dict().items():
                records[compose.namespaced(alias, name)] = rows
            for child_tool in child.tools.values():
                served = compose.namespaced(alias, child_tool.name)
                if served in tools:
                    raise DocumentError(
                        file,
                        "compose",
                        f"tool {served!r} of child {alias!r} clashes with {tools[served].source!r} "
                        "(rename one, or give the child another 'as')",
                    )
                tools[served] = compose.child_tool(alias, child_tool)
            roles += [r for r in child.roles if r not in roles]
            access = compose.child_access(alias, child.access) + access
            triggers += compose.child_triggers(alias, child.triggers, child.roles)
            if clock.start is None and child.clock.start is not None:
                clock = child.clock
        registration = spec.triggers.model_copy(update={"triggers": triggers})

        for name, rows in spec.seed.items():
            records[name] = list(rows)  # type: ignore[arg-type]
        try:
            state = State.from_records(records, collections)
        except StateError as exc:
            raise DocumentError(file, "seed", str(exc)) from None

        for i, rule in enumerate(spec.access):
            if spec.strict_roles and rule.role not in ("*", "default") and rule.role not in roles:
                raise DocumentError(
                    file,
                    f"access[{i}].role",
                    f"unknown role {rule.role!r} (roles: {', '.join(roles)})",
                )
            for j, tool_name in enumerate([] if rule.tools == "*" else rule.tools):
                if not _names_tools(tool_name, tools):
                    raise DocumentError(
                        file, f"access[{i}].tools[{j}]", f"unknown tool {tool_name!r}"
                    )
        for tool_ in tools.values():
            for role in tool_.roles or ():
                if role not in roles:
                    raise DocumentError(
                        file,
                        f"tools.{tool_.name}.roles",
                        f"unknown role {role!r} (roles: {', '.join(roles)})",
                    )
        descriptions = {r: d for _, c in children for r, d in c.role_descriptions.items()}
        descriptions.update({r.name: r.description for r in spec.roles})
        return cls(
            name=spec.name,
            version=spec.version,
            description=spec.description,
            roles=tuple(roles),
            default_role=spec.default_role or roles[0],
            role_descriptions=descriptions,
            tools=tools,
            seed=state.snapshot(),
            clock=clock,
            triggers=registration,
            access=tuple(access),
            strict_roles=spec.strict_roles,
            gateway_mode=spec.gateway_mode,
            source=Path(file) if file else None,
            children=tuple(children),
            server=runtime,
            workspace=workspace,
        )

    @classmethod
    def from_class(
        cls,
        target: type,
        *,
        name: str | None = None,
        roles: list[str] | None = None,
        clock: ClockSpec | None = None,
        description: str | None = None,
    ) -> Environment:
        """An environment straight from a Python class, with no document."""
        spec = EnvironmentSpec.model_validate(
            {
                "apiVersion": "agentenv/v1",
                "kind": "Environment",
                "name": name or target.__name__,
                "description": description or inspect.getdoc(target) or "",
                "roles": [RoleSpec(name=r) for r in roles or ["default"]],
                "clock": clock or ClockSpec(),
            }
        )
        return cls.from_spec(spec, target_class=target)


_LOADING: ContextVar[frozenset[Path]] = ContextVar("agentenv_loading", default=frozenset())


def _load_children(
    spec: EnvironmentSpec, base: Path, file: Any, started: list[ServerRuntime]
) -> list[tuple[str, Environment]]:
    """Load the `compose:` children, refusing a document that composes itself. Each child's
    server runtimes go into `started` (stopped if the whole load fails)."""
    children: list[tuple[str, Environment]] = []
    for i, entry in enumerate(spec.compose):
        if entry.server is not None:
            child = _server_child(entry.server, entry.as_ or "", spec, base, file, f"compose[{i}]")
            started += [rt for _, rt in child.runtimes()]
            _add_child(children, entry.as_ or "", child, file, i, spec)
            continue
        assert entry.env is not None
        where = f"compose[{i}].env"
        try:
            child_file = find_environment_file(base / entry.env).resolve()
        except DocumentError as exc:
            raise DocumentError(file, where, exc.problem) from None
        loading = _LOADING.get() | ({Path(file).resolve()} if file else set())
        if child_file in loading:
            raise DocumentError(file, where, f"{entry.env!r} composes itself (a cycle)")
        token = _LOADING.set(loading)
        try:
            child = Environment.load(child_file)
        finally:
            _LOADING.reset(token)
        started += [rt for _, rt in child.runtimes()]
        alias = entry.as_ or child.name
        if SEPARATOR in alias or not alias.replace("-", "").replace("_", "").isalnum():
            raise DocumentError(file, where, f"{alias!r} cannot be a namespace; set 'as'")
        _add_child(children, alias, child, file, i, spec)
    return children


def _add_child(
    children: list[tuple[str, Environment]],
    alias: str,
    child: Environment,
    file: Any,
    i: int,
    spec: EnvironmentSpec,
) -> None:
    """Add a loaded child, refusing a namespace another child has (naming both)."""
    for j, (taken, _) in enumerate(children):
        if alias == taken:
            first = spec.compose[j]
            what = first.env if first.env is not None else "a server"
            raise DocumentError(
                file,
                f"compose[{i}]",
                f"a second child named {alias!r} (compose[{j}], {what}, has that name; "
                "their tools would clash): give one an 'as'",
            )
    children.append((alias, child))


def _server_child(
    server: ServerSpec, alias: str, parent: EnvironmentSpec, base: Path, file: Any, where: str
) -> Environment:
    """A `compose:` entry with `server:`: a process environment named by its `as`. It has no
    roles of its own, so it takes the parent's (and adds no implicit `default` role)."""
    child_spec = EnvironmentSpec.model_validate(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": alias,
            "server": server,
            "roles": parent.roles,
        }
    )
    try:
        return Environment.from_spec(child_spec, file)
    except DocumentError as exc:
        raise DocumentError(file, f"{where}.{exc.path}", exc.problem) from None


def _names_tools(name: str, tools: dict[str, Tool]) -> bool:
    """Whether an access rule's tool name (or `prefix*`) addresses any tool."""
    if name.endswith("*") and len(name) > 1:
        return any(t.startswith(name[:-1]) for t in tools)
    return name in tools or name == "get_time"


def _tools_of(
    tspec: ToolSpec, spec: EnvironmentSpec, base: Path, file: Any, where: str
) -> list[Tool]:
    overrides = {
        "description": tspec.description,
        "roles": tspec.roles,
        "kind": tspec.kind,
        "duration": tspec.duration,
        "timeout": tspec.timeout,
        "hidden_by_default": tspec.hidden_by_default,
    }
    if tspec.crud is not None:
        crud_tool = build_crud_tool(tspec, spec.state[tspec.crud.collection])
        return [crud_tool.with_options(hidden_by_default=tspec.hidden_by_default)]
    if tspec.function is not None:
        fn = _resolve(tspec.function, base, file, f"{where}.function")
        if not callable(fn):
            raise DocumentError(file, f"{where}.function", f"{tspec.function!r} is not callable")
        return [_from_function(fn, file, where, name=tspec.name, **overrides)]
    module = _import(tspec.module or "", base, file, f"{where}.module")
    found = [
        obj
        for obj in vars(module).values()
        if callable(obj)
        and tool_options(obj) is not None
        and getattr(obj, "__module__", None) == module.__name__
    ]
    if not found:
        raise DocumentError(file, f"{where}.module", f"no @tool functions in {tspec.module!r}")
    return [_from_function(fn, file, where, **overrides) for fn in found]


def _from_function(fn: Any, file: Any, where: str, **overrides: Any) -> Tool:
    try:
        built = Tool.from_function(fn, **{k: v for k, v in overrides.items() if v is not None})
    except (TypeError, ValueError) as exc:
        raise DocumentError(file, where, f"cannot make a tool of {fn.__name__!r}: {exc}") from None
    if not set(built.name) <= _NAME_OK:
        raise DocumentError(file, where, f"tool name {built.name!r} has characters MCP forbids")
    return built


def _resolve(ref: str, base: Path, file: Any, where: str) -> Any:
    module_ref, sep, attr = ref.rpartition(":")
    if not sep or not module_ref or not attr:
        raise DocumentError(file, where, f"expected 'file.py:name' or 'module:name', got {ref!r}")
    module = _import(module_ref, base, file, where)
    try:
        target: Any = module
        for part in attr.split("."):
            target = getattr(target, part)
    except AttributeError:
        raise DocumentError(file, where, f"{module_ref!r} has no {attr!r}") from None
    return target


_MODULES: dict[Path, ModuleType] = {}


def _import(ref: str, base: Path, file: Any, where: str) -> ModuleType:
    if ref.endswith(".py") or "/" in ref:
        path = (base / ref).resolve()
        if path in _MODULES:
            return _MODULES[path]
        if not path.is_file():
            raise DocumentError(file, where, f"no file {ref!r} (looked in {base})")
        name = f"agentenv_user_{abs(hash(str(path))):x}_{path.stem}"
        module_spec = importlib.util.spec_from_file_location(name, path)
        assert module_spec is not None and module_spec.loader is not None
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[name] = module
        # Let the file import its sibling modules, as it would if run from its folder.
        sys.path.insert(0, str(path.parent))
        try:
            module_spec.loader.exec_module(module)
        except Exception as exc:
            sys.modules.pop(name, None)
            raise DocumentError(
                file, where, f"importing {ref!r} failed: {type(exc).__name__}: {exc}"
            ) from None
        finally:
            sys.path.remove(str(path.parent))
        _MODULES[path] = module
        return module
    try:
        return importlib.import_module(ref)
    except ImportError as exc:
        raise DocumentError(file, where, f"cannot import {ref!r}: {exc}") from None


def load_environment(path: str | Path) -> Environment:
    """Load an environment from a document file or the folder holding one."""
    return Environment.load(path)
