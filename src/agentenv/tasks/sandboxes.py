"""Sandboxes that task steps deploy (`deploy_sandbox`) or make for a workspace env's tree.

A `DeployedSandbox` gives commands the fixed folders upstream's tasks name: the working
folder `/app` and the roots `/loaded`, `/tests`, `/logs`, `/solution`, `/output` (each a
host folder under one private root). With bwrap they are bound at those paths; with the
`local` provider (no bwrap here) commands run on the host and those paths are rewritten to
the host folders in the commands and paths we are given, as upstream's local sandbox does
for `/app`. Any other absolute path is refused with the roots that exist.

`sandbox_type` names: ours (`local`, `bwrap`, plugins), a comma-separated fallback chain
(the first we can run), and upstream's `local`, which is "this machine": bwrap when it is
installed, else our local provider.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentenv.sandbox import (
    SANDBOXES,
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    sandbox_provider,
)
from agentenv.tasks.step import StepError

WORKDIR = "/app"
ROOTS = (WORKDIR, "/loaded", "/tests", "/logs", "/solution", "/output")
"""The inside folders every deployed sandbox has (the first is its working folder)."""


def provider_for(sandbox_type: str | None) -> str:
    """Our provider for a step's `sandbox_type` (None: this machine)."""
    names = [n.strip() for n in (sandbox_type or "local").split(",") if n.strip()]
    problems: list[str] = []
    for name in names:
        if name == "local" and SANDBOXES.get("bwrap").unavailable() is None:
            return "bwrap"
        try:
            sandbox_provider(name)
        except SandboxError as exc:
            problems.append(str(exc))
            continue
        return name
    raise StepError("; ".join(problems) or "no sandbox_type given")


@dataclass
class DeployedSandbox:
    """A sandbox a task made: its name, our provider, and its host root."""

    name: str
    sandbox: Sandbox
    sandbox_type: str
    root: Path
    destroyed: bool = False
    rewrite: bool = field(default=False, metadata={"doc": "Inside paths are host paths here."})

    @classmethod
    def create(
        cls,
        name: str,
        sandbox_type: str | None,
        limits: SandboxLimits | None = None,
        *,
        network: bool = False,
        workdir: str = WORKDIR,
    ) -> DeployedSandbox:
        """A new sandbox with its roots, `workdir` the working folder."""
        provider = provider_for(sandbox_type)
        root = Path(tempfile.mkdtemp(prefix=f"agentenv-box-{_safe(name)}-"))
        roots = [workdir, *[r for r in ROOTS if r != workdir]]
        for inside in roots[1:]:
            (root / inside.lstrip("/")).mkdir(parents=True, exist_ok=True)
        mounts = {inside: root / inside.lstrip("/") for inside in roots[1:]}
        try:
            if provider == "local":
                sandbox = sandbox_provider(provider).create(limits, network=network)
            else:
                sandbox = sandbox_provider(provider).create(
                    limits, network=network, workdir=workdir, mounts=mounts
                )
        except SandboxError as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise StepError(f"sandbox {name!r}: {exc}") from None
        box = cls(name, sandbox, provider, root, rewrite=provider == "local")
        box._roots = {workdir: sandbox.workspace, **mounts}
        return box

    _roots: dict[str, Path] = field(default_factory=dict, init=False, repr=False)

    @property
    def workdir(self) -> str:
        """The working folder as commands see it."""
        return next(iter(self._roots))

    def host_path(self, path: str, base: str | None = None) -> Path:
        """The host path of an inside path (relative paths are from `base`, else the
        working folder); StepError for a path under none of the roots."""
        if not path.startswith("/"):
            path = f"{(base or self.workdir).rstrip('/')}/{path}"
        for inside, host in self._roots.items():
            if path == inside or path.startswith(inside + "/"):
                rest = path[len(inside) :].lstrip("/")
                target = (host / rest).resolve()
                if target != host.resolve() and host.resolve() not in target.parents:
                    break
                return target
        known = ", ".join(self._roots)
        raise StepError(f"sandbox {self.name!r}: {path!r} is not under its folders ({known})")

    def command(self, command: str) -> str:
        """A command as it runs: on a local sandbox the roots are rewritten to host paths."""
        if not self.rewrite:
            return command
        for inside, host in sorted(self._roots.items(), key=lambda kv: -len(kv[0])):
            command = re.sub(rf"(?<![\w./-]){re.escape(inside)}(?=/|\b|$)", str(host), command)
        return command

    async def run(
        self,
        command: str,
        *,
        cwd: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ExecResult:
        """`bash -c command` in the sandbox, in `cwd` (an inside path; default workdir)."""
        if self.destroyed:
            raise StepError(f"sandbox {self.name!r} was torn down")
        folder = self.host_path(cwd) if cwd else self.sandbox.workspace
        if not folder.is_dir():
            raise StepError(f"sandbox {self.name!r}: no folder {cwd!r}")
        relative = (
            str(folder.relative_to(self.sandbox.workspace.resolve()))
            if _under(folder, self.sandbox.workspace)
            else None
        )
        script = self.command(command) + "\n"
        if relative is None:  # a folder outside the workspace (a root): cd there first
            inside = cwd if not self.rewrite else str(folder)
            script = f"cd {_quote(str(inside))} && ( {script} )"
            relative = "."
        argv: Sequence[str] = ["bash", "-c", script]
        return await self.sandbox.exec(argv, cwd=relative, timeout=timeout, env=env)

    def destroy(self) -> None:
        """Remove the sandbox and its folders (idempotent)."""
        if not self.destroyed:
            self.destroyed = True
            self.sandbox.destroy()
            shutil.rmtree(self.root, ignore_errors=True)


def _under(path: Path, folder: Path) -> bool:
    path, folder = path.resolve(), folder.resolve()
    return path == folder or folder in path.parents


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:40]
