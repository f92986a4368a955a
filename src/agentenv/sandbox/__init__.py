"""Where commands run: sandbox providers behind one interface (docs/sandboxes.md).

`sandbox_provider("bwrap").create(SandboxLimits(timeout=10))` makes a sandbox; `exec`
runs commands in its workspace; `copy_in`, `copy_out`, `snapshot`, `destroy`. Providers:
`local` (a subprocess in a private folder with rlimits), `bwrap` (bubblewrap) and `docker`
(a container, where a daemon answers). This
package knows nothing above it (no gateway, no environments).
"""

from agentenv.sandbox.base import (
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxProvider,
)
from agentenv.sandbox.bwrap import BwrapProvider, BwrapSandbox
from agentenv.sandbox.docker import DockerProvider, DockerSandbox
from agentenv.sandbox.local import LocalProvider, LocalSandbox
from agentenv.sandbox.registry import SANDBOXES, sandbox_provider

__all__ = [
    "SANDBOXES",
    "BwrapProvider",
    "BwrapSandbox",
    "DockerProvider",
    "DockerSandbox",
    "ExecResult",
    "LocalProvider",
    "LocalSandbox",
    "Sandbox",
    "SandboxError",
    "SandboxLimits",
    "SandboxProvider",
    "sandbox_provider",
]
