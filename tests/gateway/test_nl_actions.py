"""nl trigger actions over A2A: the instruction reaches a real executor agent (an a2a-sdk
server on 127.0.0.1), which acts in the same instance through the served gateway while
the firing waits; an executor that is down, missing, failing or slow fails the firing
with a clear reason and the gateway goes on."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentenv import Environment, Gateway
from agentenv.agents import AgentError, AgentTurn
from agentenv.agents.a2a.mcp_tools import McpConfig
from agentenv.agents.a2a.nl import a2a_nl_sender, served_gateway_locator
from agentenv.agents.a2a.server import serve_agent
from agentenv.env.tool import SYSTEM, Principal
from agentenv.serve.background import BackgroundServer
from agentenv.serve.server import make_server
from agentenv.spec.triggers import TriggerRegistration

AGENT = Principal("agent", name="ada")
SUPERVISOR = Principal("supervisor", name="sam")
WAIT_S = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    def __init__(self, gateway: Gateway, server: BackgroundServer, tokens: dict[str, str]):
        self.gateway = gateway
        self.server = server
        self.tokens = tokens  # secret -> role


@pytest.fixture
async def served(bank_env: Environment) -> AsyncIterator[Served]:
    """The bank gateway served with tokens, its nl actions sent over A2A with them."""
    tokens = {uuid.uuid4().hex: "agent", uuid.uuid4().hex: "supervisor"}
    gateway = Gateway(bank_env)
    server = await BackgroundServer.start(
        lambda port: make_server(gateway, port=port, tokens=tokens)
    )
    gateway.nl_sender = a2a_nl_sender(served_gateway_locator(server.url, tokens))
    try:
        yield Served(gateway, server, tokens)
    finally:
        await server.stop()


class Freezer:
    """Freezes the account its instruction ends with; answers what it was told."""

    name = "freezer"

    def __init__(self) -> None:
        self.turns: list[AgentTurn] = []

    async def run_turn(self, turn: AgentTurn) -> str:
        self.turns.append(turn)
        account = turn.prompt.rsplit(" ", 1)[-1]
        result = await turn.tools.call("freeze", {"account_id": account})
        if not result.ok:
            raise AgentError(result.text)
        return f"froze {account}"


def registration(
    executor: dict[str, Any] | None, watch: str = "agent", **trigger: Any
) -> TriggerRegistration:
    return TriggerRegistration.model_validate(
        {
            "watch_roles": [watch],
            **({"executor": executor} if executor else {}),
            "triggers": [
                {
                    "id": "freeze-on-deposit",
                    "when": {"type": "action", "tool": "deposit"},
                    "actions": [{"type": "nl", "text": "Freeze account ${args.account_id}"}],
                    **trigger,
                }
            ],
        }
    )


async def fire(gateway: Gateway, instance: str = "default", who: Principal = AGENT) -> Any:
    return await gateway.call(who, "deposit", {"account_id": "a2", "amount": 5}, instance=instance)


def trigger_info(gateway: Gateway, instance: str = "default") -> Any:
    return gateway.triggers_state(instance).triggers[0]


async def test_the_executor_acts_in_the_instance_that_fired(served: Served) -> None:
    freezer = Freezer()
    executor = await serve_agent(freezer)
    gateway = served.gateway
    gateway.create_instance("ep-1")
    try:
        await gateway.register_triggers(
            SYSTEM,
            registration({"a2a_url": executor.url, "role": "supervisor", "timeout_seconds": 10}),
            instance="ep-1",
        )
        result = await fire(gateway, "ep-1")
    finally:
        await executor.stop()
    assert result.ok, result.text
    info = trigger_info(gateway, "ep-1")
    assert (info.status, info.error) == ("fired", None)
    inst = gateway.instance("ep-1")
    assert inst.state.get("accounts", "a2").get("frozen") is True
    assert gateway.instance().state.get("accounts", "a2").get("frozen") is None  # not default
    # The executor's call came in while the firing waited, under the executor's role.
    assert [(r.kind, r.tool or r.event, r.role, r.session) for r in inst.trajectory][-3:] == [
        ("call", "deposit", "agent", None),
        ("call", "freeze", "supervisor", "trigger:freeze-on-deposit"),
        ("trigger", "fired", "system", None),
    ]
    [turn] = freezer.turns
    assert turn.prompt == "Freeze account a2"
    assert (turn.prompt_id, turn.role) == ("trigger:freeze-on-deposit", "supervisor")
    assert [e.event for e in gateway.triggers_state("ep-1").log] == [
        "added",
        "detected",
        "action_ok",
        "fired",
    ]


async def test_the_instruction_carries_the_trigger_and_the_provoking_call(
    served: Served,
) -> None:
    class Recorder:
        name = "recorder"

        async def run_turn(self, turn: AgentTurn) -> str:
            return "ok"

    seen: list[dict[str, Any]] = []
    original = served.gateway.nl_sender

    async def spy(request: Any) -> str:
        from agentenv.agents.a2a.nl import nl_metadata

        seen.append(nl_metadata(request))
        return await original(request)

    served.gateway.nl_sender = spy
    executor = await serve_agent(Recorder())
    try:
        await served.gateway.register_triggers(
            SYSTEM, registration({"a2a_url": executor.url, "role": "supervisor"})
        )
        await fire(served.gateway)
    finally:
        await executor.stop()
    assert trigger_info(served.gateway).status == "fired"
    [meta] = seen
    assert {k: meta[k] for k in ("trigger_id", "prompt_id", "env", "instance", "role")} == {
        "trigger_id": "freeze-on-deposit",
        "prompt_id": "trigger:freeze-on-deposit",
        "env": "bank",
        "instance": "default",
        "role": "supervisor",
    }
    assert json.loads(meta["trigger_scope"])["args"] == {"account_id": "a2", "amount": 5}


async def test_an_executor_configured_with_its_own_environment(bank_env: Environment) -> None:
    """A gateway that does not know its URL sends only the instruction; an executor
    started with the environment's endpoint (`agent serve --mcp-url`) still acts."""
    tokens = {uuid.uuid4().hex: "supervisor"}
    gateway = Gateway(bank_env, nl_sender=a2a_nl_sender())
    server = await BackgroundServer.start(
        lambda port: make_server(gateway, port=port, tokens=tokens)
    )
    config = McpConfig(url=server.url + "/mcp", token=next(iter(tokens)), role="supervisor")
    executor = await serve_agent(Freezer(), mcp=[config])
    try:
        await gateway.register_triggers(SYSTEM, registration({"a2a_url": executor.url}))
        await fire(gateway)
    finally:
        await executor.stop()
        await server.stop()
    assert trigger_info(gateway).status == "fired", trigger_info(gateway).error
    assert gateway.instance().state.get("accounts", "a2").get("frozen") is True


