"""`agent-env serve` of process environments: a document whose tools live in an MCP server
process, and `--url` fronting a server already running. Real `agent-env` processes, real
server processes, on free 127.0.0.1 ports."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

CARD = "/.well-known/agent-env.json"


ECHO = Path(__file__).parents[1] / "env" / "servers" / "servers" / "echo.py"


def _doc(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: echo\n"
        f"server: {{command: [{sys.executable}, {ECHO}]}}\n"
        "roles: [{name: agent}, {name: reviewer}]\n"
        "access: [{role: reviewer, action: disable, tools: [add]}]\n"
    )
    return folder


@contextlib.contextmanager
def serving(
    tmp_path: Path, command: list[str], port: int, *args: str
) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """`agent-env serve ARGS --port PORT` (command: how to run agent-env) until its card
    answers (30 s at most); always stopped."""
    out_path = tmp_path / f"serve-{port}.out"
    env = {**os.environ, "AGENTENV_LOG_DIR": str(tmp_path / "logs")}
    with out_path.open("wb") as out:
        process = subprocess.Popen(
            [*command, "serve", *args, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise AssertionError(f"serve exited: {out_path.read_text()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + CARD, timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise AssertionError(f"serve never answered: {out_path.read_text()}")
            time.sleep(0.1)
        yield url, process, out_path
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def step(url: str, tool: str, args: dict[str, object], role: str | None = None) -> dict:
    headers = {"AgentEnv-Role": role} if role else {}
    body = {"action": "call_tool", "tool_name": tool, "arguments": args}
    return httpx.post(url + "/step", json=body, headers=headers, timeout=30).json()


def _children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(stat.parent.name))
    return found


def test_a_process_env_is_served_with_its_roles_and_stops_its_server(
    tmp_path: Path, agent_env_command: list[str], loopback_port: Callable[[], int]
) -> None:
    folder = _doc(tmp_path / "echo")
    with serving(tmp_path, agent_env_command, loopback_port(), str(folder)) as (url, process, out):
        card = httpx.get(url + CARD).json()
        assert {t["name"] for t in card["capabilities"]["tools"]} >= {"add", "whoami"}
        assert step(url, "add", {"a": 2, "b": 3})["structuredContent"] == {"result": 5}
        denied = step(url, "add", {"a": 2, "b": 3}, role="reviewer")
        assert denied["isError"] and denied["error"]["code"] == "permission_denied"
        assert "server: " in out.read_text() and "echo.py" in out.read_text()
        children = _children_of(process.pid)
        assert children, "the MCP server runs as a child of agent-env serve"
    for pid in children:
        assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text()


def test_url_fronts_a_running_server_and_forwards_the_role(
    tmp_path: Path, agent_env_command: list[str], loopback_port: Callable[[], int]
) -> None:
    folder = _doc(tmp_path / "echo")
    with serving(tmp_path, agent_env_command, loopback_port(), str(folder)) as (inner, _p, _o):
        outer_serve = serving(tmp_path, agent_env_command, loopback_port(), "--url", inner)
        with outer_serve as (outer, _q, out):
            assert "server: " + inner in out.read_text()
            card = httpx.get(outer + CARD).json()
            assert card["name"] == "echo", "named from the fronted server's card"
            answer = step(outer, "add", {"a": 1, "b": 2})
            assert not answer["isError"]
            denied = step(outer, "add", {"a": 1, "b": 2}, role="reviewer")
            assert denied["isError"], "the inner server refuses the forwarded role"
            assert "may not call 'add'" in denied["content"][0]["text"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://127.0.0.1:{port}"], "no server answers at"),
        (["--url", "ftp://x"], "expected http://HOST:PORT"),
        ([], "give an environment"),
        (["{folder}", "--url", "http://127.0.0.1:1"], "one of the two"),
        (["{folder}", "--header", "A=b"], "go with --url"),
    ],
)
def test_bad_serve_arguments_fail_with_one_message(
    tmp_path: Path,
    args: list[str],
    message: str,
    agent_env_command: list[str],
    loopback_port: Callable[[], int],
) -> None:
    folder = _doc(tmp_path / "echo")
    filled = [a.format(port=loopback_port(), folder=folder) for a in args]
    done = subprocess.run(
        [*agent_env_command, "serve", *filled, "--port", str(loopback_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert message in done.stderr + done.stdout
    assert "Traceback" not in done.stderr


def test_a_server_that_exits_at_start_is_one_error_and_nothing_runs(
    tmp_path: Path, agent_env_command: list[str], loopback_port: Callable[[], int]
) -> None:
    folder = tmp_path / "dies"
    folder.mkdir()
    exits = Path(__file__).parents[1] / "env" / "servers" / "servers" / "exits.py"
    (folder / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: dies\n"
        f"server: {{command: [{sys.executable}, {exits}]}}\n"
    )
    done = subprocess.run(
        [*agent_env_command, "serve", str(folder), "--port", str(loopback_port())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0
    assert "exits.py" in done.stderr and "Traceback" not in done.stderr
