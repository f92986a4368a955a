"""RemoteA2AAgent and send_instruction against real a2a-sdk servers on 127.0.0.1: what a
turn sends, and a remote agent that is down, slow, answers garbage, or fails, each
ending in an AgentError that says which."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.helpers import new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import Task, TaskState, TaskStatus
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentenv.agents import AgentError, AgentTurn, OracleAgent, make_agent
from agentenv.agents.a2a import MCP_CONFIG_URI, PEER_AGENTS_URI
from agentenv.agents.a2a.client import RemoteA2AAgent, send_instruction
from agentenv.agents.a2a.mcp_tools import McpConfig, NoTools
from agentenv.agents.a2a.server import JSONRPC_PATH, build_agent_card, serve_agent
from agentenv.registry import RegistryError
from agentenv.serve.background import BackgroundServer
from agentenv.spec.task import SolutionTurn

WAIT_S = 10.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def turn(**fields: Any) -> AgentTurn:
    defaults: dict[str, Any] = {
        "prompt_id": "p-1",
        "prompt": "Do the thing.",
        "tools": NoTools(),
        "agent_name": "alice",
        "role": "teller",
    }
    return AgentTurn(**{**defaults, **fields})


class Recorder:
    """Answers with what it was given."""

    name = "recorder"

    async def run_turn(self, t: AgentTurn) -> str:
        return json.dumps(
            {
                "prompt": t.prompt,
                "prompt_id": t.prompt_id,
                "agent_name": t.agent_name,
                "role": t.role,
                "system_prompt": t.system_prompt,
                "history": t.history,
                "conversation_turn": t.conversation_turn,
                "max_turns": t.max_turns,
                "model": t.model,
                "model_params": t.model_params,
                "config": t.config,
                "peers": t.peers,
                "solution": t.solution.model_dump() if t.solution else None,
                "tools": [tool.name for tool in t.tools.list_tools()],
            }
        )


@pytest.fixture
async def recorder() -> AsyncIterator[str]:
    server = await serve_agent(Recorder())
    try:
        yield server.url
    finally:
        await server.stop()


SOLUTION = SolutionTurn.model_validate(
    {"calls": [{"tool": "deposit", "args": {"amount": 5}}], "response": "Done."}
)


async def test_a_turn_sends_the_prompt_and_everything_the_agent_needs(recorder: str) -> None:
    agent = RemoteA2AAgent(recorder, timeout=WAIT_S)
    answer = await agent.run_turn(
        turn(
            system_prompt="Be brief.",
            history=[{"role": "user", "text": "hi"}],
            conversation_turn=2,
            max_turns=7,
            model="m",
            model_params={"temperature": 0, "n": 3},
            config={"limit": 10, "nested": {"k": [1, 2.5]}},
            peers={"bob": "http://127.0.0.1:2"},
            solution=SOLUTION,
        )
    )
    got = json.loads(answer)
    assert got == {
        "prompt": "Do the thing.",
        "prompt_id": "p-1",
        "agent_name": "alice",
        "role": "teller",
        "system_prompt": "Be brief.",
        "history": [{"role": "user", "text": "hi"}],
        "conversation_turn": 2,
        "max_turns": 7,
        "model": "m",
        "model_params": {"temperature": 0, "n": 3},
        "config": {"limit": 10, "nested": {"k": [1, 2.5]}},
        "peers": {"bob": "http://127.0.0.1:2"},
        "solution": None,  # this card does not ask for reference solutions
        "tools": [],
    }
    assert isinstance(got["config"]["limit"], int)


async def test_a_bound_agent_sends_where_its_environment_is() -> None:
    """The metadata as it arrives, seen by a plain a2a-sdk executor."""
    seen: list[dict[str, Any]] = []

    class Spy(AgentExecutor):
        async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
            from google.protobuf.json_format import MessageToDict

            assert context.message is not None
            seen.append(MessageToDict(context.message.metadata))
            await event_queue.enqueue_event(new_text_message("seen", context_id=context.context_id))

        async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
            return None

    server = await serve_executor(Spy())
    try:
        agent = RemoteA2AAgent(server.url, timeout=WAIT_S).bind(
            [McpConfig(url="http://127.0.0.1:1/mcp", token="t", role="teller", env_id="bank")]
        )
        assert await agent.run_turn(turn(peers={"bob": "http://127.0.0.1:2"})) == "seen"
    finally:
        await server.stop()
    assert seen[0][MCP_CONFIG_URI] == {
        "url": "http://127.0.0.1:1/mcp",
        "token": "t",
        "role": "teller",
        "env_id": "bank",
    }
    assert seen[0][PEER_AGENTS_URI] == {"bob": "http://127.0.0.1:2"}


async def test_the_oracle_gets_the_reference_solution_and_others_only_when_asked(
    recorder: str,
) -> None:
    oracle = await serve_agent(OracleAgent())
    try:
        assert await RemoteA2AAgent(oracle.url).run_turn(turn(solution=SOLUTION)) == "Done."
    finally:
        await oracle.stop()
    always = RemoteA2AAgent(recorder, solution="always")
    sent = json.loads(await always.run_turn(turn(solution=SOLUTION)))["solution"]
    assert sent == SOLUTION.model_dump()
    never = make_agent(f"a2a:{recorder}?solution=never")
    assert json.loads(await never.run_turn(turn(solution=SOLUTION)))["solution"] is None


def test_a2a_specs_make_remote_agents() -> None:
    agent = make_agent("a2a:http://127.0.0.1:9100/?timeout=30&card_timeout=2&solution=never")
    assert isinstance(agent, RemoteA2AAgent)
    assert (agent.url, agent.timeout, agent.card_timeout, agent.solution) == (
        "http://127.0.0.1:9100",
        30.0,
        2.0,
        "never",
    )
    for spec, message in [
        ("a2a:", "give the agent's URL"),
        ("a2a:127.0.0.1:9100", "http(s) URL"),
        ("a2a:http://h?timeout=soon", "timeout must be a number of seconds"),
        ("a2a:http://h?solution=maybe", "solution must be auto, always or never"),
        ("a2a:http://h?timeout=0", "timeouts must be positive"),
    ]:
        with pytest.raises(RegistryError, match=re.escape(message)):
            make_agent(spec)


# -- a remote agent that lets us down -------------------------------------------------------


async def expect_error(agent: RemoteA2AAgent, match: str) -> str:
    with pytest.raises(AgentError) as info:
        await agent.run_turn(turn())
    assert match in str(info.value), str(info.value)
    return str(info.value)


async def test_a_remote_agent_that_is_down() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    message = await expect_error(RemoteA2AAgent(url), "is unreachable")
    assert (
        message
        == f"the A2A agent at {url} is unreachable: ConnectError: All connection attempts failed"
    )
    with pytest.raises(AgentError, match="is unreachable"):
        await send_instruction(url, "hello", timeout=5)


class Sleeper:
    name = "sleeper"

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()

    async def run_turn(self, t: AgentTurn) -> str:
        self.started.set()
        try:
            await asyncio.sleep(60)
        finally:
            self.stopped.set()
        return "late"


async def test_a_slow_remote_agent_times_out_and_its_task_is_canceled() -> None:
    sleeper = Sleeper()
    server = await serve_agent(sleeper)
    try:
        agent = RemoteA2AAgent(server.url, timeout=1)
        message = await expect_error(agent, "did not finish within 1 s")
        assert message == f"the A2A agent at {server.url} did not finish within 1 s"
        assert sleeper.started.is_set()
        await asyncio.wait_for(sleeper.stopped.wait(), WAIT_S)  # the remote turn was canceled
    finally:
        await server.stop()


async def test_a_remote_turn_is_canceled_when_the_caller_gives_up() -> None:
    sleeper = Sleeper()
    server = await serve_agent(sleeper)
    try:
        pending = asyncio.ensure_future(RemoteA2AAgent(server.url).run_turn(turn()))
        await asyncio.wait_for(sleeper.started.wait(), WAIT_S)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        await asyncio.wait_for(sleeper.stopped.wait(), WAIT_S)
    finally:
        await server.stop()


async def test_a_failed_remote_task_says_why() -> None:
    class Refuser:
        name = "refuser"

        async def run_turn(self, t: AgentTurn) -> str:
            raise AgentError("I will not")

    server = await serve_agent(Refuser())
    try:
        message = await expect_error(RemoteA2AAgent(server.url), "failed the task")
    finally:
        await server.stop()
    assert message == f"the A2A agent at {server.url} failed the task: I will not"


# Garbage: a server that serves what it likes under /<kind>/.


def garbage_app() -> Starlette:
    async def card(request: Request) -> Response:
        kind = request.path_params["kind"]
        base = str(request.base_url).rstrip("/") + f"/{kind}"
        if kind == "notjson":
            return PlainTextResponse("<html>not json</html>", media_type="application/json")
        if kind == "badcard":
            return JSONResponse({"name": 5})
        if kind == "noiface":
            return JSONResponse({"name": "x", "capabilities": {}})
        body = agent_card_to_dict(build_agent_card(base, name="garbage"))
        if kind == "noext":
            body["capabilities"]["extensions"] = []
        return JSONResponse(body)

    async def rpc(request: Request) -> Response:
        await request.body()
        kind = request.path_params["kind"]
        if kind == "html":
            return PlainTextResponse("<html>hello</html>", media_type="text/html")
        if kind == "nojsonrpc":
            return JSONResponse({"foo": 1})
        if kind == "e500":
            return PlainTextResponse("internal", status_code=500)
        if kind == "badstate":
            return JSONResponse(
                {"jsonrpc": "2.0", "id": 1, "result": {"task": {"status": {"state": "NOPE"}}}}
            )
        return PlainTextResponse("?", status_code=404)

    return Starlette(
        routes=[
            Route("/{kind}/.well-known/agent-card.json", card, methods=["GET"]),
            Route("/{kind}" + JSONRPC_PATH, rpc, methods=["POST"]),
        ]
    )


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def garbage() -> AsyncIterator[str]:
    import uvicorn

    server = await BackgroundServer.start(
        lambda port: uvicorn.Server(
            uvicorn.Config(garbage_app(), port=port, log_level="warning", lifespan="off")
        )
    )
    try:
        yield server.url
    finally:
        await server.stop()


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("notjson", "has no valid agent card: Failed to parse JSON"),
        ("badcard", "has no valid agent card: Failed to validate agent card structure"),
        ("noiface", "names no interface to send messages to"),
        ("noext", "does not declare urn:agentenv:mcp-config/v1 in its agent card"),
        ("missing/x", "has no valid agent card: Failed to fetch agent card"),
        ("html", "answered with something that is not a valid A2A reply"),
        ("nojsonrpc", "answered with something that is not a valid A2A reply"),
        ("e500", "answered with something that is not a valid A2A reply"),
        ("badstate", "stopped answering before the task ended"),
    ],
)
async def test_a_remote_agent_that_answers_garbage(garbage: str, kind: str, expected: str) -> None:
    url = f"{garbage}/{kind}"
    message = await expect_error(RemoteA2AAgent(url, timeout=5), expected)
    assert message.startswith(f"the A2A agent at {url} "), message


# -- replies that are not a completed task --------------------------------------------------


class Replier(AgentExecutor):
    """A plain a2a-sdk agent: answers with a message, or asks for input."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        if self.mode == "message":
            await event_queue.enqueue_event(
                new_text_message("a message, not a task", context_id=context.context_id)
            )
            return
        task = Task(
            id=context.task_id,
            context_id=context.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
        )
        await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.requires_input(updater.new_agent_message([new_text_part("which account?")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


async def serve_executor(executor: AgentExecutor) -> BackgroundServer:
    import uvicorn

    async def card(request: Request) -> Response:
        base = str(request.base_url).rstrip("/")
        return JSONResponse(agent_card_to_dict(build_agent_card(base, name="plain")))

    placeholder = build_agent_card("http://127.0.0.1", name="plain")
    handler = DefaultRequestHandler(
        agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=placeholder
    )
    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", card, methods=["GET"]),
            *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH),
        ]
    )
    return await BackgroundServer.start(
        lambda port: uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    )


async def test_an_answer_as_a_message_is_the_response() -> None:
    server = await serve_executor(Replier("message"))
    try:
        assert await RemoteA2AAgent(server.url).run_turn(turn()) == "a message, not a task"
        assert await send_instruction(server.url, "hi", {"k": "v"}) == "a message, not a task"
    finally:
        await server.stop()


async def test_a_remote_agent_that_asks_for_input_fails_the_turn() -> None:
    server = await serve_executor(Replier("input"))
    try:
        message = await expect_error(RemoteA2AAgent(server.url), "asks for more")
    finally:
        await server.stop()
    assert message == (
        f"the A2A agent at {server.url} asks for more (TASK_STATE_INPUT_REQUIRED), which one "
        "message cannot give: which account?"
    )


async def test_send_instruction_gets_the_answer(recorder: str) -> None:
    answer = json.loads(await send_instruction(recorder, "Ping.", {"prompt_id": "trigger:t1"}))
    assert (answer["prompt"], answer["prompt_id"]) == ("Ping.", "trigger:t1")
