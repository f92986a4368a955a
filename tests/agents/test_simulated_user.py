"""The simulated user and prompt_agent conversations (user_agent_name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agentenv.agents import make_agent
from agentenv.spec.task import TaskSpec
from agentenv.tasks import TaskContext, run_task

ENV = """\
apiVersion: agentenv/v1
kind: Environment
name: shop
roles: [{name: assistant}, {name: user}]
state:
  notes: {key: id}
tools:
  - {name: add_note, crud: {collection: notes, op: create}, roles: [assistant, user]}
  - {name: list_notes, crud: {collection: notes, op: list}, roles: [assistant]}
"""


def task(script: list[Any], *, turns: int = 5, solution: bool = True) -> TaskSpec:
    data: dict[str, Any] = {
        "steps": [
            {"id": "env", "type": "deploy_env", "env_id": "shop", "env": "env"},
            {"id": "a", "type": "deploy_agent", "agent_name": "helper", "role": "assistant"},
            {
                "id": "u",
                "type": "deploy_agent",
                "agent_name": "sam",
                "role": "user",
                "agent": "simulated-user",
                "system_prompt": "You want a note saying 'milk'.",
                "agent_config": {"script": script},
            },
            {
                "id": "talk",
                "type": "prompt_agent",
                "prompt_id": "chat",
                "agent_name": "helper",
                "user_agent_name": "sam",
                "max_conversation_turns": turns,
                "prompt": "Please note that I need milk.",
            },
        ]
    }
    if solution:
        data["solution"] = {
            "chat": {
                "calls": [{"tool": "add_note", "args": {"record": {"id": "n1", "text": "milk"}}}],
                "response": "Noted: milk.",
            }
        }
    return TaskSpec.model_validate(data)


@pytest.fixture
def base(tmp_path: Path) -> Path:
    (tmp_path / "env").mkdir()
    (tmp_path / "env" / "env.yaml").write_text(ENV)
    return tmp_path


async def run(spec: TaskSpec, base: Path) -> tuple[Any, TaskContext]:
    ctx = TaskContext(task=spec, base_dir=base, agent_factory=lambda req: make_agent("oracle"))
    return await run_task(spec, ctx), ctx


async def test_a_scripted_user_talks_acts_and_stops(base: Path) -> None:
    script = [
        {"say": "Also add eggs, please.", "calls": []},
        {
            "say": "Never mind, I added it myself.",
            "calls": [{"tool": "add_note", "args": {"record": {"id": "n2", "text": "eggs"}}}],
        },
    ]
    result, ctx = await run(task(script), base)
    assert result.status == "passed", result
    talk = next(s for s in result.steps if s.id == "talk")
    assert talk.output["turns"] == 2 and talk.output["stopped_by_user"] is True
    said = [(m["role"], m["text"]) for m in ctx.prompts["chat"].messages]
    assert said == [
        ("user", "Please note that I need milk."),
        ("assistant", "Noted: milk."),
        ("user", "Also add eggs, please."),
        ("assistant", "Noted: milk."),
        ("user", "Never mind, I added it myself."),
    ]
    state = ctx.envs["shop"].state
    assert {r["text"] for r in state.list("notes")} == {"milk", "eggs"}  # both sides acted
    records = list(ctx.envs["shop"].gateway.instance().trajectory)
    messages = [r for r in records if r.kind == "message"]
    assert [r.role for r in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert all(r.session == "chat" for r in messages)
    calls = [(r.role, r.tool) for r in records if r.kind == "call"]
    assert calls == [("assistant", "add_note"), ("user", "add_note")]


async def test_the_conversation_stops_at_max_turns(base: Path) -> None:
    result, ctx = await run(task(["more", "more", "more", "more"], turns=2), base)
    talk = next(s for s in result.steps if s.id == "talk")
    assert talk.output["turns"] == 2 and talk.output["stopped_by_user"] is False
    assert len(ctx.prompts["chat"].messages) == 4  # user, assistant, user, assistant


async def test_the_user_may_not_use_the_assistants_tools(base: Path) -> None:
    script = [{"say": "x", "calls": [{"tool": "list_notes", "args": {}}]}]
    result, ctx = await run(task(script), base)
    talk = next(s for s in result.steps if s.id == "talk")
    assert talk.status == "failed"
    assert "the scripted user's call 'list_notes' failed" in (talk.error or "")
    denied = [r for r in ctx.envs["shop"].gateway.instance().trajectory if r.denied]
    assert [(r.role, r.tool) for r in denied] == [("user", "list_notes")]


async def test_a_user_with_neither_script_nor_model_is_a_clear_error(base: Path) -> None:
    spec = task([])
    user = spec.steps[2]
    object.__setattr__(user, "__pydantic_extra__", {**user.params, "agent_config": {}})
    result, _ = await run(spec, base)
    talk = next(s for s in result.steps if s.id == "talk")
    assert talk.status == "failed"
    assert "needs `script:` (scripted) or `model:` (LLM)" in (talk.error or "")


async def test_user_agent_name_must_be_deployed(base: Path) -> None:
    spec = task(["hi"])
    talk = spec.steps[3]
    object.__setattr__(talk, "__pydantic_extra__", {**talk.params, "user_agent_name": "nobody"})
    result, _ = await run(spec, base)
    step = next(s for s in result.steps if s.id == "talk")
    assert step.status == "failed" and "no agent 'nobody' is deployed" in (step.error or "")
