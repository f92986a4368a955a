"""Fixtures of the conformance suite: upstream's packages in their own virtualenv, our real
server as a process, upstream's gateway as a process, and the driver scripts that connect them.

Every fixture here starts real processes on free loopback ports. When upstream's packages
cannot be fetched (no network), every test of the suite skips, saying why.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
DRIVERS = HERE / "drivers"
EXAMPLES = REPO_ROOT / "examples" / "envs"
CARD_PATH = "/.well-known/agent-env.json"
STARTUP_DEADLINE_S = 240.0
"""How long a process may take to answer its card before the fixture gives up (not a test)."""

_spec = importlib.util.spec_from_file_location(
    "conformance_upstream_venv", HERE / "upstream_venv.py"
)
assert _spec is not None and _spec.loader is not None
upstream_venv = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = upstream_venv  # dataclasses look their module up by name
_spec.loader.exec_module(upstream_venv)


@pytest.fixture(scope="session")
def upstream() -> Any:
    """Upstream's protocol package and gateway source, prepared once (see upstream_venv.py)."""
    try:
        return upstream_venv.ensure_upstream()
    except upstream_venv.UpstreamUnavailable as error:
        pytest.skip(f"upstream AgentEnv packages unavailable (network or registry): {error}")


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def agent_env_command() -> list[str]:
    """Our console script for this interpreter, or the same entry point through -c."""
    script = Path(sys.executable).parent / "agent-env"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from agentenv.cli import main; main()"]


