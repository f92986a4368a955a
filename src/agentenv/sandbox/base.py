"""What every sandbox provider offers: a `Sandbox` (a workspace folder and a way to run
commands in it) made by a `SandboxProvider`, with the limits and results as data.

Lifecycle: `provider.create(limits, workspace=..., network=...)` makes one (copying a seed
folder into a fresh workspace when given one; `workdir=` and `mounts=` place the workspace
and extra host folders at fixed paths inside, where the provider can); `exec` runs a command in it, as many times as
wanted; `copy_in`/`copy_out` move files across its boundary; `snapshot` copies the workspace
out; `destroy` removes it (idempotent; also what leaving `with sandbox:` does). Paths given
to a sandbox are relative to its workspace, and one that resolves outside it (`..`, an
absolute path elsewhere, a symlink out) is a `SandboxError`.
"""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field


class SandboxError(Exception):
    """A sandbox cannot be made or used (a missing provider, a path outside it, ...)."""


class SandboxLimits(BaseModel):
    """What one command may use. Hitting a limit ends or truncates that command, never the
    caller: the result says which limit was hit."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    timeout: float = Field(default=60.0, gt=0, description="Wall-clock seconds per command.")
    cpu_seconds: int = Field(default=60, gt=0, description="CPU seconds per process (RLIMIT_CPU).")
    memory_mb: int = Field(
        default=2048, gt=0, description="Address space per process, MiB (RLIMIT_AS)."
    )
    processes: int = Field(
        default=256,
        gt=0,
        description="Processes and threads of the sandbox's user (RLIMIT_NPROC; a fork bomb "
        "stops here).",
    )
    file_size_mb: int = Field(
        default=1024, gt=0, description="Largest file a command may write, MiB (RLIMIT_FSIZE)."
    )
    output_bytes: int = Field(
        default=1_000_000, gt=0, description="stdout and stderr kept per command, each."
    )


class ExecResult(BaseModel):
    """What a command did."""

    exit_code: int | None = Field(description="None when it was killed at its timeout.")
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = Field(default=False, description="Output was cut at `output_bytes`.")
    duration_s: float

    @property
    def ok(self) -> bool:
        """Whether it ran to the end and exited 0."""
        return self.exit_code == 0 and not self.timed_out


def inside(root: Path, path: str | Path) -> Path:
    """`path` (relative to `root`, or absolute) resolved, symlinks followed; SandboxError
    when it leaves `root`."""
    root = root.resolve()
    candidate = Path(path)
    target = (candidate if candidate.is_absolute() else root / candidate).resolve()
    if target != root and root not in target.parents:
        raise SandboxError(f"{str(path)!r} is outside the sandbox's workspace")
    return target


class Sandbox(ABC):
    """One sandbox: a private workspace folder and the commands run in it."""

    def __init__(self, provider: str, workspace: Path, limits: SandboxLimits, network: bool):
        self.provider = provider
        self.workspace = workspace
        """The workspace folder on this machine (what `copy_in`/`copy_out` read and write)."""
        self.limits = limits
        self.network = network
        self.destroyed = False

    @property
    @abstractmethod
    def workdir(self) -> str:
        """The workspace's path as commands inside see it (their default working folder)."""

    @abstractmethod
    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run `command` (an argv list, or a string for `sh -c`) in the workspace (`cwd` is
        relative to it), with `env` on top of a minimal environment, within the limits
        (`timeout` overrides theirs). Never raises for what the command does."""

    def copy_in(self, source: str | Path, dest: str = ".") -> Path:
        """Copy a file or folder from this machine into the workspace; the copy's path."""
        self._check_live()
        source = Path(source)
        if not source.exists():
            raise SandboxError(f"{source}: no such file or folder to copy in")
        target = inside(self.workspace, dest)
        if target.is_dir():
            target = target / source.name
        inside(self.workspace, target)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
        return target

    def copy_out(self, source: str, dest: str | Path) -> Path:
        """Copy a file or folder of the workspace to this machine; the copy's path."""
        self._check_live()
        path = inside(self.workspace, source)
        if not path.exists():
            raise SandboxError(f"{source!r}: no such file or folder in the sandbox")
        dest = Path(dest)
        if path.is_dir():
            shutil.copytree(path, dest, symlinks=True, dirs_exist_ok=True)
        else:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)
        return dest

    def snapshot(self, dest: str | Path) -> Path:
        """The whole workspace copied to `dest` (symlinks kept as links)."""
        return self.copy_out(".", dest)

    def destroy(self) -> None:
        """Remove the workspace; the sandbox cannot be used after (idempotent)."""
        if not self.destroyed:
            self.destroyed = True
            shutil.rmtree(self.workspace, ignore_errors=True)

    def _check_live(self) -> None:
        if self.destroyed:
            raise SandboxError(f"the {self.provider} sandbox was destroyed")

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy()


class SandboxProvider(ABC):
    """A kind of sandbox, registered by `name` (`registry.SANDBOXES`)."""

    name: ClassVar[str]

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this provider cannot run on this machine (None: it can)."""
        return None

    @abstractmethod
    def create(
        self,
        limits: SandboxLimits | None = None,
        *,
        workspace: str | Path | None = None,
        network: bool = False,
        workdir: str | None = None,
        mounts: Mapping[str, str | Path] | None = None,
    ) -> Sandbox:
        """A new sandbox whose workspace starts as a copy of `workspace` (or empty).
        `network`: whether commands may reach the network (where the provider can refuse it).
        `workdir`: the absolute path commands see the workspace at (`/app`), and `mounts`:
        host folders bound read-write at inside paths (`{"/logs": ...}`); a provider that
        cannot place them (`local`) raises SandboxError."""
