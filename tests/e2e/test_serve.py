"""End to end: the real `agent-env serve` process, driven over HTTP like any client would."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

CARD = "/.well-known/agent-env.json"

ENV_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: e2e-desk
roles:
  - name: agent
  - name: supervisor
state:
  tickets:
    key: id
    schema:
      type: object
      properties:
        id: {type: string}
        subject: {type: string}
        status: {type: string}
      required: [id, subject]
seed:
  tickets:
    - {id: T-1, subject: Printer on fire, status: open}
tools:
  - name: get_ticket
    crud: {collection: tickets, op: get}
  - name: update_ticket
    crud: {collection: tickets, op: update}
  - module: tools.py
"""

TOOLS_PY = '''\
from agentenv import ToolContext, tool


@tool
def shred(ctx: ToolContext, ticket_id: str) -> dict:
    """Mark a ticket shredded, then crash."""
    ctx.state.update("tickets", ticket_id, {"status": "shredded"})
    raise RuntimeError("the shredder jammed")


@tool(roles=["supervisor"])
def close_ticket(ctx: ToolContext, ticket_id: str) -> dict:
    """Close a ticket (supervisors only)."""
    return ctx.state.update("tickets", ticket_id, {"status": "closed"})
'''


def agent_env_command() -> list[str]:
    """The installed console script of this interpreter, or the same entry point via -c."""
    script = Path(sys.executable).parent / "agent-env"
    if script.is_file():
        return [str(script)]
    return [sys.executable, "-c", "from agentenv.cli import main; main()"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Served:
    url: str
    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    def logs(self) -> str:
        return self.stdout.read_text(errors="replace") + self.stderr.read_text(errors="replace")


@contextlib.contextmanager
def serving(folder: Path, *options: str) -> Iterator[Served]:
    """Run `agent-env serve FOLDER --port P OPTIONS...` until the card answers (at most
    15 s); always terminate it and wait for it to end."""
    port = free_port()
    stdout, stderr = folder / "serve.out", folder / "serve.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            [*agent_env_command(), "serve", str(folder), "--port", str(port), *options],
            stdout=out,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )
    served = Served(f"http://127.0.0.1:{port}", process, stdout, stderr)
    try:
        deadline = time.monotonic() + 15
        while True:
            assert process.poll() is None, f"serve exited early:\n{served.logs()}"
            try:
                if httpx.get(served.url + CARD, timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"no card within 15 s:\n{served.logs()}"
            time.sleep(0.1)
        yield served
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
    assert "Traceback" not in served.logs(), served.logs()


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    (tmp_path / "env.yaml").write_text(ENV_YAML, encoding="utf-8")
    (tmp_path / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return tmp_path


@pytest.fixture
def serve(env_dir: Path) -> Callable[..., contextlib.AbstractContextManager[Served]]:
    return lambda *options: serving(env_dir, *options)


def call_body(tool: str, **arguments: object) -> dict[str, object]:
    return {"action": "call_tool", "tool_name": tool, "arguments": arguments}


def test_serve_answers_the_protocol_over_http(serve) -> None:
    with serve() as served, httpx.Client(base_url=served.url, timeout=15) as c:
        card = c.get(CARD).json()
        assert card["name"] == "e2e-desk"
        assert card["protocolVersion"] == "1.0"
        assert card["url"] == "/agentenv"
        assert [t["name"] for t in card["capabilities"]["tools"]] == [
            "get_ticket",
            "update_ticket",
            "shred",
        ]

        r = c.post("/step", json={"action": "list_tools"})
        assert [t["name"] for t in r.json()["tools"]] == ["get_ticket", "update_ticket", "shred"]
        r = c.post("/step", json={"action": "list_tools"}, headers={"AgentEnv-Role": "supervisor"})
        assert "close_ticket" in [t["name"] for t in r.json()["tools"]]

        r = c.post("/step", json=call_body("get_ticket", id="T-1"))
        assert r.status_code == 200
        assert r.json()["isError"] is False
        assert r.json()["structuredContent"]["status"] == "open"

        # A bad call: a structured error, no trace of its write, and the server carries on.
        before = c.get("/state").json()
        r = c.post("/step", json=call_body("shred", ticket_id="T-1"))
        assert r.status_code == 200
        assert r.json()["isError"] is True
        assert r.json()["error"]["kind"] == "tool_error"
        assert "the shredder jammed" in r.json()["content"][0]["text"]
        assert "Traceback" not in r.text
        assert c.get("/state").json()["state_hash"] == before["state_hash"]
        r = c.post("/step", content=b"{broken")
        assert r.status_code == 400
        assert r.json()["error"]["kind"] == "malformed_json"
        r = c.post("/step", json=call_body("close_ticket", ticket_id="T-1"))
        assert r.status_code == 403
        r = c.post("/step", json=call_body("update_ticket", id="T-1", status="pending"))
        assert r.json()["structuredContent"]["status"] == "pending"

        # Instances: a fresh fork of the seed, isolated, and dropped again.
        r = c.post("/instances")
        assert r.status_code == 201
        prefix = r.json()["url"]
        r = c.post(f"{prefix}/step", json=call_body("get_ticket", id="T-1"))
        assert r.json()["structuredContent"]["status"] == "open"
        c.post(f"{prefix}/step", json=call_body("update_ticket", id="T-1", status="elsewhere"))
        r = c.post("/step", json=call_body("get_ticket", id="T-1"))
        assert r.json()["structuredContent"]["status"] == "pending"
        assert c.get("/instances").json()["instances"] == ["default", prefix.rsplit("/", 1)[-1]]
        assert c.delete(prefix).status_code == 200
        assert c.get(f"{prefix}/state").status_code == 404

        # The trajectory has every call of the default instance, in order.
        # upstream's events: each call is a tool_call event and its outcome.
        events = [json.loads(line) for line in c.get("/trajectory").text.splitlines()]
        calls = [e for e in events if e["event_type"] == "tool_call"]
        tools = [e["tool_call"]["function_name"] for e in calls]
        assert tools == ["get_ticket", "shred", "close_ticket", "update_ticket", "get_ticket"]
        assert len(c.get("/trajectory?since=6").text.splitlines()) == 4

        # The clock: unarmed, armed, read, cleared.
        assert c.get("/clock/time").status_code == 404
        r = c.put(
            "/clock/set-time",
            json={"virtual_time": "2026-03-02T09:00:00Z", "virtual_seconds_per_real_second": 0},
        )
        assert r.status_code == 200
        assert c.get("/clock/time").json()["virtual_time"].startswith("2026-03-02T09:00:00")
        assert c.get("/clock/state").json()["armed"] is True
        tools_now = [
            t["name"] for t in c.post("/step", json={"action": "list_tools"}).json()["tools"]
        ]
        assert "get_time" in tools_now
        assert c.post("/clock/clear").status_code == 200
        assert c.get("/clock/time").status_code == 404

    assert served.process.returncode is not None
    assert "e2e-desk" in served.stdout.read_text()


def test_serve_with_tokens_requires_them(serve) -> None:
    agent = {"Authorization": "Bearer s1"}
    admin = {"Authorization": "Bearer s2"}
    with (
        serve("--token", "agent=s1", "--token", "admin=s2") as served,
        httpx.Client(base_url=served.url, timeout=15) as c,
    ):
        # The role header alone is not a credential.
        r = c.post("/step", json={"action": "list_tools"}, headers={"AgentEnv-Role": "admin"})
        assert r.status_code == 401
        assert r.json()["error"]["kind"] == "unauthenticated"
        assert (
            c.post(
                "/step", json={"action": "list_tools"}, headers={"Authorization": "Bearer s3"}
            ).status_code
            == 401
        )

        r = c.post("/step", json=call_body("get_ticket", id="T-1"), headers=agent)
        assert r.status_code == 200
        assert r.json()["structuredContent"]["id"] == "T-1"
        r = c.post(
            "/step",
            json=call_body("close_ticket", ticket_id="T-1"),
            headers={**agent, "AgentEnv-Role": "supervisor"},
        )
        assert r.status_code == 403

        disable = {"role": "agent", "tools": ["shred"]}
        r = c.post("/tools/disable", json=disable, headers=agent)
        assert r.status_code == 403
        assert r.json()["error"]["kind"] == "forbidden"
        assert c.post("/instances", headers=agent).status_code == 403
        names = [
            t["name"]
            for t in c.post("/step", json={"action": "list_tools"}, headers=agent).json()["tools"]
        ]
        assert "shred" in names

        r = c.post("/tools/disable", json=disable, headers=admin)
        assert r.status_code == 200
        names = [
            t["name"]
            for t in c.post("/step", json={"action": "list_tools"}, headers=agent).json()["tools"]
        ]
        assert "shred" not in names
        assert c.get(CARD).status_code == 200  # the card stays public

    assert "bearer tokens" in served.stdout.read_text()


def test_serve_on_a_port_in_use_fails_cleanly(env_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*agent_env_command(), "serve", str(env_dir), "--port", str(port)],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
    assert done.returncode == 1
    output = (done.stdout + done.stderr).decode(errors="replace")
    assert f"port {port} on 127.0.0.1 is in use" in output
    assert "http://127.0.0.1" not in output  # no banner announcing a server that never ran
    assert "Traceback" not in output
