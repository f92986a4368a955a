"""Prepare upstream's packages for the conformance suite, outside our own environment.

The suite drives our server with upstream AgentEnv's own code: its protocol package (client,
tool client, preflight) and its gateway (from the framework's source distribution). Both run
in a separate virtualenv, as their own processes, never imported by our code. This module
builds that virtualenv once and unpacks the gateway source beside it, under `.venv-upstream/`
(ignored by git). Nothing of upstream's is committed.

Run it directly to prepare everything ahead of the tests (CI does):

    python tests/conformance/upstream_venv.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import venv
from dataclasses import dataclass
from pathlib import Path

PROTOCOL_REQUIREMENT = "agentenv-framework-protocol[agent]==0.1.379"
"""Upstream's protocol package, with the extra its client and tool client need."""

FRAMEWORK_NAME = "agentenv-framework"
FRAMEWORK_VERSION = "0.9.1364"
"""Upstream's framework release whose gateway the suite puts in front of our server."""

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV_DIR = Path(os.environ.get("AGENTENV_UPSTREAM_VENV") or REPO_ROOT / ".venv-upstream")
"""Where the upstream virtualenv goes; AGENTENV_UPSTREAM_VENV moves it (e.g. to a CI cache)."""
SDIST_DIR = VENV_DIR / "sdist"
SOURCE_DIR = VENV_DIR / "src"
READY_MARKER = VENV_DIR / ".conformance-ready.json"


class UpstreamUnavailable(RuntimeError):
    """Upstream's packages could not be fetched (no network, registry down): the suite skips."""


@dataclass(frozen=True)
class Upstream:
    """Where the prepared upstream pieces are."""

    python: Path
    """The upstream virtualenv's interpreter."""
    gateway_parent: Path
    """The folder holding upstream's `gateway` package (run it as `python -m gateway.entrypoint`)."""


def _python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if sys.platform == "win32" else "bin/python")


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-15:]
        raise UpstreamUnavailable(f"{what} failed (exit {done.returncode}): " + " | ".join(tail))


def _pip(python: Path, *args: str, what: str) -> None:
    _run([str(python), "-m", "pip", "--disable-pip-version-check", "-q", *args], what)


def _framework_source() -> Path:
    """Download (once) and unpack upstream's framework sdist; return its `src/agent_env/env` folder."""
    unpacked = SOURCE_DIR / f"agentenv_framework-{FRAMEWORK_VERSION}"
    gateway_parent = unpacked / "src" / "agent_env" / "env"
    if (gateway_parent / "gateway" / "entrypoint.py").is_file():
        return gateway_parent
    SDIST_DIR.mkdir(parents=True, exist_ok=True)
    archives = sorted(SDIST_DIR.glob(f"agentenv_framework-{FRAMEWORK_VERSION}.tar.gz"))
    if not archives:
        _run(
            [
                sys.executable,
                "-m",
                "pip",
                "--disable-pip-version-check",
                "-q",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"{FRAMEWORK_NAME}=={FRAMEWORK_VERSION}",
                "-d",
                str(SDIST_DIR),
            ],
            f"pip download {FRAMEWORK_NAME}=={FRAMEWORK_VERSION}",
        )
        archives = sorted(SDIST_DIR.glob(f"agentenv_framework-{FRAMEWORK_VERSION}.tar.gz"))
    if not archives:
        raise UpstreamUnavailable(
            f"pip download left no {FRAMEWORK_NAME} {FRAMEWORK_VERSION} sdist in {SDIST_DIR}"
        )
    SOURCE_DIR.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archives[0]) as archive:
        archive.extractall(SOURCE_DIR, filter="data")
    if not (gateway_parent / "gateway" / "entrypoint.py").is_file():
        raise UpstreamUnavailable(
            f"the {FRAMEWORK_NAME} sdist has no src/agent_env/env/gateway/entrypoint.py"
        )
    return gateway_parent


def ensure_upstream() -> Upstream:
    """The upstream virtualenv and gateway source, built on first use and reused after.

    Raises `UpstreamUnavailable` when something must be fetched and cannot be.
    """
    gateway_parent = _framework_source()
    requirements = [PROTOCOL_REQUIREMENT]
    gateway_requirements = gateway_parent / "gateway" / "requirements.txt"
    requirements += [
        line.strip()
        for line in gateway_requirements.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    python = _python(VENV_DIR)
    wanted = {"requirements": requirements}
    if READY_MARKER.is_file() and python.is_file():
        try:
            if json.loads(READY_MARKER.read_text()) == wanted:
                return Upstream(python=python, gateway_parent=gateway_parent)
        except ValueError:
            pass
    if not python.is_file():
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV_DIR)
    # Upstream pins mcp<2 and a2a-sdk<0.4; the gateway's own list asks mcp>=1.25,<2. One resolve for all.
    _pip(
        python, "install", "--no-compile", *requirements, what="pip install of upstream's packages"
    )
    READY_MARKER.write_text(json.dumps(wanted))
    return Upstream(python=python, gateway_parent=gateway_parent)


if __name__ == "__main__":
    try:
        prepared = ensure_upstream()
    except UpstreamUnavailable as error:
        print(
            f"upstream packages unavailable, the conformance suite will skip: {error}",
            file=sys.stderr,
        )
        sys.exit(0)
    print(
        f"upstream python: {prepared.python}\nupstream gateway: {prepared.gateway_parent / 'gateway'}"
    )
