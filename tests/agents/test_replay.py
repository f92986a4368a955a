"""The replay agent: recorded trajectories (GET /trajectory JSONL, run folders) replayed
through a real Gateway give the same calls, outcomes and state."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.agents import AgentError, AgentTurn, ReplayAgent, make_agent
from agentenv.gateway import Binding, ToolClient
from agentenv.gateway.events import to_jsonl, trajectory_events
from agentenv.registry import RegistryError
from agentenv.rollout.records import trajectory_rows
from agentenv.spec.task import TaskSpec
from agentenv.tasks import TaskContext, run_task

NOTES_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: notes
roles:
  - name: agent
  - name: admin
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
def add_note(ctx: ToolContext, id: str, text: str) -> dict:
    """Add a note."""
    return ctx.state.put("notes", {"id": id, "text": text})


@tool(roles=["admin"])
def purge(ctx: ToolContext) -> int:
    """Delete every note (admins only)."""
    ids = [n["id"] for n in ctx.state.list("notes")]
    for note_id in ids:
        ctx.state.delete("notes", note_id)
    return len(ids)
'''

AGENT = Principal("agent", name="recorded")


@pytest.fixture(scope="module")
def notes_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder: Path = tmp_path_factory.mktemp("notes")
    (folder / "notes_tools.py").write_text(textwrap.dedent(NOTES_TOOLS))
    (folder / "env.yaml").write_text(textwrap.dedent(NOTES_ENV))
    return Environment.load(folder)


def make_turn(gw: Gateway, prompt_id: str = "p1", **fields: Any) -> AgentTurn:
    client = ToolClient(
        Principal("agent", name="replayer"), [Binding("notes", gw)], session=prompt_id
    )
    return AgentTurn(
        prompt_id=prompt_id,
        prompt="Do it again.",
        tools=client,
        agent_name="replayer",
        role="agent",
        **fields,
    )


async def record_session(gw: Gateway, session: str | None) -> None:
    """What a recorded agent did: a setup call by the system, then its own calls."""
    await gw.call(SYSTEM, "add_note", {"id": "setup", "text": "by the task"})
    client = ToolClient(AGENT, [Binding("notes", gw)], session=session)
    await client.call("add_note", {"id": "n2", "text": "buy milk"})
    await client.call("purge")  # denied: admins only
    await client.call("add_note", {"id": "n3"})  # invalid arguments
    await client.call("list_notes")


def outcomes(gw: Gateway, role: str = "agent") -> list[tuple[Any, ...]]:
    return [
        (r.tool, r.args, r.error.kind if r.error else None, r.denied, r.result)
        for r in gw.instance().trajectory.calls()
        if r.role == role
    ]


async def test_a_recorded_trajectory_replays_to_the_same_calls_and_state(
    notes_env: Environment, tmp_path: Path
) -> None:
    recorded = Gateway(notes_env)
    await record_session(recorded, "p1")
    path = tmp_path / "trajectory.jsonl"
    path.write_text(recorded.instance().trajectory.to_jsonl())  # what GET /trajectory serves

    replay = Gateway(notes_env)
    await replay.call(SYSTEM, "add_note", {"id": "setup", "text": "by the task"})  # the task's part
    agent = make_agent(f"replay:{path}")
    assert isinstance(agent, ReplayAgent)
    assert await agent.run_turn(make_turn(replay)) == "Replayed 4 calls."

    assert outcomes(replay) == outcomes(recorded)
    assert [r.session for r in replay.instance().trajectory.calls() if r.role == "agent"] == [
        "p1"
    ] * 4
    assert replay.instance().state.hash() == recorded.instance().state.hash()
    assert agent.divergences == []
    # the system's setup call was not replayed (only the one made above is there)
    assert len([r for r in replay.instance().trajectory.calls() if r.role == "system"]) == 1


async def test_upstream_events_as_get_trajectory_serves_them_replay_the_same(
    notes_env: Environment, tmp_path: Path
) -> None:
    recorded = Gateway(notes_env)
    await record_session(recorded, "p1")
    path = tmp_path / "events.jsonl"
    path.write_bytes(to_jsonl(trajectory_events(recorded.instance().trajectory)))

    replay = Gateway(notes_env)
    await replay.call(SYSTEM, "add_note", {"id": "setup", "text": "by the task"})
    agent = ReplayAgent.from_file(path)
    assert await agent.run_turn(make_turn(replay)) == "Replayed 4 calls."
    assert outcomes(replay) == outcomes(recorded)
    assert agent.divergences == []


async def test_only_the_prompts_own_session_is_replayed(
    notes_env: Environment, tmp_path: Path
) -> None:
    recorded = Gateway(notes_env)
    first = ToolClient(AGENT, [Binding("notes", recorded)], session="first")
    second = ToolClient(AGENT, [Binding("notes", recorded)], session="second")
    await first.call("add_note", {"id": "a", "text": "one"})
    await second.call("add_note", {"id": "b", "text": "two"})
    await first.call("add_note", {"id": "c", "text": "three"})
    path = tmp_path / "t.jsonl"
    path.write_text(recorded.instance().trajectory.to_jsonl())

    gw = Gateway(notes_env)
    agent = ReplayAgent.from_file(path)
    assert await agent.run_turn(make_turn(gw, "second")) == "Replayed 1 calls."
    assert [r.args["id"] for r in gw.instance().trajectory.calls()] == ["b"]
    assert await agent.run_turn(make_turn(gw, "first")) == "Replayed 2 calls."
    assert [r.args["id"] for r in gw.instance().trajectory.calls()] == ["b", "a", "c"]
    assert await agent.run_turn(make_turn(gw, "first")) == "Replayed 0 calls."


async def test_without_a_matching_session_every_call_is_replayed_once(
    notes_env: Environment, tmp_path: Path
) -> None:
    recorded = Gateway(notes_env)
    await record_session(recorded, None)  # e.g. an agent over REST: no session
    path = tmp_path / "t.jsonl"
    path.write_text(recorded.instance().trajectory.to_jsonl())

    gw = Gateway(notes_env)
    agent = ReplayAgent.from_file(path, response="Did {n} things.")
    assert await agent.run_turn(make_turn(gw, "anything")) == "Did 4 things."
    assert await agent.run_turn(make_turn(gw, "next")) == "Did 0 things."
    assert [r.tool for r in gw.instance().trajectory.calls()] == [
        "add_note",
        "purge",
        "add_note",
        "list_notes",
    ]


async def test_non_call_records_are_skipped_and_options_filter(tmp_path: Path, notes_env) -> None:
    rows = [
        {"kind": "control", "event": "clock_set"},
        {"kind": "trigger", "trigger_id": "t", "tool": "purge", "args": {}},
        {"kind": "call", "tool": "add_note", "args": {"id": "x", "text": "1"}, "role": "agent"},
        {"kind": "call", "tool": "purge", "args": {}, "role": "agent", "denied": True,
         "error": {"kind": "denied", "message": "no"}},
        {"kind": "call", "tool": "add_note", "args": {"id": "y", "text": "2"}, "role": "helper"},
    ]  # fmt: skip
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")

    gw = Gateway(notes_env)
    agent = make_agent(f"replay:{path}?denied=skip&response=ok {{n}}")
    assert await agent.run_turn(make_turn(gw)) == "ok 2"
    assert [r.args.get("id") for r in gw.instance().trajectory.calls()] == ["x", "y"]

    gw = Gateway(notes_env)
    agent = make_agent(f"replay:{path}?role=helper")
    assert await agent.run_turn(make_turn(gw)) == "Replayed 1 calls."
    assert [r.args.get("id") for r in gw.instance().trajectory.calls()] == ["y"]


async def test_divergences_are_listed_and_strict_fails_on_the_first(
    notes_env: Environment, tmp_path: Path
) -> None:
    recorded = Gateway(notes_env)
    await record_session(recorded, "p1")
    path = tmp_path / "t.jsonl"
    path.write_text(recorded.instance().trajectory.to_jsonl())

    # a different starting state: the setup note is missing, so list_notes answers otherwise
    gw = Gateway(notes_env)
    agent = ReplayAgent.from_file(path)
    assert await agent.run_turn(make_turn(gw)) == "Replayed 4 calls."
    (divergence,) = agent.divergences
    assert divergence.tool == "list_notes" and divergence.detail == "a different result"
    assert divergence.line == 5

    gw = Gateway(notes_env)
    strict = make_agent(f"replay:{path}?strict=true")
    with pytest.raises(AgentError, match=r"replay diverged at .*t\.jsonl:5 \(list_notes\)"):
        await strict.run_turn(make_turn(gw))

    # an admin replaying the agent's calls: the denied purge now succeeds
    gw = Gateway(notes_env)
    admin = ToolClient(Principal("admin"), [Binding("notes", gw)], session="p1")
    turn = AgentTurn(prompt_id="p1", prompt="", tools=admin, agent_name="a", role="admin")
    agent = ReplayAgent.from_file(path)
    await agent.run_turn(turn)
    details = [(d.tool, d.recorded_ok, d.replayed_ok) for d in agent.divergences]
    assert ("purge", False, True) in details


async def test_a_run_folder_trajectory_replays_into_a_task(
    notes_env: Environment, tmp_path: Path
) -> None:
    steps = [
        {"id": "home", "type": "deploy_env", "env_id": "home", "env": "notes"},
        {"id": "work", "type": "deploy_env", "env_id": "work", "env": "notes"},
        {"id": "agent", "type": "deploy_agent", "agent_name": "a", "role": "agent",
         "env_ids": ["home", "work"]},
        {"id": "ask", "type": "prompt_agent", "prompt": "Take notes.", "prompt_id": "ask"},
    ]  # fmt: skip
    solution = {
        "ask": {
            "calls": [
                {"tool": "add_note", "args": {"id": "h", "text": "home"}, "env_id": "home"},
                {"tool": "add_note", "args": {"id": "w", "text": "work"}, "env_id": "work"},
            ],
            "response": "Noted.",
        }
    }

    async def run(agent_spec: str) -> TaskContext:
        spec = TaskSpec.model_validate({"steps": steps, "solution": solution})
        ctx = TaskContext(
            task=spec,
            base_dir=tmp_path,
            env_resolver=lambda ref: notes_env,
            agent_factory=lambda request: make_agent(agent_spec),
        )
        result = await run_task(spec, ctx)
        assert result.status == "passed", result.error
        return ctx

    original = await run("oracle")
    path = tmp_path / "trajectory.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in trajectory_rows(original)))

    replayed = await run(f"replay:{path}")
    assert replayed.prompts["ask"].response == "Replayed 2 calls."
    for env_id in ("home", "work"):
        assert replayed.env(env_id).state.hash() == original.env(env_id).state.hash()
    assert [r["id"] for r in replayed.env("home").state.list("notes")] == ["n1", "h"]


def test_bad_files_and_specs_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="needs a trajectory file"):
        make_agent("replay")
    with pytest.raises(RegistryError, match=r"cannot read trajectory '.*missing\.jsonl'"):
        make_agent(f"replay:{tmp_path / 'missing.jsonl'}")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"kind": "call", "tool": "x"}\n{not json\n')
    with pytest.raises(RegistryError, match=r"bad\.jsonl:2: not a JSON record"):
        make_agent(f"replay:{bad}")
    bad.write_text('{"kind": "call", "args": {}}\n')
    with pytest.raises(RegistryError, match=r"bad\.jsonl:1: a call record needs a 'tool'"):
        make_agent(f"replay:{bad}")
    bad.write_text("[1, 2]\n")
    with pytest.raises(RegistryError, match="expected a JSON object, got list"):
        make_agent(f"replay:{bad}")
    good = tmp_path / "good.jsonl"
    good.write_text("")
    with pytest.raises(RegistryError, match="bad replay option speed='fast'"):
        make_agent(f"replay:{good}?speed=fast")
    odd = tmp_path / "what?.jsonl"  # a name with '?' that exists is taken whole
    odd.write_text('{"kind": "call", "tool": "list_notes", "args": {}}\n')
    agent = make_agent(f"replay:{odd}")
    assert isinstance(agent, ReplayAgent) and len(agent.calls) == 1


async def test_a_call_whose_text_holds_a_unicode_line_separator_replays(
    notes_env: Environment, tmp_path: Path
) -> None:
    # JSON keeps U+2028 raw in a string; the trajectory's JSONL must still be one call a line.
    recorded = Gateway(notes_env)
    client = ToolClient(AGENT, [Binding("notes", recorded)])
    await client.call("add_note", {"id": "n2", "text": "line one\u2028line two"})
    path = tmp_path / "trajectory.jsonl"
    path.write_text(recorded.instance().trajectory.to_jsonl())

    replay = Gateway(notes_env)
    agent = make_agent(f"replay:{path}")
    assert await agent.run_turn(make_turn(replay)) == "Replayed 1 calls."
    assert replay.instance().state.hash() == recorded.instance().state.hash()
