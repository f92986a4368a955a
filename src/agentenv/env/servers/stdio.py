"""The stdio backend: an MCP server we start as a process and talk to over its stdin/stdout.

`command` (+ `args`) is run with a minimal environment (PATH, HOME, LANG, ... plus the
document's `env`), in the instance's workspace folder unless `cwd` says otherwise; its
stderr goes to a log file a user can find (`server-<pid>.log` under the runtime's log
folder, named in every error). `{workspace}` anywhere in the command, args, env or cwd is
that workspace. An argument that names a file beside the document (`server.py`,
`./run.sh`) is passed as its absolute path, so `command: [python, server.py]` works from
the workspace.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from mcp.client.stdio import StdioServerParameters, stdio_client

from agentenv.env.servers.base import ServerBackend, ServerError
from agentenv.env.servers.session import McpChild

WORKSPACE_PREFIX = "agentenv-ws-"
"""How each server process's workspace folder is named (in the system's temporary folder)."""
_WORKSPACE_PATH = re.compile(
    re.escape(tempfile.gettempdir()) + "/" + WORKSPACE_PREFIX + r"[a-z0-9_]+"
)

_INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "TERM", "USER", "SHELL", "TZ")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(text: str, workspace: Path | None) -> str:
    """`{workspace}` and `${NAME}` (from our environment; '' if unset) filled in."""
    if workspace is not None:
        text = text.replace("{workspace}", str(workspace))
    return _VARIABLE.sub(lambda m: os.environ.get(m.group(1), ""), text)


def mask_workspaces(text: str) -> str:
    """`text` with every server workspace path as `{workspace}`: two processes of one
    environment answer alike but for their folder's random name, which this hides."""
    return _WORKSPACE_PATH.sub("{workspace}", text)


def make_workspace(
    spec_workspace: str | None,
    base: Path,
    prepare: list[list[str]],
    env: dict[str, str] | None = None,
) -> Path:
    """A fresh folder for one process: a copy of the document's `workspace` (or empty),
    then the `prepare` commands run in it with the variables the server gets (`env`: the
    document's, on the minimal inherited set). ServerError naming the command that failed."""
    folder = Path(tempfile.mkdtemp(prefix=WORKSPACE_PREFIX))
    try:
        if spec_workspace:
            source = (base / spec_workspace).resolve()
            if not source.is_dir():
                raise ServerError(f"workspace {spec_workspace!r}: no such folder ({source})")
            shutil.copytree(source, folder, dirs_exist_ok=True, symlinks=True)
        for command in prepare:
            argv = [expand(a, folder) for a in command]
            try:
                done = subprocess.run(
                    argv,
                    cwd=folder,
                    env=process_env(env or {}, folder),
                    capture_output=True,
                    text=True,
                    timeout=120,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                raise ServerError(f"prepare command {argv!r} failed: {exc}") from None
            if done.returncode != 0:
                tail = "\n".join((done.stderr or done.stdout).splitlines()[-10:])
                raise ServerError(
                    f"prepare command {argv!r} exited with {done.returncode}"
                    + f":\n{tail}" * bool(tail)
                )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return folder


def process_env(extra: dict[str, str], workspace: Path | None) -> dict[str, str]:
    """The variables a server process gets: a minimal inherited set plus the document's."""
    env = {k: os.environ[k] for k in _INHERITED if k in os.environ}
    env.update({k: expand(v, workspace) for k, v in extra.items()})
    return env


def _anchored(arg: str, base: Path) -> str:
    """An argument naming a file beside the document (`srv.py`, `./run.sh`) as an absolute
    path, since the process runs in its workspace; anything else unchanged."""
    if not arg or arg.startswith("-") or Path(arg).is_absolute() or "\0" in arg:
        return arg
    candidate = base / arg
    try:
        return str(candidate.resolve()) if candidate.is_file() else arg
    except OSError:
        return arg


class StdioBackend(ServerBackend):
    """`server.command`: an MCP server over stdio."""

    name = "stdio"

    def describe(self) -> str:
        """The command line."""
        return " ".join([*(self.spec.command or []), *self.spec.args])

    async def start(self, log_dir: Path) -> McpChild:
        """Start the process in a fresh workspace and initialise its session."""
        spec = self.spec
        workspace = make_workspace(spec.workspace, self.base, spec.prepare, spec.env)
        argv = [
            _anchored(expand(a, workspace), self.base) for a in [*(spec.command or []), *spec.args]
        ]
        program = shutil.which(argv[0], path=process_env(spec.env, workspace).get("PATH"))
        if program is None and not Path(argv[0]).is_file():
            shutil.rmtree(workspace, ignore_errors=True)
            raise ServerError(f"command {argv[0]!r} not found (PATH or a file); is it installed?")
        cwd = Path(expand(spec.cwd, workspace)) if spec.cwd else workspace
        if not cwd.is_absolute():
            cwd = (self.base / cwd).resolve()
        log_dir.mkdir(parents=True, exist_ok=True)
        log_path = Path(tempfile.mkstemp(prefix="server-", suffix=".log", dir=log_dir)[1])
        log = log_path.open("w", encoding="utf-8", errors="replace")
        params = StdioServerParameters(
            command=program or argv[0],
            args=argv[1:],
            env=process_env(spec.env, workspace),
            cwd=cwd,
            encoding_error_handler="replace",
        )
        child = McpChild(label=self.describe(), log_path=log_path, workspace=workspace)
        child.extra["log"] = log

        def streams() -> Any:
            return stdio_client(params, errlog=log)

        try:
            await child.open(streams, spec.startup_timeout)
        except BaseException:
            log.close()
            shutil.rmtree(workspace, ignore_errors=True)
            raise
        return child
