"""`agent-env agent serve AGENT`: a real process serving an agent over A2A on 127.0.0.1;
its card, a turn through it, and a clean stop. Bad options fail before anything listens."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from agentenv.agents import AgentTurn
from agentenv.agents.a2a import (
    AGENT_CONFIG_URI,
    MCP_CONFIG_URI,
    PEER_AGENTS_URI,
    SOLUTION_URI,
    TRAJECTORY_URI,
)
from agentenv.agents.a2a.client import RemoteA2AAgent
from agentenv.agents.a2a.mcp_tools import NoTools
from agentenv.cli.agent_command import agent_app
from agentenv.spec.task import SolutionTurn

CARD = "/.well-known/agent-card.json"
START_S = 15.0


def agent_env_command() -> list[str]:
    """The installed console script of this interpreter, or the same entry point via -c."""
    script = Path(sys.executable).parent / "agent-env"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from agentenv.cli import main; main()"]


@contextmanager
def serving(args: list[str], port: int, log: Path) -> Iterator[httpx.Response]:
    """`agent-env agent serve ARGS --port PORT` as a process, its output in `log`; yields
    the answer to its card once it serves one, and stops it afterwards."""
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*agent_env_command(), "agent", "serve", *args, "--port", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + START_S
        while True:
            assert process.poll() is None, f"exited early:\n{log.read_text()}"
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}{CARD}", timeout=1)
                if answer.status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"no card within {START_S:g} s:\n{log.read_text()}"
            time.sleep(0.1)
        yield answer
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_agent_serve_serves_the_card_and_takes_turns(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    with serving(["oracle"], port, log) as answer:
        card = answer.json()
        assert card["name"] == "oracle"
        assert card["supportedInterfaces"][0]["url"] == url + "/a2a/jsonrpc"
        uris = [e["uri"] for e in card["capabilities"]["extensions"]]
        assert uris == [
            AGENT_CONFIG_URI,
            MCP_CONFIG_URI,
            PEER_AGENTS_URI,
            TRAJECTORY_URI,
            SOLUTION_URI,
        ]

        turn = AgentTurn(
            prompt_id="p",
            prompt="Answer.",
            tools=NoTools(),
            agent_name="a",
            role="r",
            solution=SolutionTurn(response="forty-two"),
        )
        assert asyncio.run(RemoteA2AAgent(url, timeout=10).run_turn(turn)) == "forty-two"
    output = log.read_text()
    assert f"oracle over A2A on {url}" in output
    assert "Traceback" not in output, output
    with pytest.raises(httpx.TransportError):
        httpx.get(url + CARD, timeout=1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "unknown agent 'nope'"),
        (["a2a:ftp://x"], "an A2A agent is named by an http(s) URL"),
        (["oracle", "--mcp-url", "nowhere"], "--mcp-url: 'url' must be an http(s) URL"),
        (["oracle", "--mcp-token", "t"], "--mcp-token and --mcp-role go with --mcp-url"),
        (["oracle", "--turn-timeout", "0"], "--turn-timeout must be positive"),
    ],
)
def test_bad_options_fail_before_anything_listens(args: list[str], message: str) -> None:
    result = CliRunner().invoke(agent_app, ["serve", *args])
    assert result.exit_code == 1, result.output
    assert message in result.output


def test_agent_serve_takes_a_base_url_that_stays_out_of_the_name(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "serve.log"
    args = ["openai:some-model", "--base-url", "http://127.0.0.1:9/v1"]
    with serving(args, port, log) as answer:
        assert "base_url" not in answer.text and "127.0.0.1:9" not in answer.text
    output = log.read_text()
    assert f"openai:some-model over A2A on {url}" in output
    assert "base_url" not in output


def test_agent_serve_refuses_a_base_url_for_an_agent_that_takes_none() -> None:
    result = CliRunner().invoke(agent_app, ["serve", "oracle", "--base-url", "http://x/v1"])
    assert result.exit_code == 1
    assert "agent 'oracle' takes no --base-url" in result.output
