"""The human agent, driven without a terminal: a rich Console writing to a buffer and an
input function answering from a list."""

from __future__ import annotations

import io
import textwrap
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agentenv import Environment, Gateway, Principal
from agentenv.agents import AgentError, AgentTurn, HumanAgent, make_agent
from agentenv.agents.human import convert
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
  - name: guest
state:
  notes: {}
seed:
  notes:
    - {id: n1, text: hello}
tools:
  - module: notes_tools.py
"""

NOTES_TOOLS = '''
from typing import Literal

from agentenv import ToolContext, ToolError, tool


@tool(roles=["agent"])
def add_note(
    ctx: ToolContext,
    id: str,
    text: str,
    pinned: bool = False,
    priority: int = 1,
    tags: list[str] | None = None,
    kind: Literal["todo", "idea"] = "todo",
) -> dict:
    """Add a note.

    Args:
        id: The note's id.
        text: What the note says.
        tags: Labels for the note.
    """
    if ctx.state.get("notes", id) is not None:
        raise ToolError(f"note {id} exists")
    record = {"id": id, "text": text, "pinned": pinned, "priority": priority, "kind": kind}
    return ctx.state.put("notes", {**record, "tags": tags or []})


@tool(kind="read", roles=["agent"])
def list_notes(ctx: ToolContext) -> list:
    """Every note."""
    return [n["id"] for n in ctx.state.list("notes")]
'''


@pytest.fixture(scope="module")
def notes_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder: Path = tmp_path_factory.mktemp("notes")
    (folder / "notes_tools.py").write_text(textwrap.dedent(NOTES_TOOLS))
    (folder / "env.yaml").write_text(textwrap.dedent(NOTES_ENV))
    return Environment.load(folder)


def answers(lines: Iterable[str]) -> Callable[[], str]:
    """An input function typing `lines`, one per question, then end of input."""
    it = iter(lines)
    return lambda: next(it)


def human(lines: Iterable[str]) -> tuple[HumanAgent, io.StringIO]:
    out = io.StringIO()
    console = Console(file=out, width=140, color_system=None, force_terminal=False)
    return HumanAgent(console=console, input_fn=answers(lines)), out


def make_turn(gw: Gateway, role: str = "agent", **fields: Any) -> AgentTurn:
    client = ToolClient(Principal(role, name="person"), [Binding("notes", gw)], session="p1")
    values: dict[str, Any] = {
        "prompt_id": "p1",
        "prompt": "Note that I must buy milk [urgent].",
        "tools": client,
        "agent_name": "person",
        "role": role,
        "system_prompt": "Be brief.",
    }
    values.update(fields)
    return AgentTurn(**values)


async def test_a_person_calls_tools_and_answers(notes_env: Environment) -> None:
    gw = Gateway(notes_env)
    agent, out = human(
        [
            "1",  # add_note, by number
            "n2",  # id
            "buy milk",  # text
            "y",  # pinned
            "",  # priority: its default
            '["shop"]',  # tags
            "idea",  # kind
            "list_notes",  # by name
            "done",
            "Noted: buy milk.",
        ]
    )
    assert await agent.run_turn(make_turn(gw)) == "Noted: buy milk."

    first, second = gw.instance().trajectory.calls()
    assert first.tool == "add_note" and first.error is None
    assert first.args == {
        "id": "n2",
        "text": "buy milk",
        "pinned": True,
        "tags": ["shop"],
        "kind": "idea",
    }
    assert (first.role, first.principal, first.session) == ("agent", "person", "p1")
    assert second.tool == "list_notes" and second.result == ["n1", "n2"]

    text = out.getvalue()
    assert "Note that I must buy milk [urgent]." in text  # shown as text, not markup
    assert "Be brief." in text
    assert "add_note" in text and "list_notes" in text and "Every note." in text
    assert "add_note: ok" in text and "list_notes: ok" in text
    assert "Enter for 1" in text  # the default is shown
    assert "one of todo, idea" in text
    assert "The note's id." in text  # argument descriptions are shown
    assert "Noted: buy milk." in text  # the answers are echoed into the transcript


async def test_bad_answers_are_asked_again(notes_env: Environment) -> None:
    gw = Gateway(notes_env)
    agent, out = human(
        [
            "9",  # no such number
            "rocket",  # no such name
            "add_note",
            "",  # id is required
            "n1",
            "hi",
            "maybe",  # not a yes/no
            "no",
            "high",  # not a whole number
            "3",
            "[1",  # not JSON
            '{"a": 1}',  # not a list
            "null",  # the tags may be null
            "chore",  # not in the enum
            "todo",
            "DONE",
            "",
        ]
    )
    assert await agent.run_turn(make_turn(gw)) == ""
    (call,) = gw.instance().trajectory.calls()
    assert call.args == {
        "id": "n1",
        "text": "hi",
        "pinned": False,
        "priority": 3,
        "tags": None,
        "kind": "todo",
    }
    text = out.getvalue()
    assert text.count("No tool") == 2
    assert "id is required" in text
    assert "expected yes or no" in text
    assert "expected a whole number" in text
    assert "not JSON" in text and "expected a JSON list" in text
    assert "choose one of todo, idea" in text
    assert "add_note: failed" in text and "note n1 exists" in text  # a failing call is shown


async def test_max_turns_ends_the_calls(notes_env: Environment) -> None:
    gw = Gateway(notes_env)
    agent, out = human(["2", "That is all."])
    assert await agent.run_turn(make_turn(gw, max_turns=1)) == "That is all."
    assert len(gw.instance().trajectory.calls()) == 1
    assert "the most for this prompt" in out.getvalue()


async def test_with_no_tools_the_person_just_answers(notes_env: Environment) -> None:
    gw = Gateway(notes_env)
    agent, out = human(["Hello."])
    assert await agent.run_turn(make_turn(gw, role="guest", system_prompt=None)) == "Hello."
    assert "No tools are available" in out.getvalue()


async def test_end_of_input_is_an_agent_error(notes_env: Environment) -> None:
    gw = Gateway(notes_env)
    agent, _ = human(["1", "n2"])
    with pytest.raises(AgentError, match="closed the input"):
        await agent.run_turn(make_turn(gw))
    assert gw.instance().trajectory.calls() == []


def test_answers_are_converted_by_schema() -> None:
    assert convert({"type": "integer"}, "-4") == -4
    assert convert({"type": "number"}, "2.5") == 2.5
    assert convert({"type": "number"}, "2") == 2
    assert convert({"type": "boolean"}, "TRUE") is True
    assert convert({"type": "string"}, "42") == "42"
    assert convert({"type": "object"}, '{"a": [1]}') == {"a": [1]}
    assert convert({"anyOf": [{"type": "integer"}, {"type": "string"}]}, "x") == "x"
    assert convert({"anyOf": [{"type": "integer"}, {"type": "null"}]}, "null") is None
    assert convert({"type": ["integer", "null"]}, "7") == 7
    assert convert({"enum": [1, 2]}, "2") == 2
    assert convert({}, "[1, 2]") == [1, 2]
    assert convert({}, "plain words") == "plain words"
    with pytest.raises(ValueError, match="expected a number"):
        convert({"type": "number"}, "lots")


def test_the_registry_makes_one_without_an_argument() -> None:
    assert isinstance(make_agent("human"), HumanAgent)
    with pytest.raises(RegistryError, match="the human agent takes no argument"):
        make_agent("human:bob")


async def test_in_a_task(notes_env: Environment, tmp_path: Path) -> None:
    spec = TaskSpec.model_validate(
        [
            {"id": "env", "type": "deploy_env", "env_id": "notes", "env": "notes"},
            {"id": "agent", "type": "deploy_agent", "agent_name": "person", "role": "agent"},
            {"id": "ask", "type": "prompt_agent", "prompt": "List them.", "prompt_id": "ask"},
        ]
    )
    agent, _ = human(["list_notes", "done", "n1 only."])
    ctx = TaskContext(
        task=spec,
        base_dir=tmp_path,
        env_resolver=lambda ref: notes_env,
        agent_factory=lambda request: agent,
    )
    result = await run_task(spec, ctx)
    assert result.status == "passed", result.error
    assert ctx.prompts["ask"].response == "n1 only."
    (call,) = ctx.env("notes").gateway.instance().trajectory.calls()
    assert call.session == "ask" and call.result == ["n1"]
