"""The `docker` sandbox: a container of an image, the workspace bound into it.

Each sandbox is one long-lived container (`docker run -d ... sleep infinity`) of the image
`AGENTENV_DOCKER_IMAGE` (default `python:3.12-slim`), with the workspace folder bound at
`workdir` (default `/workspace`) and any `mounts` at theirs, no network unless asked
(`--network none`), a memory and process limit from the sandbox limits. Commands run by
`docker exec`; the local timeout and output cap apply around it. It needs the Docker CLI
and a daemon that answers; without them the provider says so (`unavailable`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentenv.sandbox._process import run_limited
from agentenv.sandbox.base import (
    ExecResult,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxProvider,
    inside,
)
from agentenv.sandbox.local import fresh_workspace

DEFAULT_IMAGE = "python:3.12-slim"


class DockerSandbox(Sandbox):
    """A container whose workspace is a folder of this machine."""

    def __init__(
        self,
        workspace: Path,
        limits: SandboxLimits,
        network: bool,
        container: str,
        inside_path: str,
    ) -> None:
        super().__init__("docker", workspace, limits, network)
        self.container = container
        self._inside = inside_path

    @property
    def workdir(self) -> str:
        """Where the workspace is bound in the container."""
        return self._inside

    async def exec(
        self,
        command: Sequence[str] | str,
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stdin: str | bytes | None = None,
    ) -> ExecResult:
        """Run a command in the container (see `Sandbox.exec`)."""
        self._check_live()
        folder = inside(self.workspace, cwd or ".")
        relative = folder.relative_to(self.workspace.resolve())
        where = f"{self._inside}/{relative}" if relative.parts else self._inside
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        wrapper = ["docker", "exec", "-i", "-w", where]
        for key, value in (env or {}).items():
            wrapper += ["-e", f"{key}={value}"]
        return await run_limited(
            [*wrapper, self.container, *argv],
            cwd=str(self.workspace),
            env=dict(os.environ),
            limits=self.limits,
            timeout=timeout,
            stdin=stdin,
        )

    def destroy(self) -> None:
        """Remove the container and the workspace (idempotent)."""
        if not self.destroyed:
            subprocess.run(["docker", "rm", "-f", self.container], capture_output=True)
        super().destroy()


class DockerProvider(SandboxProvider):
    """`docker`: a container per sandbox, against a local Docker daemon."""

    name = "docker"

    @classmethod
    def unavailable(cls) -> str | None:
        """Without the Docker CLI, or with no daemon answering it: which."""
        if shutil.which("docker") is None:
            return "the docker CLI is not installed"
        try:
            done = subprocess.run(["docker", "info"], capture_output=True, text=True, timeout=20)
        except subprocess.TimeoutExpired:
            return "no Docker daemon answered `docker info` within 20 s"
        if done.returncode != 0:
            return f"no Docker daemon answers (`docker info`: {done.stderr.strip()[-200:]})"
        return None

    def create(
        self,
        limits: SandboxLimits | None = None,
        *,
        workspace: str | Path | None = None,
        network: bool = False,
        workdir: str | None = None,
        mounts: Mapping[str, str | Path] | None = None,
    ) -> DockerSandbox:
        """A container of `AGENTENV_DOCKER_IMAGE` with a fresh workspace bound in."""
        reason = self.unavailable()
        if reason is not None:
            raise SandboxError(f"the docker sandbox cannot run here: {reason}")
        limits = limits or SandboxLimits()
        folder = fresh_workspace(workspace)
        inside_path = workdir or "/workspace"
        name = f"agentenv-{os.urandom(6).hex()}"
        argv = ["docker", "run", "-d", "--name", name, "--label", "agentenv.sandbox=1"]
        argv += ["--network", "bridge" if network else "none"]
        argv += ["--memory", f"{limits.memory_mb}m", "--pids-limit", str(limits.processes)]
        argv += ["-v", f"{folder}:{inside_path}", "-w", inside_path]
        for where, host in (mounts or {}).items():
            argv += ["-v", f"{Path(host).resolve()}:{where}"]
        image = os.environ.get("AGENTENV_DOCKER_IMAGE", DEFAULT_IMAGE)
        done = subprocess.run([*argv, image, "sleep", "infinity"], capture_output=True, text=True)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            raise SandboxError(f"docker run {image} failed: {done.stderr.strip()[-300:]}")
        return DockerSandbox(folder, limits, network, name, inside_path)
