"""The scripted agent: a Python function (sync or async) plays the agent."""

from __future__ import annotations

import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from agentenv import Environment, Gateway, Principal
from agentenv.agents import AgentError, AgentTurn, ScriptedAgent, make_agent
from agentenv.gateway import Binding, ToolClient
from agentenv.registry import RegistryError
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
  - name: add_note
    crud: {collection: notes, op: create}
  - name: list_notes
    crud: {collection: notes, op: list}
"""

SCRIPT = """
from agentenv.agents import AgentError


def echo(turn):
    return f"{turn.agent_name} heard: {turn.prompt}"


async def take_note(turn):
    result = await turn.tools.call("add_note", {"record": {"id": "n2", "text": turn.prompt}})
    return "noted" if result.ok else result.text


def number(turn):
    return 42


def broken(turn):
    raise ValueError("a bug in the script")


async def refuses(turn):
    raise AgentError("I will not")


class Holder:
    @staticmethod
    def answer(turn):
        return "from a class"


NOT_A_FUNCTION = 3
"""


@pytest.fixture(scope="module")
def notes_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder: Path = tmp_path_factory.mktemp("notes")
    (folder / "env.yaml").write_text(textwrap.dedent(NOTES_ENV))
    return Environment.load(folder)


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A freshly named module on sys.path holding the test functions; its name."""
    name = f"scripted_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(SCRIPT)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def make_turn(gw: Gateway, prompt: str = "buy milk") -> AgentTurn:
    client = ToolClient(Principal("agent", name="bot"), [Binding("notes", gw)], session="p1")
    return AgentTurn(prompt_id="p1", prompt=prompt, tools=client, agent_name="bot", role="agent")


async def test_a_sync_function_answers(script: str, notes_env: Environment) -> None:
    agent = make_agent(f"scripted:{script}:echo")
    assert isinstance(agent, ScriptedAgent)
    assert await agent.run_turn(make_turn(Gateway(notes_env))) == "bot heard: buy milk"


async def test_an_async_function_calls_tools(script: str, notes_env: Environment) -> None:
    gw = Gateway(notes_env)
    agent = make_agent(f"scripted:{script}:take_note")
    assert await agent.run_turn(make_turn(gw)) == "noted"
    (record,) = gw.instance().trajectory.calls()
    assert (record.tool, record.args, record.session) == (
        "add_note",
        {"record": {"id": "n2", "text": "buy milk"}},
        "p1",
    )


async def test_a_dotted_attribute_and_a_plain_callable(script: str, notes_env: Environment) -> None:
    agent = make_agent(f"scripted:{script}:Holder.answer")
    assert await agent.run_turn(make_turn(Gateway(notes_env))) == "from a class"
    direct = ScriptedAgent(lambda turn: turn.prompt.upper())
    assert await direct.run_turn(make_turn(Gateway(notes_env))) == "BUY MILK"


async def test_a_file_path_works_too(tmp_path: Path, notes_env: Environment) -> None:
    folder = tmp_path / "my agents"
    folder.mkdir()
    (folder / "agent.py").write_text(SCRIPT)
    agent = make_agent(f"scripted:{folder / 'agent.py'}:echo")
    assert await agent.run_turn(make_turn(Gateway(notes_env), "hi")) == "bot heard: hi"
    again = make_agent(f"scripted:{folder / 'agent.py'}:take_note")  # loaded once, reused
    assert isinstance(again, ScriptedAgent)


async def test_what_the_function_does_wrong(script: str, notes_env: Environment) -> None:
    gw = Gateway(notes_env)
    with pytest.raises(AgentError, match=r"returned int, expected the response text \(str\)"):
        await make_agent(f"scripted:{script}:number").run_turn(make_turn(gw))
    with pytest.raises(ValueError, match="a bug in the script"):  # a bug keeps its traceback
        await make_agent(f"scripted:{script}:broken").run_turn(make_turn(gw))
    with pytest.raises(AgentError, match="I will not"):
        await make_agent(f"scripted:{script}:refuses").run_turn(make_turn(gw))


def test_import_problems_are_clear_registry_errors(script: str, tmp_path: Path) -> None:
    def error(spec: str) -> str:
        with pytest.raises(RegistryError) as info:
            make_agent(spec)
        return str(info.value)

    assert "needs a function: scripted:module:function" in error("scripted")
    assert "expected 'module:function'" in error("scripted:just_a_module")
    assert "no module named 'no_such_module_xyz'" in error("scripted:no_such_module_xyz:f")
    assert f"{script!r} has no attribute 'missing'" in error(f"scripted:{script}:missing")
    assert "is a int, not a function" in error(f"scripted:{script}:NOT_A_FUNCTION")
    assert "no such file" in error(f"scripted:{tmp_path / 'nope.py'}:f")

    (tmp_path / "needs_dep.py").write_text("import dependency_that_is_not_there_xyz\n")
    message = error("scripted:needs_dep:f")
    assert "importing 'needs_dep' failed" in message
    assert "dependency_that_is_not_there_xyz" in message
    sys.modules.pop("needs_dep", None)

    (tmp_path / "crashes.py").write_text("raise RuntimeError('at import')\n")
    assert "RuntimeError: at import" in error(f"scripted:{tmp_path / 'crashes.py'}:f")
    assert "RuntimeError: at import" in error("scripted:crashes:f")
    sys.modules.pop("crashes", None)


async def test_in_a_task(script: str, notes_env: Environment, tmp_path: Path) -> None:
    spec = TaskSpec.model_validate(
        [
            {"id": "env", "type": "deploy_env", "env_id": "notes", "env": "notes"},
            {"id": "agent", "type": "deploy_agent", "agent_name": "bot", "role": "agent"},
            {"id": "ask", "type": "prompt_agent", "prompt": "call mom", "prompt_id": "ask"},
        ]
    )
    ctx = TaskContext(
        task=spec,
        base_dir=tmp_path,
        env_resolver=lambda ref: notes_env,
        agent_factory=lambda request: make_agent(f"scripted:{script}:take_note"),
    )
    result = await run_task(spec, ctx)
    assert result.status == "passed", result.error
    assert ctx.prompts["ask"].response == "noted"
    assert [n["text"] for n in ctx.env("notes").state.list("notes")] == ["hello", "call mom"]
