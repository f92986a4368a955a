"""The parts a document's backend adds to an environment as it loads: a process
environment's server (its runtime, tools and mirrored records) and a workspace's tree
(its records and built-in tools). `Environment.from_spec` puts them together."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentenv.env.tool import Tool
from agentenv.spec.environment import EnvironmentSpec
from agentenv.spec.errors import DocumentError
from agentenv.state import CollectionInfo

if TYPE_CHECKING:
    from agentenv.env.servers.runtime import ServerRuntime
    from agentenv.spec.server import ServerSpec
    from agentenv.workspace import Workspace


def server_part(
    server: ServerSpec, name: str, base: Path, file: Any
) -> tuple[ServerRuntime, dict[str, Tool], dict[str, CollectionInfo], dict[str, list[Any]]]:
    """Start a process environment's first server and discover it: its runtime, tools, and
    (where it has a data plane) the collections and records of its data."""
    from agentenv.env.servers.base import ServerError
    from agentenv.env.servers.mirror import seed_records
    from agentenv.env.servers.runtime import ServerRuntime
    from agentenv.env.servers.tools import remote_tools

    document = Path(file) if file else None
    try:
        runtime = ServerRuntime(server, base, document, name)
    except ServerError as exc:
        raise DocumentError(file, "server", str(exc)) from None
    try:
        listings = runtime.discover()
    except ServerError as exc:
        runtime.close()
        raise DocumentError(file, "server", str(exc)) from None
    try:
        tools = remote_tools(runtime, listings)
    except BaseException:
        runtime.close()
        raise
    infos, rows = seed_records({"parts": runtime.parts or []})
    return runtime, tools, infos, rows


def workspace_part(
    spec: EnvironmentSpec,
    base: Path,
    file: Any,
    collections: dict[str, CollectionInfo],
    records: dict[str, list[dict[str, Any]]],
    tools: dict[str, Tool],
) -> Workspace:
    """Read a workspace environment's seed tree into `records` (one collection, keyed by
    path) and add its built-in tools."""
    from agentenv.sandbox import SandboxError
    from agentenv.workspace import Workspace, WorkspaceError, workspace_tools

    assert spec.workspace is not None
    try:
        workspace = Workspace(spec.workspace, base)
    except (WorkspaceError, SandboxError) as exc:
        where = "workspace.sandbox" if isinstance(exc, SandboxError) else "workspace.seed"
        raise DocumentError(file, where, str(exc)) from None
    collections[workspace.collection] = CollectionInfo.create("path", None)
    records[workspace.collection] = workspace.seed
    for built in workspace_tools(workspace):
        if built.name in tools:
            raise DocumentError(
                file, f"workspace.tools.{built.name}", f"a second tool named {built.name!r}"
            )
        tools[built.name] = built
    return workspace
