"""Server backends by name: `BACKENDS`, and `backend_for` (the factory the runtime calls).

Built-ins: `stdio` (`command`), `http` (an MCP server at a `url`), `agentenv` (an AgentEnv
environment server at a `url`) and `folder` (an upstream env folder). Plugins add more
through the entry-point group `agentenv.env_backends` or `env_backends = ["module:Class"]`
in agentenv.toml; built-in names win.

A `url` with no `backend:` is decided when it starts (`AutoUrlBackend`): if
`<url>/.well-known/agent-env.json` answers 200 with a JSON object (the URL given as a base
URL, or with a trailing `/mcp` removed), the server is an AgentEnv environment server and
gets the `agentenv` backend (card, data plane, extensions); otherwise it is a plain MCP
server and gets `http`. Say `backend: agentenv` or `backend: http` to skip the probe.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import httpx2

from agentenv.env.servers.agentenv import CARD_PATH, AgentEnvBackend
from agentenv.env.servers.base import Child, ServerBackend, ServerError
from agentenv.env.servers.http import HttpBackend, request_headers
from agentenv.env.servers.stdio import StdioBackend
from agentenv.registry import Registry, RegistryError
from agentenv.spec.server import ServerSpec

BACKENDS: Registry[type[ServerBackend]] = Registry(
    kind="env backend",
    group="agentenv.env_backends",
    config_key="env_backends",
    name_of=lambda cls: cls.name,
)
"""Every server backend class, by its `name`."""

BACKENDS.add_builtin(StdioBackend)
BACKENDS.add_builtin(HttpBackend)
BACKENDS.add_builtin(AgentEnvBackend)


def _folder_backend() -> type[ServerBackend] | None:
    """The folder backend, imported late: its module may not exist in every checkout."""
    try:
        module = importlib.import_module("agentenv.env.servers.folder")
    except ImportError:
        return None
    return getattr(module, "FolderBackend", None)


if (_folder := _folder_backend()) is not None:
    BACKENDS.add_builtin(_folder, "folder")


def card_base(url: str) -> str:
    """The base URL a card is probed under: `url` without a trailing `/mcp`."""
    url = url.rstrip("/")
    return url[: -len("/mcp")] if url.endswith("/mcp") else url


async def has_card(url: str, headers: dict[str, str], timeout: float) -> bool:
    """Whether `<base>/.well-known/agent-env.json` answers 200 with a JSON object."""
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=timeout) as client:
            answer = await client.get(card_base(url) + CARD_PATH)
        return answer.status_code == 200 and isinstance(answer.json(), dict)
    except (httpx2.HTTPError, ValueError):
        return False


class AutoUrlBackend(ServerBackend):
    """A `url` with no `backend:`: `agentenv` when the server has a card, else `http`
    (decided at the first start, kept after)."""

    name = "url"
    starts_processes = False

    def __init__(self, spec: ServerSpec, base: Path, document: Path | None) -> None:
        super().__init__(spec, base, document)
        self.chosen: ServerBackend | None = None

    def describe(self) -> str:
        """The URL."""
        return self.spec.url or ""

    async def start(self, log_dir: Path) -> Child:
        """Probe the card once, then start through the chosen backend."""
        if self.chosen is None:
            url = self.describe()
            probe = await has_card(
                url, request_headers(self.spec), min(self.spec.startup_timeout, 10)
            )
            if probe:
                spec = self.spec.model_copy(update={"url": card_base(url)})
                self.chosen = AgentEnvBackend(spec, self.base, self.document)
            else:
                self.chosen = HttpBackend(self.spec, self.base, self.document)
        return await self.chosen.start(log_dir)


def backend_names() -> list[str]:
    """Every backend name (built-ins, folder where installed, plugins)."""
    names = BACKENDS.names()
    if "folder" not in names and _folder_backend() is not None:
        names.insert(3, "folder")
    return names


def backend_for(spec: ServerSpec, base: Path, document: Path | None) -> ServerBackend:
    """The backend that serves `spec` (by `spec.backend_name`; a `url` without `backend:`
    probes its card at start, see the module's docstring). ServerError listing the names
    for an unknown backend."""
    name = spec.backend_name
    if spec.backend is None and spec.url is not None:
        return AutoUrlBackend(spec, base, document)
    cls: Any
    if name == "folder" and not BACKENDS.is_builtin("folder"):
        folder = _folder_backend()
        if folder is not None:
            BACKENDS.add_builtin(folder, "folder")
    try:
        cls = BACKENDS.get(name)
    except RegistryError:
        where = f"{document}: " if document else ""
        raise ServerError(
            f"{where}server.backend: unknown env backend {name!r} "
            f"(known: {', '.join(backend_names())})"
        ) from None
    return cls(spec, base, document)
