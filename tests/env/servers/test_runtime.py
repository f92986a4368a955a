"""Process environments end to end: real MCP server processes behind our gateway."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import pytest

from agentenv import DocumentError, Environment, Gateway, Principal

SERVERS = Path(__file__).parent / "servers"


def _doc(tmp_path: Path, server: str, extra: str = "") -> Path:
    doc = tmp_path / "env.yaml"
    doc.write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: echo\n"
        f"server: {{command: [{sys.executable}, {SERVERS / server}], call_timeout: 6}}\n"
        "roles: [{name: agent}, {name: reviewer}]\n" + extra
    )
    return doc


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    loaded = Environment.load(
        _doc(tmp_path, "echo.py", "access: [{role: reviewer, action: disable, tools: [add]}]\n")
    )
    yield loaded
    loaded.close()


def _gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1].startswith("Z")
    except FileNotFoundError:
        return True


def test_calls_are_forwarded_and_recorded(env: Environment) -> None:
    gateway = Gateway(env)
    result = asyncio.run(gateway.call(Principal("agent"), "add", {"a": 2, "b": 3}))
    assert result.ok and result.value == 5
    record = list(gateway.instance().trajectory)[-1]
    assert record.tool == "add" and record.args == {"a": 2, "b": 3} and record.error is None


def test_schema_is_checked_before_the_server(env: Environment) -> None:
    gateway = Gateway(env)
    result = asyncio.run(gateway.call(Principal("agent"), "add", {"a": 2, "b": "x"}))
    assert result.error is not None and result.error.kind == "invalid_arguments"
    assert "b: 'x' is not of type 'integer'" in result.error.message
    assert env.tools["add"].fast_args() is None


def test_read_tools_hidden_tools_and_access(env: Environment) -> None:
    assert env.tools["whoami"].kind == "read" and env.tools["add"].kind == "write"
    assert env.tools["secret"].hidden_by_default
    gateway = Gateway(env)
    names = {t.name for t in gateway.tools_for(Principal("agent"))}
    assert "secret" not in names and "add" in names
    refused = asyncio.run(gateway.call(Principal("reviewer"), "add", {"a": 1, "b": 1}))
    assert refused.error is not None and refused.error.kind == "denied"


def test_role_and_session_reach_the_child(env: Environment) -> None:
    gateway = Gateway(env)
    result = asyncio.run(gateway.call(Principal("agent"), "whoami", {}, session="s-1"))
    assert result.ok, result.text
    meta = result.value["meta"]
    assert meta["agentenv.io/role"] == "agent" and meta["agentenv.io/session"] == "s-1"


def test_crash_mid_call_is_a_tool_error_and_the_next_call_works(env: Environment) -> None:
    gateway = Gateway(env)

    async def go():
        first = await gateway.call(Principal("agent"), "whoami", {})
        died = await gateway.call(Principal("agent"), "die", {})
        after = await gateway.call(Principal("agent"), "whoami", {})
        return first, died, after

    first, died, after = asyncio.run(go())
    assert died.error is not None and died.error.kind == "tool_error"
    assert "dying now" in died.error.message  # the stderr tail
    assert after.ok and after.value["pid"] != first.value["pid"]
    assert _gone(first.value["pid"])


def test_a_hang_hits_the_timeout(env: Environment) -> None:
    gateway = Gateway(env)
    result = asyncio.run(gateway.call(Principal("agent"), "hang", {}))
    assert result.error is not None and result.error.kind == "timeout"


def test_nothing_left_running_after_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    loaded = Environment.load(_doc(tmp_path, "echo.py"))
    gateway = Gateway(loaded)
    pid = asyncio.run(gateway.call(Principal("agent"), "whoami", {})).value["pid"]
    assert not _gone(pid)
    loaded.close()
    assert _gone(pid)


def test_command_not_found(tmp_path: Path) -> None:
    doc = tmp_path / "env.yaml"
    doc.write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: x\n"
        "server: {command: [no-such-mcp-server-here]}\n"
    )
    with pytest.raises(DocumentError) as caught:
        Environment.load(doc)
    assert "no-such-mcp-server-here" in str(caught.value) and "not found" in str(caught.value)
    assert str(doc) in str(caught.value)


def test_server_that_exits_at_start_shows_its_stderr(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    with pytest.raises(DocumentError) as caught:
        Environment.load(_doc(tmp_path, "exits.py"))
    assert "config file missing" in str(caught.value)


def test_invalid_tool_schema_names_the_tool(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    with pytest.raises(DocumentError) as caught:
        Environment.load(_doc(tmp_path, "badschema.py"))
    assert "'ok'" in str(caught.value) and "invalid input schema" in str(caught.value)


def test_server_documents_refuse_tools(tmp_path: Path) -> None:
    doc = tmp_path / "env.yaml"
    doc.write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: x\n"
        "server: {command: [python, s.py]}\ntools: [{module: t.py}]\n"
    )
    with pytest.raises(DocumentError) as caught:
        Environment.load(doc)
    assert caught.value.path == "tools"


def test_compose_a_server_child(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    doc = tmp_path / "env.yaml"
    doc.write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: both\n"
        f"compose: [{{as: math, server: {{command: [{sys.executable}, {SERVERS / 'echo.py'}]}}}}]\n"
    )
    loaded = Environment.load(doc)
    try:
        assert "math__add" in loaded.tools
        assert [ns for ns, _ in loaded.runtimes()] == ["math__"]
        gateway = Gateway(loaded)
        result = asyncio.run(gateway.call(Principal("agent"), "math__add", {"a": 1, "b": 1}))
        assert result.ok and result.value == 2
    finally:
        loaded.close()


def test_instances_attach_and_detach(env: Environment) -> None:
    gateway = Gateway(env)
    gateway.create_instance("ep1")

    async def go():
        return await gateway.call(Principal("agent"), "add", {"a": 1, "b": 2}, instance="ep1")

    assert asyncio.run(go()).value == 3
    gateway.drop_instance("ep1")
    assert os.path.isdir(os.environ["AGENTENV_LOG_DIR"])


def test_a_state_trigger_probes_the_servers_own_state(tmp_path: Path, monkeypatch) -> None:
    """The counter lives only in the server: the state trigger reads it through its read
    tool after each call, and fires once it holds."""
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    doc = _doc(
        tmp_path,
        "counter.py",
        "triggers:\n"
        "  - id: enough\n"
        "    when:\n"
        "      type: state\n"
        "      check: [{tool: count, extract: result.count, predicate: {equals: 3}}]\n"
        "    actions: [{type: permission, role: agent, action: disable, tools: [bump]}]\n",
    )
    env = Environment.load(doc)
    try:
        gateway = Gateway(env)
        agent = Principal("agent")

        async def bumps() -> list[bool]:
            return [(await gateway.call(agent, "bump", {})).ok for _ in range(4)]

        assert asyncio.run(bumps()) == [True, True, True, False]
        (info,) = gateway.triggers_state().triggers
        assert info.status == "fired"
        assert asyncio.run(gateway.call(agent, "count", {})).value == {"count": 3}
    finally:
        env.close()


def test_a_check_may_not_call_a_servers_write_tool(tmp_path: Path, monkeypatch) -> None:
    """A server's write cannot be rolled back, so a check naming one is an eval error (the
    trigger stays armed) and the write never runs."""
    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    doc = _doc(
        tmp_path,
        "counter.py",
        "triggers:\n"
        "  - id: sneaky\n"
        "    when: {type: state, check: [{tool: bump, predicate: {exists: true}}]}\n"
        "    actions: [{type: permission, role: agent, action: disable, tools: [bump]}]\n",
    )
    env = Environment.load(doc)
    try:
        gateway = Gateway(env)
        agent = Principal("agent")
        assert asyncio.run(gateway.call(agent, "bump", {})).value == 1
        state = gateway.triggers_state()
        assert state.triggers[0].status == "armed"
        (event,) = [e for e in state.events if e.event == "eval_error"]
        assert "'bump' is a server's write tool" in (event.detail or "")
        assert asyncio.run(gateway.call(agent, "count", {})).value == {"count": 1}
    finally:
        env.close()


def test_an_instance_id_made_again_at_once_gets_a_live_child_each_time(env: Environment) -> None:
    """Dropping an instance releases its child later, on the children's loop; an instance
    made again under the same id (agent-env check does so call after call) must not have
    its new child taken by that release."""
    gateway = Gateway(env)

    async def rounds() -> list[bool]:
        out = []
        for _ in range(4):
            gateway.create_instance("again")
            out.append(
                (
                    await gateway.call(
                        Principal("agent"), "add", {"a": 1, "b": 2}, instance="again"
                    )
                ).ok
            )
            gateway.drop_instance("again")
        return out

    assert asyncio.run(rounds()) == [True] * 4


@pytest.mark.xfail(
    strict=True,
    reason="known defect (found 2026-12-04): counted once no start is in flight, refused "
    "instances still spend processes (7 -> 10 started over 5); the old check passed only "
    "while the warm pool's top-ups were still starting. Remove this mark with the fix.",
)
def test_a_child_sent_nothing_goes_back_to_the_pool(env: Environment) -> None:
    """An instance whose calls the gateway refused never reached its server: its process is
    as clean as a fresh one, so it serves the next instance instead of being stopped."""

    def settled() -> int:
        """Children started so far, once no start is in flight (a top-up may finish after
        the rounds' sleep on a loaded machine, and would be counted in the next rounds)."""
        deadline = time.monotonic() + 30
        while runtime.stats()["starting"] and time.monotonic() < deadline:
            time.sleep(0.05)
        return runtime.stats()["started"]

    gateway = Gateway(env)
    runtime = env.server
    assert runtime is not None

    async def refused_rounds() -> None:
        for i in range(5):
            gateway.create_instance(f"r{i}")
            bad = await gateway.call(Principal("agent"), "add", {"a": "x"}, instance=f"r{i}")
            assert bad.error is not None and bad.error.kind == "invalid_arguments"
            gateway.drop_instance(f"r{i}")
        await asyncio.sleep(0.5)  # the releases run on the children's loop

    asyncio.run(refused_rounds())
    started_before = settled()
    asyncio.run(refused_rounds())
    assert settled() == started_before  # no process was spent

    async def used() -> None:
        gateway.create_instance("used")
        assert (await gateway.call(Principal("agent"), "add", {"a": 1, "b": 1}, instance="used")).ok
        gateway.drop_instance("used")
        await asyncio.sleep(0.5)

    asyncio.run(used())
    assert settled() > started_before  # a used one is stopped and replaced
