"""Sandbox providers by name: `SANDBOXES`, and `sandbox_provider(name)`.

Built-ins: `local`, `bwrap` and `docker`. Plugins add more through the entry-point group
`agentenv.sandboxes` (a `SandboxProvider` subclass) or `sandboxes = ["module:Class"]` in
agentenv.toml; built-in names win. `sandbox_type` in a task step names one of these.
"""

from __future__ import annotations

from agentenv.registry import Registry, RegistryError
from agentenv.sandbox.base import SandboxError, SandboxProvider
from agentenv.sandbox.bwrap import BwrapProvider
from agentenv.sandbox.docker import DockerProvider
from agentenv.sandbox.local import LocalProvider

SANDBOXES: Registry[type[SandboxProvider]] = Registry(
    kind="sandbox provider",
    group="agentenv.sandboxes",
    config_key="sandboxes",
    name_of=lambda cls: cls.name,
)
"""Every sandbox provider class, by its `name`."""

SANDBOXES.add_builtin(LocalProvider)
SANDBOXES.add_builtin(BwrapProvider)
SANDBOXES.add_builtin(DockerProvider)


def sandbox_provider(name: str) -> SandboxProvider:
    """The provider called `name`; SandboxError naming the ones we have (and the plugin
    entry point) for any other (`modal`, `e2b`, ...), or saying why it cannot run here."""
    try:
        cls = SANDBOXES.get(name)
    except RegistryError:
        known = ", ".join(SANDBOXES.names())
        raise SandboxError(
            f"no sandbox provider {name!r} (we have: {known}; a plugin adds one through the "
            "entry-point group 'agentenv.sandboxes')"
        ) from None
    reason = cls.unavailable()
    if reason is not None:
        raise SandboxError(f"the {name} sandbox cannot run here: {reason}")
    return cls()
