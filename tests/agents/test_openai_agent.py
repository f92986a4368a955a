"""The OpenAI-compatible agent against a local OpenAI-compatible server started by the test.

The server is a small FastAPI app (uvicorn, in a thread, on a free loopback port) that
answers POST /v1/chat/completions from a scripted list of recorded responses and keeps
every request it got. Tools run through a real Gateway on a small notes environment.
"""

from __future__ import annotations

import json
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "openai", reason="the openai agent needs the optional `openai` package (pip install -e .[llm])"
)

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agentenv import Environment, Gateway, Principal
from agentenv.agents import (
    AgentError,
    AgentTurn,
    OpenAIAgent,
    make_agent,
    make_openai_agent,
)
from agentenv.gateway import Binding, ToolClient
from agentenv.spec.task import TaskSpec
from agentenv.tasks import TaskContext, run_task

NOTES_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: notes
roles:
  - name: agent
state:
  notes: {}
seed:
  notes:
    - {id: n1, text: hello}
tools:
  - module: notes_tools.py
  - name: list_notes
    crud: {collection: notes, op: list}
"""

NOTES_TOOLS = '''
from agentenv import ToolContext, tool


@tool
def add_note(ctx: ToolContext, id: str, text: str, pinned: bool = False) -> dict:
    """Add a note.

    Args:
        id: The note's id.
        text: What the note says.
    """
    return ctx.state.put("notes", {"id": id, "text": text, "pinned": pinned})
'''

START_TIMEOUT = 10.0
MODEL = "test-model"


# -- the scripted server -----------------------------------------------------------------


class ScriptedServer:
    """An OpenAI-compatible chat-completions endpoint answering from a script."""

    def __init__(self) -> None:
        self.script: list[tuple[int, dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.base_url = ""
        self.app = FastAPI()

        @self.app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            self.requests.append(await request.json())
            self.headers.append(dict(request.headers))
            if not self.script:
                error = {"error": {"message": "the script has no response left"}}
                return JSONResponse(error, status_code=400)
            status, body = self.script.pop(0)
            # A short Retry-After keeps the client's retries fast (it honours the header).
            headers = {"retry-after-ms": "5"} if status == 429 or status >= 500 else {}
            return JSONResponse(body, status_code=status, headers=headers)

    def reset(self, *responses: tuple[int, dict[str, Any]] | dict[str, Any]) -> None:
        """Forget past requests; answer the next ones with `responses` in order."""
        self.requests.clear()
        self.headers.clear()
        self.script = [r if isinstance(r, tuple) else (200, r) for r in responses]


@pytest.fixture(scope="module")
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    uv = uvicorn.Server(uvicorn.Config(scripted.app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not uv.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            uv.should_exit = True
            sock.close()
            raise RuntimeError("the scripted OpenAI server did not start")
        time.sleep(0.01)
    scripted.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield scripted
    finally:
        uv.should_exit = True
        thread.join(timeout=START_TIMEOUT)
        sock.close()
        assert not thread.is_alive(), "the scripted OpenAI server did not stop"


@pytest.fixture
def chat(server: ScriptedServer) -> ScriptedServer:
    server.reset()
    return server


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OpenAI settings leak in from the machine running the tests."""
    import os

    for name in list(os.environ):
        if name.startswith("AGENTENV_OPENAI_") or name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
            monkeypatch.delenv(name)


# -- responses ---------------------------------------------------------------------------


