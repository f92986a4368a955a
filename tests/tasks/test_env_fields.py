"""A task's state checks are checked against the environment they grade when it is bound
to it (deployed, or validated): a misspelled field or collection is an error with its path,
before any agent runs, instead of a check that scores 0."""

from __future__ import annotations

import gc
import textwrap
import weakref
from pathlib import Path
from typing import Any

import pytest

from agentenv.agents.base import AgentTurn
from agentenv.env.environment import Environment
from agentenv.episodes import EpisodeSpec
from agentenv.tasks import run_task
from agentenv.tasks.bundle import Task
from agentenv.tasks.validation import validate_task_file

ENV = """
apiVersion: agentenv/v1
kind: Environment
name: desk
state:
  tickets:
    schema:
      type: object
      properties:
        id: {type: string}
        status: {type: string}
        customer: {type: object, properties: {email: {type: string}}}
  notes: {}
seed:
  tickets:
    - {id: T-1, status: open, customer: {email: a@example.com}}
  notes:
    - {id: n1, text: hello, author: ada}
tools:
  - name: update_ticket
    crud: {collection: tickets, op: update}
"""

TASK = """
seed: {which: T-1}
steps:
  - {id: deploy, type: deploy_env, env_id: desk}
  - {id: other, type: deploy_env, env_id: spare, env: desk}
  - {id: agent, type: deploy_agent, agent_name: clerk, env_ids: [desk]}
  - {id: ask, type: prompt_agent, prompt_id: main, prompt: Close T-1.}
  - id: outcome
    type: env_outcome_verifier
    verifier_id: closed
    env_id: desk
    checks:
      - {collection: tickets, key: <which>, field: status, equals: closed}
      - {collection: tickets, where: {WHERE}, count: 1}
      - {collection: COLLECTION, where: {author: ada}, count: 1}
  - id: spare
    type: env_outcome_verifier
    env_id: spare
    checks: [{collection: notes, where: {SPARE}, count: 1}]
solution:
  main:
    calls: [{tool: update_ticket, args: {id: T-1, status: closed}}]
    response: done
"""


class CountingAgent:
    """Closes the ticket; counts the turns it played (not `turns`: agents keep usage there)."""

    name = "counting"

    def __init__(self) -> None:
        self.played = 0

    async def run_turn(self, turn: AgentTurn) -> str:
        self.played += 1
        await turn.tools.call("update_ticket", {"id": "T-1", "status": "closed"})
        return "done"


def _bundle(
    root: Path,
    where: str = "status: closed",
    collection: str = "notes",
    spare: str = "text: hello",
) -> Path:
    (root / "envs" / "desk").mkdir(parents=True)
    (root / "envs" / "desk" / "env.yaml").write_text(textwrap.dedent(ENV))
    (root / "tasks").mkdir()
    text = TASK.replace("WHERE", where).replace("COLLECTION", collection).replace("SPARE", spare)
    path = root / "tasks" / "close.yaml"
    path.write_text(textwrap.dedent(text))
    return path


async def _run(path: Path) -> tuple[Any, CountingAgent]:
    agent = CountingAgent()
    task = Task.load(path)
    ctx = task.context(agent_factory=lambda request: agent)
    return await run_task(task.spec, ctx), agent


async def test_checks_that_fit_their_environment_run(tmp_path: Path) -> None:
    path = _bundle(tmp_path)
    assert validate_task_file(path).problems == []
    result, agent = await _run(path)
    assert result.status == "passed", result.error
    assert agent.played == 1


BAD = [
    (
        {"where": "stauts: closed"},
        "steps[4].checks[1].where.stauts: no record of collection 'tickets' has a field "
        "'stauts' (did you mean 'status'?; fields known from its schema and seed records: "
        "customer, id, status) (verifier 'closed') (step 'outcome')",
    ),
    (
        {"where": "customer.emial: a@example.com"},
        "steps[4].checks[1].where['customer.emial']: no record of collection 'tickets' has "
        "a field 'customer.emial' (did you mean 'customer.email'?; fields under 'customer' "
        "known from its schema and seed records: email) (verifier 'closed') (step 'outcome')",
    ),
    (
        {"collection": "note"},
        "steps[4].checks[2].collection: unknown collection 'note' (did you mean 'notes'?; "
        "collections: notes, tickets) (verifier 'closed') (step 'outcome')",
    ),
    (
        {"spare": "autor: ada"},
        "steps[5].checks[0].where.autor: no record of collection 'notes' has a field 'autor' "
        "(did you mean 'author'?; fields known from its seed records (it has no schema): "
        "author, id, text) (step 'spare')",
    ),
]


@pytest.mark.parametrize(("mistake", "problem"), BAD)
async def test_a_mistake_fails_the_deploy_before_any_agent_runs(
    tmp_path: Path, mistake: dict[str, str], problem: str
) -> None:
    path = _bundle(tmp_path, **mistake)
    result, agent = await _run(path)
    assert result.status == "error" and not result.passed
    assert agent.played == 0 and result.scores == {}
    failed = next(s for s in result.steps if s.status == "failed")
    env_id = "spare" if "spare" in mistake else "desk"
    assert failed.id == ("other" if env_id == "spare" else "deploy")
    assert failed.error == (
        f"task 'close': its state checks name what environment {env_id!r} cannot have (a "
        f"check that matches nothing would score 0 whatever the agent did): {problem}"
    )


@pytest.mark.parametrize(("mistake", "problem"), BAD)
def test_validate_reports_the_same(tmp_path: Path, mistake: dict[str, str], problem: str) -> None:
    report = validate_task_file(_bundle(tmp_path, **mistake))
    assert [str(p) for p in report.problems] == [problem]


async def test_the_episode_sdk_gets_it_too(tmp_path: Path) -> None:
    task = Task.load(_bundle(tmp_path, where="stauts: closed"))
    episode = await EpisodeSpec.from_task(task).start()
    assert await episode.next_turn() is None  # no turn was ever offered
    result = await episode.result()
    assert result.status == "error"
    assert "steps[4].checks[1].where.stauts" in (result.error or "")


async def test_a_field_only_a_tool_adds_is_let_through_for_a_collection_with_no_schema(
    tmp_path: Path,
) -> None:
    path = _bundle(tmp_path, spare="pinned: true")  # far from every seed field of notes
    assert validate_task_file(path).problems == []
    result, agent = await _run(path)
    assert agent.played == 1 and result.status == "failed"  # it ran, and no note is pinned


def test_what_is_worked_out_once_keeps_no_environment_or_task_alive(tmp_path: Path) -> None:
    from agentenv.tasks import env_fields

    path = _bundle(tmp_path, where="stauts: closed")
    task = Task.load(path).spec
    env = Environment.load(tmp_path / "envs" / "desk")
    [first] = env_fields.env_problems(task, "desk", env)
    copy = task.model_copy(update={"solution": task.solution})  # as a runner does per run
    assert env_fields.env_problems(copy, "desk", env) == [first]
    assert env_fields.env_knowledge(env) is env_fields.env_knowledge(env)
    gc.collect()  # what earlier tests left goes first
    kept = len(env_fields._PROBLEMS), len(env_fields._KNOWN)
    gone = weakref.ref(env), weakref.ref(task.steps[0])
    del env, task, copy
    gc.collect()
    assert [ref() for ref in gone] == [None, None]
    assert (len(env_fields._PROBLEMS), len(env_fields._KNOWN)) == (kept[0] - 1, kept[1] - 1)
