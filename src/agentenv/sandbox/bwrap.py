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
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentenv.sandbox._process import base_env, run_limited
from agentenv.sandbox.base import (
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxProvider,
    inside,
)
from agentenv.sandbox.local import argv_of, fresh_workspace


def bwrap_path() -> str | None:
    """The bubblewrap program, if installed."""
    return shutil.which("bwrap")


class BwrapSandbox(Sandbox):
    """A workspace whose commands run inside bubblewrap."""

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

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run a command inside bubblewrap (see `Sandbox.exec`)."""
        self._check_live()
        folder = inside(self.workspace, cwd or ".")
        variables = base_env(str(self.workspace), env)
        return await run_limited(
            self._wrap(argv_of(command, folder, variables["PATH"]), str(folder)),
            cwd=str(self.workspace),
            env=variables,
            limits=self.limits,
            timeout=timeout,
            stdin=stdin,
        )


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
