"""The `bwrap` sandbox: bubblewrap (Debian's `bubblewrap` package) around each command.

Each command runs in new namespaces: the host's root read-only (each top-level folder bound
on its own, so that new mount points such as `/app` can be made in the sandbox's root), the
workspace read-write at its own path or at `workdir` (its working folder), any `mounts`
read-write at theirs, a private `/tmp`, `/proc` and a minimal `/dev`; no
network unless the sandbox was made with `network=True`; its own PID namespace (it sees
only its own processes); no capabilities; a new session (no terminal injection); killed if
we die (`--die-with-parent`). The `local` limits apply on top (rlimits, timeout, output
cap). The folder under the workspace lives on this machine, so `copy_in`, `copy_out` and
`snapshot` are plain file copies.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
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


_NOT_BOUND = frozenset({"proc", "dev", "sys", "tmp", "lost+found"})


def _host_root() -> list[str]:
    """bwrap arguments that show the host's top-level folders read-only (and its top-level
    symlinks, such as `/bin -> usr/bin`, as the same links)."""
    args: list[str] = []
    for entry in sorted(os.listdir("/")):
        if entry in _NOT_BOUND:
            continue
        path = f"/{entry}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path) or os.path.isfile(path):
            args += ["--ro-bind", path, path]
    return args


class BwrapSandbox(LocalSandbox):
    """A workspace whose commands run inside bubblewrap: the local `exec`, each command
    wrapped by `_wrap`."""

    def __init__(
        self,
        provider: str,
        workspace: Path,
        limits: SandboxLimits,
        network: bool,
        inside_path: str | None = None,
        mounts: Mapping[str, str | Path] | None = None,
    ) -> None:
        super().__init__(provider, workspace, limits, network)
        self._inside = inside_path or str(workspace)
        self.mounts = {k: Path(v) for k, v in (mounts or {}).items()}
        """Host folders bound read-write inside, by their inside path."""

    @property
    def workdir(self) -> str:
        """Where commands see the workspace: `workdir` as created, else its own path."""
        return self._inside

    def _inside_cwd(self, folder: Path) -> str:
        relative = folder.relative_to(self.workspace.resolve())
        return str(Path(self._inside) / relative) if relative.parts else self._inside

    def _wrap(self, argv: list[str], cwd: str) -> list[str]:
        program = bwrap_path() or "bwrap"
        wrapper = [
            program,
            *_host_root(),
            "--dev", "/dev",
            "--proc", "/proc",
            "--tmpfs", "/tmp",
            "--bind", str(self.workspace), self._inside,
        ]  # fmt: skip
        for inside_path, host in self.mounts.items():
            wrapper += ["--bind", str(host), inside_path]
        wrapper += [
            "--chdir", self._inside_cwd(Path(cwd)),
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
        workdir: str | None = None,
        mounts: Mapping[str, str | Path] | None = None,
    ) -> BwrapSandbox:
        """A fresh workspace (a copy of `workspace`) for bubblewrapped commands, seen at
        `workdir` inside (else its own path), with `mounts` bound at their paths."""
        reason = self.unavailable()
        if reason is not None:
            raise SandboxError(f"the bwrap sandbox cannot run here: {reason}")
        for where in [workdir, *(mounts or {})]:
            if where is not None and (not where.startswith("/") or where in ("/", "/tmp")):
                raise SandboxError(f"{where!r}: an inside path must be absolute, not / or /tmp")
        for host in (mounts or {}).values():
            if not Path(host).is_dir():
                raise SandboxError(f"{str(host)!r}: no such folder to mount")
        return BwrapSandbox(
            self.name,
            fresh_workspace(workspace),
            limits or SandboxLimits(),
            network,
            workdir,
            mounts,
        )
