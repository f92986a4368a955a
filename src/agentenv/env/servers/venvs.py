"""Virtualenvs for upstream environment folders, built once per requirements and cached.

An upstream folder's `server.py` imports upstream's protocol SDK, which needs `mcp<2`: it
can never share our interpreter's packages. Each folder therefore runs in a virtualenv of
its own, built from its `requirements.txt` and kept under a key of (the requirements text,
the interpreter's version, the interpreter's path), so every folder with the same
requirements shares one, and a second start costs nothing.

Where: `$AGENTENV_VENV_DIR/<key>/`, or `~/.cache/agentenv/venvs/<key>/`. Built with `uv`
where it is on PATH (`uv venv`, `uv pip install`), with `python -m venv` and pip otherwise.

Why a build happens in place, under a lock, rather than in a temporary folder renamed at
the end: a virtualenv is not relocatable (pip writes the folder's absolute path into every
script it installs), so one built elsewhere and renamed would hold scripts that point at a
folder that no longer exists. Instead a file lock (`<key>.lock`) keeps two processes from
building the same one, and the folder counts as built only once its marker file
(`.agentenv-venv.json`) is written, the build's last act. A build that fails is removed;
one killed half-way (no marker) is removed and built again by the next caller. Nothing
half-made is ever used.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import IO

from pydantic import BaseModel

from agentenv.env.servers.base import ServerError

MARKER = ".agentenv-venv.json"
"""The file a finished virtualenv holds (written last): what it was built from."""
INSTALL_TIMEOUT_S = 1800.0
"""How long one installer command may run (a large requirements file on a slow link)."""
_TAIL_LINES = 15


class VenvRecord(BaseModel):
    """What a finished virtualenv was built from (its marker file)."""

    key: str
    requirements: str | None
    """The requirements file it was built from (None: no file, an empty virtualenv)."""
    python: str
    python_version: str
    installer: str
    """`uv` or `pip`."""


def venv_root() -> Path:
    """Where cached virtualenvs live: `$AGENTENV_VENV_DIR` or `~/.cache/agentenv/venvs`."""
    configured = os.environ.get("AGENTENV_VENV_DIR")
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "agentenv" / "venvs"


def venv_python(venv: Path) -> Path:
    """The interpreter inside a virtualenv."""
    return venv / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def interpreter_version(python: str) -> str:
    """`sys.version` of an interpreter (ours without running it); ServerError if it does
    not run."""
    if Path(python).resolve() == Path(sys.executable).resolve():
        return sys.version
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.version)"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ServerError(f"interpreter {python!r} does not run: {exc}") from None
    if done.returncode != 0:
        raise ServerError(f"interpreter {python!r} exited with {done.returncode}: {done.stderr}")
    return done.stdout.strip()


def venv_key(requirements_text: str, python: str, python_version: str) -> str:
    """The cache key of a virtualenv: a hash of what determines its contents."""
    material = json.dumps(
        [requirements_text, python_version, str(Path(python).resolve())], ensure_ascii=True
    )
    return hashlib.sha256(material.encode("utf-8")).hexdigest()[:24]


def find_python(python: str | None) -> str:
    """The interpreter a folder's virtualenv is made from: the document's, found on PATH
    if it is a bare name, else ours."""
    if not python:
        return sys.executable
    found = shutil.which(python) if os.sep not in python else python
    if found is None or not Path(found).exists():
        raise ServerError(f"interpreter {python!r} not found (PATH or a file)")
    return found


def ensure_venv(
    requirements: Path | None,
    *,
    python: str | None = None,
    root: Path | None = None,
    use_uv: bool | None = None,
) -> Path:
    """The virtualenv for `requirements` (a requirements.txt; None: no packages), built now
    if it is not cached. Blocking (a build takes seconds to minutes): call it off any event
    loop. ServerError naming the requirements file and the installer's last lines when the
    install fails, with nothing left behind."""
    interpreter = find_python(python)
    text = ""
    if requirements is not None:
        try:
            text = requirements.read_text(encoding="utf-8")
        except OSError as exc:
            raise ServerError(f"{requirements}: cannot read: {exc.strerror}") from None
    version = interpreter_version(interpreter)
    key = venv_key(text, interpreter, version)
    root = root if root is not None else venv_root()
    venv = root / key
    if (venv / MARKER).is_file():
        return venv
    root.mkdir(parents=True, exist_ok=True)
    with (root / f"{key}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if (venv / MARKER).is_file():  # built by whoever held the lock before us
            return venv
        if venv.exists():  # a build that was killed half-way
            shutil.rmtree(venv, ignore_errors=True)
        uv = shutil.which("uv") if use_uv is not False else None
        if use_uv and uv is None:
            raise ServerError("uv was asked for but is not on PATH")
        log = root / f"{key}.build.log"
        try:
            _build(venv, requirements, interpreter, uv, log)
        except BaseException:
            shutil.rmtree(venv, ignore_errors=True)
            raise
        record = VenvRecord(
            key=key,
            requirements=str(requirements) if requirements is not None else None,
            python=interpreter,
            python_version=version,
            installer="uv" if uv else "pip",
        )
        (venv / MARKER).write_text(record.model_dump_json(indent=2), encoding="utf-8")
    return venv


def _build(venv: Path, requirements: Path | None, python: str, uv: str | None, log: Path) -> None:
    """Make the virtualenv and install the requirements into it, logging to `log`."""
    what = str(requirements) if requirements is not None else "an empty virtualenv"
    empty = requirements is None or not _entries(requirements.read_text(encoding="utf-8"))
    if uv is not None:
        create = [uv, "venv", "--quiet", "--python", python, str(venv)]
    else:
        # nothing to install: no pip either (ensurepip takes seconds)
        create = [python, "-m", "venv", *(["--without-pip"] if empty else []), str(venv)]
    with log.open("w", encoding="utf-8", errors="replace") as out:
        _step(create, None, out, log, f"making the virtualenv for {what}")
        if empty or requirements is None:
            return
        target = str(venv_python(venv))
        if uv is not None:
            install = [uv, "pip", "install", "--python", target, "-r", str(requirements)]
        else:
            install = [target, "-m", "pip", "install", "--disable-pip-version-check"]
            install += ["--no-input", "-r", str(requirements)]
        # relative entries of the file (-r other.txt, ./pkg) are read from its folder
        _step(install, requirements.parent, out, log, f"installing {requirements}")


def _entries(text: str) -> list[str]:
    """The lines of a requirements file that ask for something (not blank, not comments)."""
    return [
        line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")
    ]


def _step(command: list[str], cwd: Path | None, out: IO[str], log: Path, what: str) -> None:
    """Run one build command with its output appended to the log; ServerError on failure."""
    out.write(f"$ {' '.join(command)}\n")
    out.flush()
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=INSTALL_TIMEOUT_S,
            check=False,
        )
        failure = f"exited with {done.returncode}" if done.returncode != 0 else None
    except subprocess.TimeoutExpired:
        failure = f"took longer than {INSTALL_TIMEOUT_S:g} s"
    except OSError as exc:
        failure = f"could not run {command[0]!r}: {exc.strerror}"
    if failure is None:
        return
    out.flush()
    tail = _tail(log)
    raise ServerError(
        f"{what} failed ({failure}); the log is {log}"
        + (f"\nlast lines of the installer's output:\n{tail}" if tail else "")
    )


def _tail(log: Path) -> str:
    """The installer's last lines, without pip's noise about ignored index locations."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    kept = [line for line in lines if line.strip() and "is ignored: it is neither" not in line]
    return "\n".join(kept[-_TAIL_LINES:])
