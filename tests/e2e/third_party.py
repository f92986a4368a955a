"""Prepare the third-party MCP servers the end-to-end tests put behind our gateway.

Two servers nobody here wrote, each from its own registry and each in its own place, never
in our virtualenv:

- `mcp-server-git` from PyPI, in a virtualenv of its own under `.venv-third-party/git`
  (its console script is what `examples/envs/git` runs, found on PATH);
- `@modelcontextprotocol/server-filesystem` from npm, run through `npx`, whose cache is
  warmed once so a test does not wait for the download.

Both are pinned, so a release upstream cannot change what the tests see. Run this file
directly to prepare both ahead of the tests (CI does); without the registries it says so
and the tests that need them skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

GIT_SERVER = "mcp-server-git==2026.10.19"
"""The PyPI MCP server for git repositories (it asks for mcp 2.x, so it could share ours;
it still gets its own virtualenv, as a user's third-party server would)."""

FILESYSTEM_SERVER = "@modelcontextprotocol/server-filesystem@2026.8.31"
"""The npm MCP server for a folder of files, run as `npx -y <this> <folder>`."""

REPO_ROOT = Path(__file__).resolve().parents[2]
PLACE = Path(os.environ.get("AGENTENV_THIRD_PARTY_DIR") or REPO_ROOT / ".venv-third-party")
"""Where the servers are prepared; AGENTENV_THIRD_PARTY_DIR moves it."""


class Unavailable(RuntimeError):
    """A server could not be prepared (no registry, no npx): the tests needing it skip."""


def _run(command: list[str], what: str, timeout: float = 600) -> None:
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise Unavailable(f"{what} failed: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-10:]
        raise Unavailable(f"{what} failed (exit {done.returncode}): " + " | ".join(tail))


def git_server_bin() -> Path:
    """The folder holding the `mcp-server-git` script, installed on first use."""
    home = PLACE / "git"
    bin_dir = home / ("Scripts" if sys.platform == "win32" else "bin")
    marker = home / ".ready"
    if marker.is_file() and marker.read_text() == GIT_SERVER:
        return bin_dir
    venv.EnvBuilder(with_pip=True, clear=True).create(home)
    pip = [str(bin_dir / "python"), "-m", "pip", "-q", "--disable-pip-version-check"]
    _run(
        [*pip, "install", "--no-compile", GIT_SERVER],
        f"pip install {GIT_SERVER}",
    )
    marker.write_text(GIT_SERVER)
    return bin_dir


def filesystem_server_command() -> list[str]:
    """`npx -y <package>`, with npx's cache warmed: the server is started once on an empty
    folder with stdin closed, which it answers by exiting."""
    npx = shutil.which("npx")
    if npx is None:
        raise Unavailable("npx is not on PATH (install Node.js)")
    marker = PLACE / ".filesystem-ready"
    command = [npx, "-y", FILESYSTEM_SERVER]
    if not (marker.is_file() and marker.read_text() == FILESYSTEM_SERVER):
        with tempfile.TemporaryDirectory() as folder:
            _run([*command, folder], f"npx {FILESYSTEM_SERVER}", timeout=300)
        PLACE.mkdir(parents=True, exist_ok=True)
        marker.write_text(FILESYSTEM_SERVER)
    return command


if __name__ == "__main__":
    for name, prepare in (("git", git_server_bin), ("filesystem", filesystem_server_command)):
        try:
            print(f"{name} server: {prepare()}")
        except Unavailable as error:
            print(f"{name} server unavailable, its tests will skip: {error}", file=sys.stderr)
