"""The `bwrap` sandbox: bubblewrap (Debian's `bubblewrap` package) around each command.

Each command runs in new namespaces: the host's root read-only, the workspace read-write at
its own path (its working folder; a fresh folder under the private `/tmp`), a private `/tmp`, `/proc` and a minimal `/dev`; no
network unless the sandbox was made with `network=True`; its own PID namespace (it sees
only its own processes); no capabilities; a new session (no terminal injection); killed if
we die (`--die-with-parent`). The `local` limits apply on top (rlimits, timeout, output
cap). The folder under the workspace lives on this machine, so `copy_in`, `copy_out` and
`snapshot` are plain file copies.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from agentenv.sandbox.base import (
    SandboxError,
    SandboxLimits,
    SandboxProvider,
)
from agentenv.sandbox.local import LocalSandbox, fresh_workspace


def bwrap_path() -> str | None:
    """The bubblewrap program, if installed."""
    return shutil.which("bwrap")


class BwrapSandbox(LocalSandbox):
    """A workspace whose commands run inside bubblewrap: the local `exec`, each command
    wrapped by `_wrap`."""

    @property
    def workdir(self) -> str:
        """The workspace's own path (bound read-write over the private `/tmp`)."""
        return str(self.workspace)

    def _wrap(self, argv: list[str], cwd: str) -> list[str]:
        program = bwrap_path() or "bwrap"
        wrapper = [
            program,
            "--ro-bind", "/", "/",
            "--dev", "/dev",
            "--proc", "/proc",
            "--tmpfs", "/tmp",
            "--bind", str(self.workspace), str(self.workspace),
            "--chdir", cwd,
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop", "ALL",
        ]  # fmt: skip
        if self.network:
            wrapper.append("--share-net")
        return [*wrapper, "--", *argv]


class BwrapProvider(SandboxProvider):
    """`bwrap`: bubblewrap namespaces around each command: read-only host, read-write
    workspace, no network unless asked, own PID namespace, dies with its parent."""

    name = "bwrap"

    @classmethod
    def unavailable(cls) -> str | None:
        """Without bubblewrap on PATH: how to install it."""
        if bwrap_path() is None:
            return "bubblewrap is not installed (apt-get install bubblewrap)"
        return None

    def create(
        self,
        limits: SandboxLimits | None = None,
        *,
        workspace: str | Path | None = None,
        network: bool = False,
    ) -> BwrapSandbox:
        """A fresh workspace (a copy of `workspace`) for bubblewrapped commands."""
        reason = self.unavailable()
        if reason is not None:
            raise SandboxError(f"the bwrap sandbox cannot run here: {reason}")
        return BwrapSandbox(
            self.name, fresh_workspace(workspace), limits or SandboxLimits(), network
        )
