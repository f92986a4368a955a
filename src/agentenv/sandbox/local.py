"""The `local` sandbox: a subprocess in a private work folder, within rlimits.

Commands run on this machine as this user, in a fresh temporary folder, with a minimal
environment (PATH, LANG, HOME = the workspace; nothing of ours), rlimits on CPU time,
address space, processes and file size, a wall-clock timeout that kills the whole process
group, and output kept up to a cap. It is a work folder, not a wall: a command can still
read the host's files and reach the network. Use `bwrap` where that matters.
"""

from __future__ import annotations

import shutil
import tempfile
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


def fresh_workspace(seed: str | Path | None) -> Path:
    """A new private folder, holding a copy of `seed` when given one."""
    folder = Path(tempfile.mkdtemp(prefix="agentenv-sandbox-"))
    if seed is not None:
        source = Path(seed)
        if not source.is_dir():
            shutil.rmtree(folder, ignore_errors=True)
            raise SandboxError(f"workspace {str(seed)!r}: no such folder")
        shutil.copytree(source, folder, symlinks=True, dirs_exist_ok=True)
    return folder


def argv_of(command: Sequence[str] | str, cwd: Path, path: str) -> list[str]:
    """An argv list (a string is run by `sh -c`) whose program exists: on `path` (the
    command's PATH), or as a file relative to `cwd`; SandboxError otherwise."""
    if isinstance(command, str):
        return ["/bin/sh", "-c", command]
    argv = list(command)
    if not argv:
        raise SandboxError("an empty command")
    program = argv[0]
    found = (cwd / program).is_file() if "/" in program else shutil.which(program, path=path)
    if not found:
        raise SandboxError(f"cannot start {program!r}: no such program")
    return argv


class LocalSandbox(Sandbox):
    """A work folder on this machine."""

    @property
    def workdir(self) -> str:
        """The workspace folder itself."""
        return str(self.workspace)

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run a command in the work folder (see `Sandbox.exec`)."""
        self._check_live()
        folder = inside(self.workspace, cwd or ".")
        variables = base_env(self.workdir, env)
        return await run_limited(
            self._wrap(argv_of(command, folder, variables["PATH"]), str(folder)),
            cwd=str(folder),
            env=variables,
            limits=self.limits,
            timeout=timeout,
            stdin=stdin,
        )

    def _wrap(self, argv: list[str], cwd: str) -> list[str]:
        """The argv to spawn for `argv` run in `cwd` (a provider that wraps commands, such
        as bwrap, says how); here, `argv` itself."""
        return argv


class LocalProvider(SandboxProvider):
    """`local`: a subprocess in a private work folder, with rlimits and output caps."""

    name = "local"

    def create(
        self,
        limits: SandboxLimits | None = None,
        *,
        workspace: str | Path | None = None,
        network: bool = False,
        workdir: str | None = None,
        mounts: Mapping[str, str | Path] | None = None,
    ) -> LocalSandbox:
        """A fresh work folder (a copy of `workspace`). `network` is not enforced here, and
        commands see the folder at its own path: `workdir` and `mounts` are refused."""
        if workdir is not None or mounts:
            wanted = ", ".join([p for p in [workdir] if p] + sorted(mounts or {}))
            raise SandboxError(
                f"the local sandbox cannot place folders at fixed paths ({wanted}); "
                "use the bwrap (or docker) provider"
            )
        return LocalSandbox(
            self.name, fresh_workspace(workspace), limits or SandboxLimits(), network
        )
