"""The backend interface: how a server environment's processes are started and talked to.

A `ServerBackend` knows one way of reaching a server (stdio, Streamable HTTP, an AgentEnv
environment server, an upstream folder); `start()` gives a `Child`: one live, initialised
connection (one persistent MCP session) to one server. The runtime (`runtime.py`) and the
pool (`pool.py`) decide how many children there are and which instance uses which; the
tools (`tools.py`) turn the child's tool list into our `Tool`s. Everything here runs on the
children's event loop (`loop.py`), never on a caller's.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from agentenv.spec.server import ServerSpec

ROLE_META_KEY = "agentenv.io/role"
"""The MCP `_meta` key a gateway forwards the caller's role in (upstream's name)."""
SESSION_META_KEY = "agentenv.io/session"
"""The MCP `_meta` key a gateway forwards the caller's session in (upstream's name)."""


class ServerError(Exception):
    """A server could not be started, reached or understood. The message names the
    document (where known), the command or URL, and what failed (with the last lines of
    the server's stderr where there are any)."""


class DataMethodMissing(ServerError):
    """The server's data plane does not implement the method (JSON-RPC -32601): upstream
    environments that define no data handlers answer `data/get` so."""


class ChildGone(ServerError):
    """The child died or its connection broke during a request. `reached` says whether the
    request may have reached it (then it is never retried: it may have acted)."""

    def __init__(self, message: str, *, reached: bool) -> None:
        super().__init__(message)
        self.reached = reached


@dataclass(frozen=True)
class ToolListing:
    """One tool as the server lists it (MCP `tools/list`)."""

    name: str
    description: str
    input_schema: dict[str, Any]
    annotations: dict[str, Any] | None = None
    meta: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolAnswer:
    """What a server answered to `tools/call`, in MCP's terms."""

    content: list[dict[str, Any]]
    structured: Any = None
    is_error: bool = False


@dataclass
class Child(ABC):
    """One live connection to one server: its MCP session, its card and data plane (if it
    is an AgentEnv server), and the process behind it (if we started one)."""

    label: str
    """How messages name it: the command line or URL, and the pid where there is one."""
    card: dict[str, Any] | None = None
    """The server's AgentEnv card (`/.well-known/agent-env.json`) as JSON, if it has one."""
    base_url: str | None = None
    """HTTP children: the server's base URL (its `/svc` proxy target)."""
    log_path: Path | None = None
    """Where the process's stderr goes (None for servers we did not start)."""
    workspace: Path | None = None
    """The folder made for this process (`{workspace}`), removed when it closes."""
    extra: dict[str, Any] = field(default_factory=dict)
    clock_url: str | None = None
    """The `env_get_time_url` this child was synced with (clock.py), once it was."""
    used: bool = False
    """Whether anything that could change the server was sent to it (a tool call, a data
    request, a clock sync): an unused child is as clean as a fresh one, so a `process`
    pool may hand it to the next instance instead of stopping it."""

    @property
    def has_data_plane(self) -> bool:
        """Whether `data/*` can be sent to it (its card names a data-plane URL)."""
        return bool(self.card and self.card.get("url"))

    @property
    @abstractmethod
    def alive(self) -> bool:
        """Whether the process runs and the session is open."""

    @abstractmethod
    async def list_tools(self) -> list[ToolListing]:
        """Every tool the server lists (all pages)."""

    @abstractmethod
    async def call_tool(
        self, name: str, arguments: dict[str, Any], meta: dict[str, Any] | None, timeout: float
    ) -> ToolAnswer:
        """Call a tool with `_meta` (role, session). ChildGone when the connection breaks;
        TimeoutError past `timeout`."""

    async def data(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """A data-plane JSON-RPC request (`data/reset`, `data/add`, `data/get`): its result.
        ServerError when the server has no data plane or answers an error."""
        raise ServerError(f"{self.label} has no data plane")

    @abstractmethod
    async def close(self) -> None:
        """End the session and stop the process (terminate, then kill); idempotent."""

    def stderr_tail(self, lines: int = 20) -> str:
        """The last lines of the process's stderr, for error messages ('' if none)."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        with self.log_path.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 16384))
            text = f.read().decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])


class ServerBackend(ABC):
    """One way of reaching a server; registered by `name` (`registry.BACKENDS`)."""

    name: ClassVar[str]
    starts_processes: ClassVar[bool] = True
    """Whether `start` makes a new process (then instances may each have one)."""

    def __init__(self, spec: ServerSpec, base: Path, document: Path | None) -> None:
        self.spec = spec
        self.base = base
        """The folder relative paths in the spec are read from."""
        self.document = document
        """The document that declared it, for error messages."""

    @abstractmethod
    def describe(self) -> str:
        """The command line or URL, for messages and the card."""

    @abstractmethod
    async def start(self, log_dir: Path) -> Child:
        """Start (or connect to) one server and initialise its MCP session; ServerError
        naming what failed, with nothing left running. Logs go under `log_dir`."""

    async def prepare(self) -> None:  # noqa: B027 - optional hook, empty by default
        """Work done once before the first start (a folder's virtualenv); default none."""