async def failure(
    gateway: Gateway, executor: dict[str, Any] | None, who: Principal = AGENT, **trigger: Any
) -> str:
    await gateway.register_triggers(SYSTEM, registration(executor, who.role, **trigger))
    result = await fire(gateway, who=who)
    assert result.ok  # the provoking call itself went through
    info = trigger_info(gateway)
    assert (info.status, info.failure_count) == ("armed", 1)  # a failure re-arms it
    assert info.error is not None
    log = [e for e in gateway.triggers_state().log if e.event == "action_failed"]
    assert [e.detail for e in log] == [info.error]
    return info.error


async def test_an_executor_that_is_down(served: Served) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    error = await failure(served.gateway, {"a2a_url": url, "timeout_seconds": 5})
    assert error == (
        f"actions[0] (nl): the A2A agent at {url} is unreachable: ConnectError: All "
        "connection attempts failed"
    )
    # The gateway goes on: another call, on the same instance, is served.
    assert (await served.gateway.call(AGENT, "list_accounts", {})).ok


async def test_a_registration_without_an_executor(served: Served) -> None:
    error = await failure(served.gateway, None)
    assert error == (
        "actions[0] (nl): the trigger registration names no executor agent "
        "(executor.a2a_url) to send the instruction to"
    )


async def test_an_executor_that_fails_its_task(served: Served) -> None:
    executor = await serve_agent(Freezer())
    try:
        # As the agent role, it may not freeze: its task fails, and so does the firing.
        error = await failure(
            served.gateway, {"a2a_url": executor.url, "role": "agent"}, who=SUPERVISOR
        )
    finally:
        await executor.stop()
    assert error == (
        f"actions[0] (nl): the A2A agent at {executor.url} failed the task: "
        "Error: role 'agent' may not call 'freeze'"
    )
    assert served.gateway.instance().state.get("accounts", "a2").get("frozen") is None


class Sleeper:
    name = "sleeper"

    def __init__(self) -> None:
        self.stopped = asyncio.Event()

    async def run_turn(self, turn: AgentTurn) -> str:
        try:
            await asyncio.sleep(60)
        finally:
            self.stopped.set()
        return "late"


@pytest.mark.parametrize(
    ("executor_timeout", "barrier", "expected"),
    [
        (1, None, "actions[0] (nl): the A2A agent at {url} did not finish within 1 s"),
        (30, {"timeout_seconds": 1}, "the firing took longer than its barrier's 1 s"),
    ],
)
async def test_a_slow_executor_is_cut_off(
    served: Served, executor_timeout: float, barrier: Any, expected: str
) -> None:
    sleeper = Sleeper()
    executor = await serve_agent(sleeper)
    extra: dict[str, Any] = {"barrier": barrier} if barrier else {}
    try:
        error = await failure(
            served.gateway, {"a2a_url": executor.url, "timeout_seconds": executor_timeout}, **extra
        )
        await asyncio.wait_for(sleeper.stopped.wait(), WAIT_S)  # its task was canceled
    finally:
        await executor.stop()
    assert error == expected.format(url=executor.url)
    # The instance's lock came back whole: calls are served and serialised as before.
    inst = served.gateway.instance()
    assert not inst.lock.locked()
    assert (await served.gateway.call(AGENT, "list_accounts", {})).ok


def test_a_gateway_has_no_sender_unless_given_one(bank_env: Environment) -> None:
    from agentenv.gateway.firing import no_nl_sender

    assert Gateway(bank_env).nl_sender is no_nl_sender  # (test_triggers checks its message)
    sender = a2a_nl_sender()
    assert Gateway(bank_env, nl_sender=sender).nl_sender is sender


async def test_a_served_gateway_tells_the_executor_where_it_is() -> None:
    from agentenv.gateway.firing import NlInstruction
    from agentenv.spec.triggers import Executor

    def request(role: str | None, instance: str = "default") -> NlInstruction:
        executor = Executor(a2a_url="http://127.0.0.1:1", role=role)
        return NlInstruction("x", "t", executor, "bank", instance)

    trusted = served_gateway_locator("http://127.0.0.1:8765/")
    assert await trusted(request("supervisor", "ep-1")) == McpConfig(
        url="http://127.0.0.1:8765/instances/ep-1/mcp", role="supervisor"
    )
    tokened = served_gateway_locator("http://127.0.0.1:8765", {"s3cret": "supervisor"})
    assert await tokened(request("supervisor")) == McpConfig(
        url="http://127.0.0.1:8765/mcp", token="s3cret", role="supervisor"
    )
    assert await tokened(request("agent")) is None  # no token for its role: no environment