def completion(
    content: str | None = None,
    calls: list[tuple[str, str, str]] | None = None,
    usage: tuple[int, int] = (10, 5),
) -> dict[str, Any]:
    """A recorded chat.completion: text, or tool calls as (id, name, arguments JSON)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": arguments}}
            for cid, name, arguments in calls
        ]
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": usage[0] + usage[1],
        },
    }


def add_note_call(cid: str = "call_1", note_id: str = "n2", text: str = "buy milk") -> Any:
    return completion(calls=[(cid, "add_note", json.dumps({"id": note_id, "text": text}))])


# -- the environment ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def notes_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder: Path = tmp_path_factory.mktemp("notes")
    (folder / "notes_tools.py").write_text(textwrap.dedent(NOTES_TOOLS))
    (folder / "env.yaml").write_text(textwrap.dedent(NOTES_ENV))
    return Environment.load(folder)


@pytest.fixture
def gw(notes_env: Environment) -> Gateway:
    return Gateway(notes_env)


def make_turn(gw: Gateway, prompt_id: str = "p1", **fields: Any) -> AgentTurn:
    client = ToolClient(Principal("agent", name="llm"), [Binding("notes", gw)], session=prompt_id)
    values: dict[str, Any] = {
        "prompt_id": prompt_id,
        "prompt": "Note that I must buy milk.",
        "tools": client,
        "agent_name": "llm",
        "role": "agent",
        "system_prompt": "You keep notes.",
    }
    values.update(fields)
    return AgentTurn(**values)


def agent_for(chat: ScriptedServer, **options: Any) -> OpenAIAgent:
    options.setdefault("max_retries", 0)
    return make_openai_agent(MODEL, base_url=chat.base_url, **options)


def notes(gw: Gateway) -> dict[str, str]:
    return {r["id"]: r["text"] for r in gw.instance().state.list("notes")}


# -- the loop ----------------------------------------------------------------------------


async def test_a_tool_call_then_an_answer(chat: ScriptedServer, gw: Gateway) -> None:
    chat.reset(add_note_call(), completion("I noted it.", usage=(30, 4)))
    agent = agent_for(chat, temperature=0.2, seed=1)
    turn = make_turn(
        gw, model_params={"seed": 7, "parallel_tool_calls": False, "max_tokens": 64, "top_k": 5}
    )

    assert await agent.run_turn(turn) == "I noted it."

    assert notes(gw) == {"n1": "hello", "n2": "buy milk"}
    (record,) = gw.instance().trajectory.calls()
    assert (record.tool, record.role, record.principal, record.session) == (
        "add_note",
        "agent",
        "llm",
        "p1",
    )
    assert record.args == {"id": "n2", "text": "buy milk"}

    first, second = chat.requests
    assert first["model"] == MODEL
    assert first["messages"] == [
        {"role": "system", "content": "You keep notes."},
        {"role": "user", "content": "Note that I must buy milk."},
    ]
    # agent settings, overridden per prompt by model_params; unknown keys go in the body too
    assert first["temperature"] == 0.2
    assert first["seed"] == 7
    assert first["parallel_tool_calls"] is False
    assert first["max_tokens"] == 64
    assert first["top_k"] == 5
    tools = {t["function"]["name"]: t for t in first["tools"]}
    assert set(tools) == {"add_note", "list_notes"}
    assert tools["add_note"]["type"] == "function"
    assert tools["add_note"]["function"]["description"].startswith("Add a note.")
    schema = {t.name: t.input_schema for t in gw.list_tools(Principal("agent"))}
    assert tools["add_note"]["function"]["parameters"] == schema["add_note"]
    assert tools["add_note"]["function"]["parameters"]["required"] == ["id", "text"]

    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assistant, tool_message = second["messages"][2:]
    assert assistant["tool_calls"] == [
        {
            "id": "call_1",
            "type": "function",
            "function": {"name": "add_note", "arguments": '{"id": "n2", "text": "buy milk"}'},
        }
    ]
    assert tool_message["tool_call_id"] == "call_1"
    assert json.loads(tool_message["content"]) == {"id": "n2", "text": "buy milk", "pinned": False}
    # a local server with no key gets the placeholder
    assert chat.headers[0]["authorization"] == "Bearer EMPTY"

    (stats,) = agent.turns
    assert stats.prompt_id == "p1" and stats.model == MODEL
    assert stats.finished and stats.tool_calls == 1 and stats.invalid_arguments == 0
    assert [u.total_tokens for u in stats.requests] == [15, 34]
    assert (stats.usage.prompt_tokens, stats.usage.completion_tokens) == (40, 9)
    assert agent.usage.total_tokens == 49
    assert stats.to_json()["usage"] == {
        "prompt_tokens": 40,
        "completion_tokens": 9,
        "total_tokens": 49,
    }


async def test_usage_sums_over_prompts_and_the_turn_may_choose_the_model(
    chat: ScriptedServer, gw: Gateway
) -> None:
    agent = agent_for(chat)
    chat.reset(completion("one", usage=(3, 1)))
    assert await agent.run_turn(make_turn(gw, "p1")) == "one"
    chat.reset(completion("two", usage=(5, 2)))
    turn = make_turn(gw, "p2", model="bigger-model", system_prompt=None)
    assert await agent.run_turn(turn) == "two"
    assert chat.requests[0]["model"] == "bigger-model"
    assert [m["role"] for m in chat.requests[0]["messages"]] == ["user"]
    assert "temperature" not in chat.requests[0]  # unset: the server's default
    assert [t.prompt_id for t in agent.turns] == ["p1", "p2"]
    assert agent.usage.prompt_tokens == 8 and agent.usage.total_tokens == 11


async def test_parallel_tool_calls_run_in_the_given_order(
    chat: ScriptedServer, gw: Gateway
) -> None:
    chat.reset(
        completion(
            calls=[
                ("a", "add_note", '{"id": "n2", "text": "first"}'),
                ("b", "list_notes", "{}"),
            ]
        ),
        completion("Done."),
    )
    agent = agent_for(chat)
    assert await agent.run_turn(make_turn(gw)) == "Done."
    tool_messages = [m for m in chat.requests[1]["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_messages] == ["a", "b"]
    listed = json.loads(tool_messages[1]["content"])
    assert [n["id"] for n in listed["notes"]] == ["n1", "n2"]  # it saw the first write
    assert agent.turns[0].tool_calls == 2


async def test_malformed_arguments_are_sent_back_and_the_model_retries(
    chat: ScriptedServer, gw: Gateway
) -> None:
    chat.reset(
        completion(calls=[("bad", "add_note", '{"id": "n2", "text": ')]),
        completion(calls=[("list", "add_note", '["n2", "milk"]')]),
        add_note_call("good"),
        completion("Fixed it."),
    )
    agent = agent_for(chat)
    assert await agent.run_turn(make_turn(gw)) == "Fixed it."

    retry = chat.requests[1]["messages"][-1]
    assert retry["role"] == "tool" and retry["tool_call_id"] == "bad"
    assert "not valid JSON" in retry["content"]
    assert "'add_note' was not called" in retry["content"]
    not_object = chat.requests[2]["messages"][-1]
    assert "must be a JSON object" in not_object["content"]
    # the malformed calls never reached the gateway; the good one did
    assert [r.args for r in gw.instance().trajectory.calls()] == [{"id": "n2", "text": "buy milk"}]
    stats = agent.turns[0]
    assert (stats.invalid_arguments, stats.tool_calls, len(stats.requests)) == (2, 1, 4)


async def test_an_unknown_tool_gets_the_gateways_error(chat: ScriptedServer, gw: Gateway) -> None:
    chat.reset(completion(calls=[("x", "launch_rocket", "{}")]), completion("I cannot."))
    agent = agent_for(chat)
    assert await agent.run_turn(make_turn(gw)) == "I cannot."
    assert chat.requests[1]["messages"][-1]["content"] == "Error: unknown tool 'launch_rocket'"
    (record,) = gw.instance().trajectory.calls()
    assert record.error is not None and record.error.kind == "unknown_tool"


async def test_a_failing_tool_call_gets_its_error_text(chat: ScriptedServer, gw: Gateway) -> None:
    chat.reset(completion(calls=[("x", "add_note", '{"id": "n9"}')]), completion("Hmm."))
    agent = agent_for(chat)
    assert await agent.run_turn(make_turn(gw)) == "Hmm."
    content = chat.requests[1]["messages"][-1]["content"]
    assert content.startswith("Error: ") and "text" in content
    assert notes(gw) == {"n1": "hello"}


async def test_max_turns_is_honoured(chat: ScriptedServer, gw: Gateway) -> None:
    chat.reset(
        completion("Adding.", calls=[("1", "add_note", '{"id": "a", "text": "x"}')]),
        completion("Adding more.", calls=[("2", "add_note", '{"id": "b", "text": "y"}')]),
        completion("never asked for"),
    )
    agent = agent_for(chat, max_turns=5)
    response = await agent.run_turn(make_turn(gw, max_turns=2))  # the turn's limit wins
    assert len(chat.requests) == 2
    assert response.startswith("Adding more.\n\n")
    assert "stopped after 2 model turn(s)" in response
    assert notes(gw) == {"n1": "hello", "a": "x", "b": "y"}
    assert agent.turns[0].finished is False


async def test_a_500_is_retried_then_succeeds(chat: ScriptedServer, gw: Gateway) -> None:
    chat.reset((500, {"error": {"message": "overloaded"}}), completion("Fine now."))
    agent = agent_for(chat, max_retries=2)
    assert await agent.run_turn(make_turn(gw)) == "Fine now."
    assert len(chat.requests) == 2
    assert chat.requests[0] == chat.requests[1]


async def test_a_429_is_retried_then_succeeds(chat: ScriptedServer, gw: Gateway) -> None:
    chat.reset((429, {"error": {"message": "slow down"}}), completion("Fine now."))
    agent = agent_for(chat, max_retries=1)
    assert await agent.run_turn(make_turn(gw)) == "Fine now."
    assert len(chat.requests) == 2


async def test_retries_are_bounded(chat: ScriptedServer, gw: Gateway) -> None:
    chat.reset(*[(503, {"error": {"message": "down for maintenance"}})] * 3)
    agent = agent_for(chat, max_retries=1)
    with pytest.raises(AgentError) as info:
        await agent.run_turn(make_turn(gw))
    assert "HTTP 503" in str(info.value) and "down for maintenance" in str(info.value)
    assert len(chat.requests) == 2  # one try and one retry


async def test_an_api_error_is_an_agent_error(chat: ScriptedServer, gw: Gateway) -> None:
    chat.reset((400, {"error": {"message": "model 'nope' does not exist"}}))
    agent = agent_for(chat, max_retries=3)
    with pytest.raises(AgentError) as info:
        await agent.run_turn(make_turn(gw))
    message = str(info.value)
    assert "HTTP 400" in message and "model 'nope' does not exist" in message
    assert chat.base_url in message
    assert len(chat.requests) == 1  # not retried
    assert agent.turns[0].finished is False and agent.usage.total_tokens == 0


async def test_an_unreachable_endpoint_is_an_agent_error(gw: Gateway) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    agent = make_openai_agent(MODEL, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    with pytest.raises(AgentError, match="Connection error"):
        await agent.run_turn(make_turn(gw))


async def test_model_params_may_not_replace_what_the_agent_sets(
    chat: ScriptedServer, gw: Gateway
) -> None:
    agent = agent_for(chat)
    with pytest.raises(AgentError, match="model_params may not set messages"):
        await agent.run_turn(make_turn(gw, model_params={"messages": []}))
    assert chat.requests == []


# -- options -----------------------------------------------------------------------------


async def test_settings_come_from_the_environment(
    chat: ScriptedServer, gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # AGENTENV_ wins over it
    monkeypatch.setenv("AGENTENV_OPENAI_BASE_URL", chat.base_url)
    monkeypatch.setenv("AGENTENV_OPENAI_TEMPERATURE", "0")
    monkeypatch.setenv("AGENTENV_OPENAI_PARALLEL_TOOL_CALLS", "false")
    monkeypatch.setenv("AGENTENV_OPENAI_MAX_RETRIES", "0")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    agent = make_agent(f"openai:{MODEL}")
    assert isinstance(agent, OpenAIAgent)
    assert agent.settings.base_url == chat.base_url
    assert "sk-test" not in repr(agent)
    chat.reset(completion("ok"))
    assert await agent.run_turn(make_turn(gw)) == "ok"
    (request,) = chat.requests
    assert request["temperature"] == 0
    assert request["parallel_tool_calls"] is False
    assert chat.headers[0]["authorization"] == "Bearer sk-test"


def test_the_spec_sets_options_and_beats_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AGENTENV_OPENAI_SEED", "1")
    monkeypatch.setenv("MY_KEY", "sk-mine")
    agent = make_agent(
        "openai:Qwen/Qwen2.5-7B-Instruct?base_url=http://localhost:8000/v1&seed=3"
        "&max_turns=7&timeout=30&api_key_env=MY_KEY&parallel_tool_calls=true"
    )
    assert isinstance(agent, OpenAIAgent)
    s = agent.settings
    assert (s.model, s.base_url, s.seed, s.max_turns, s.timeout) == (
        "Qwen/Qwen2.5-7B-Instruct",
        "http://localhost:8000/v1",
        3,
        7,
        30.0,
    )
    assert s.api_key == "sk-mine" and s.parallel_tool_calls is True
    # a model name may contain a colon (Ollama tags)
    tagged = make_agent("openai:llama3.1:8b?base_url=http://localhost:11434/v1")
    assert isinstance(tagged, OpenAIAgent) and tagged.settings.model == "llama3.1:8b"


def test_bad_settings_are_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentenv.registry import RegistryError

    with pytest.raises(AgentError, match="needs an API key: set OPENAI_API_KEY"):
        make_openai_agent(MODEL)
    with pytest.raises(RegistryError, match="needs a model"):
        make_agent("openai")
    with pytest.raises(RegistryError, match="temperature must be a number, got 'hot'"):
        make_agent("openai:m?base_url=http://x/v1&temperature=hot")
    with pytest.raises(RegistryError, match="max_turns must be at least 1"):
        make_agent("openai:m?base_url=http://x/v1&max_turns=0")
    monkeypatch.setenv("AGENTENV_OPENAI_MAX_TURNS", "many")
    with pytest.raises(AgentError, match="AGENTENV_OPENAI_MAX_TURNS: max_turns must be an integer"):
        make_openai_agent(MODEL, base_url="http://x/v1")
    monkeypatch.delenv("AGENTENV_OPENAI_MAX_TURNS")
    monkeypatch.setenv("AGENTENV_OPENAI_MODEL", "from-env")
    agent = make_agent("openai:?base_url=http://x/v1")
    assert isinstance(agent, OpenAIAgent) and agent.settings.model == "from-env"


# -- in a task ---------------------------------------------------------------------------


async def test_in_a_task_the_prompt_id_joins_the_calls(
    chat: ScriptedServer, notes_env: Environment, tmp_path: Path
) -> None:
    chat.reset(add_note_call(), completion("Noted."))
    agent = agent_for(chat)
    spec = TaskSpec.model_validate(
        [
            {"id": "env", "type": "deploy_env", "env_id": "notes", "env": "notes"},
            {"id": "agent", "type": "deploy_agent", "agent_name": "llm", "role": "agent"},
            {
                "id": "ask",
                "type": "prompt_agent",
                "prompt": "Note that I must buy milk.",
                "prompt_id": "milk",
                "model_params": {"temperature": 0.5},
            },
        ]
    )
    ctx = TaskContext(
        task=spec,
        base_dir=tmp_path,
        env_resolver=lambda ref: notes_env,
        agent_factory=lambda request: agent,
    )
    result = await run_task(spec, ctx)
    assert result.status == "passed", result.error
    assert ctx.prompts["milk"].response == "Noted."
    (record,) = ctx.env("notes").gateway.instance().trajectory.calls()
    assert record.session == "milk" and record.role == "agent"
    assert chat.requests[0]["temperature"] == 0.5
    assert agent.turns[0].prompt_id == "milk"