def _wait_for_card(process: subprocess.Popen[bytes], base: str, log: Path, what: str) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"{what} exited with {process.returncode}:\n{log.read_text()[-4000:]}"
            )
        try:
            if httpx.get(f"{base}{CARD_PATH}", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(
        f"{what} did not answer {CARD_PATH} in {STARTUP_DEADLINE_S}s:\n{log.read_text()[-4000:]}"
    )


@dataclass
class _Launched:
    """A process started and not yet known to answer."""

    process: subprocess.Popen[bytes]
    base: str
    log: Path
    what: str


def _launch(
    command: list[str],
    *,
    base: str,
    log: Path,
    what: str,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> _Launched:
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd)
    return _Launched(process, base, log, what)


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def _running(launched: _Launched) -> Iterator[str]:
    """Wait until the process answers its card, yield its base URL, stop it after."""
    try:
        _wait_for_card(launched.process, launched.base, launched.log, launched.what)
        yield launched.base
    finally:
        _stop(launched.process)


SUPPORT_DESK = (str(EXAMPLES / "support-desk"),)
READONLY = ("readonly", *SUPPORT_DESK)
SERVERS_BY_MODULE: dict[str, list[tuple[str, ...]]] = {
    "test_client.py": [SUPPORT_DESK],
    "test_tool_client.py": [READONLY],
    "test_preflight.py": [READONLY],
    "test_gateway.py": [(*SUPPORT_DESK, "--behind-gateway")],
    "test_trigger_features.py": [SUPPORT_DESK],
    "test_hidden_tools.py": [
        (str(HERE / "envs" / "vault"),),
        (str(HERE / "envs" / "vault"), "--behind-gateway"),
    ],
    "test_composed.py": [(str(HERE / "envs" / "duo"),)],
    "test_modes.py": [(*SUPPORT_DESK, "--mode", "performance", "--strict-roles")],
    "test_tokens.py": [
        (*SUPPORT_DESK, "--token", "agent=agent-secret", "--token", "admin=admin-secret")
    ],
}
"""The servers each module asks `serve_env` for, started all at once when the first is asked
for: each is a cold start of our CLI, and they overlap instead of queueing."""
_wanted: list[tuple[str, ...]] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Note the servers the selected conformance modules will ask for."""
    modules = {
        Path(str(item.fspath)).name for item in items if Path(str(item.fspath)).parent == HERE
    }
    wanted = [key for module in sorted(modules) for key in SERVERS_BY_MODULE.get(module, [])]
    _wanted[:] = [key for key in wanted if key != READONLY] + (
        [READONLY] if READONLY in wanted else []
    )


@pytest.fixture(scope="session")
def serve_env(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., contextlib.AbstractContextManager[str]]]:
    """Start `agent-env serve PATH ARGS...` on a free port; the context manager yields its base URL."""

    def launch(path: str, *args: str) -> _Launched:
        port = free_port()
        log = tmp_path_factory.mktemp("serve") / "serve.log"
        command = [*agent_env_command(), "serve", path, "--port", str(port), *args]
        return _launch(
            command, base=f"http://127.0.0.1:{port}", log=log, what=f"agent-env serve {path}"
        )

    pool: dict[tuple[str, ...], list[_Launched]] = {}
    for key in _wanted:
        pool.setdefault(key, []).append(launch(*(key[1:] if key == READONLY else key)))

    def start(
        path: Path | str, *args: str, key: tuple[str, ...] | None = None
    ) -> contextlib.AbstractContextManager[str]:
        key = key or (str(path), *args)
        waiting = pool.get(key) or []
        return _running(waiting.pop(0) if waiting else launch(str(path), *args))

    yield start
    for waiting in pool.values():
        for launched in waiting:
            _stop(launched.process)


@pytest.fixture(scope="session")
def readonly_desk(
    serve_env: Callable[..., contextlib.AbstractContextManager[str]],
) -> Iterator[str]:
    """One support-desk server shared by the modules whose drivers only read (tool client, preflight)."""
    with serve_env(EXAMPLES / "support-desk", key=READONLY) as base:
        yield base


@pytest.fixture(scope="module")
def upstream_gateway(
    upstream: Any, tmp_path_factory: pytest.TempPathFactory
) -> Callable[..., contextlib.AbstractContextManager[str]]:
    """Start upstream's gateway (`python -m gateway.entrypoint`, no Docker, no Postgres) in front of
    backing servers given as {name: base URL}; the context manager yields the gateway's base URL."""

    def start(
        backends: dict[str, str], mode: str = "consistent"
    ) -> contextlib.AbstractContextManager[str]:
        port = free_port()
        folder = tmp_path_factory.mktemp("gateway")
        env = {
            **os.environ,
            "PYTHONPATH": str(upstream.gateway_parent),
            "INTERNAL_MCP_SERVERS": ",".join(f"{name}={url}/mcp" for name, url in backends.items()),
            "REST_PROXY_URLS": ",".join(f"{name}={url}" for name, url in backends.items()),
            "MCP_HOST": "127.0.0.1",
            "MCP_PORT": str(port),
            "GATEWAY_MODE": mode,
            "GATEWAY_TRAJECTORY_FILE": str(folder / "trajectory.jsonl"),
            "GATEWAY_INTERNAL_SERVER_TIMEOUT_S": "30",
        }
        command = [str(upstream.python), "-m", "gateway.entrypoint"]
        return _running(
            _launch(
                command,
                base=f"http://127.0.0.1:{port}",
                log=folder / "gateway.log",
                what="upstream gateway",
                env=env,
                cwd=folder,
            )
        )

    return start


def run_driver(upstream: Any, script: str, *args: str) -> dict[str, Any]:
    """Run one driver with upstream's interpreter; its stdout is a JSON object of probe outcomes."""
    done = subprocess.run(
        [str(upstream.python), str(DRIVERS / script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(f"driver {script} crashed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    return json.loads(done.stdout)


class Probes:
    """The outcomes a driver recorded, with helpers that fail a test with what the client saw."""

    def __init__(self, outcomes: dict[str, Any]) -> None:
        self.outcomes = outcomes

    def outcome(self, name: str) -> dict[str, Any]:
        if name not in self.outcomes:
            pytest.fail(
                f"the driver never reached probe {name!r} (an earlier call failed; see the other tests)"
            )
        return self.outcomes[name]

    def value(self, name: str) -> Any:
        """The answer of a call that must succeed."""
        outcome = self.outcome(name)
        if not outcome["ok"]:
            pytest.fail(f"{name}: upstream's client failed: {outcome['error']}")
        return outcome["value"]

    def error(self, name: str, status: int) -> dict[str, Any]:
        """The failure of a call that must be refused with `status` and a readable error body."""
        outcome = self.outcome(name)
        assert not outcome["ok"], (
            f"{name}: expected HTTP {status}, the call succeeded: {outcome['value']!r}"
        )
        assert outcome.get("status") == status, (
            f"{name}: expected HTTP {status}; got {outcome['error']}"
        )
        return outcome

    def raw(self, name: str) -> dict[str, Any]:
        """A plain HTTP exchange the driver made (status, headers, text, json)."""
        return self.value(name)


@pytest.fixture(scope="session")
def driver(upstream: Any) -> Callable[..., Probes]:
    """Run a driver script (tests/conformance/drivers/) with upstream's interpreter; returns its probes."""

    def run(script: str, *args: str) -> Probes:
        return Probes(run_driver(upstream, script, *args))

    return run
