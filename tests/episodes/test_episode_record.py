"""An SDK episode's record: each episode of one task gets its own repeat and id, so a run
folder keeps them all; `repeat=` numbers them by hand."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path

import pytest

from agentenv import EpisodeSpec, Task
from agentenv.rollout import RolloutStore
from agentenv.rollout.plan import episode_id

ENV = """
apiVersion: agentenv/v1
kind: Environment
name: shelf
state:
  books: {}
seed:
  books:
    - {id: b1, title: Dune}
"""

# No agent is prompted: the task finishes as soon as it is deployed and checked.
TASK = """
steps:
  - {id: d, type: deploy_env, env_id: shelf, env: shelf}
  - id: check
    type: env_outcome_verifier
    env_id: shelf
    checks:
      - {name: dune is there, collection: books, key: b1, field: title, equals: Dune}
"""


@pytest.fixture
def task(tmp_path: Path) -> Task:
    env = tmp_path / "bund" / "envs" / "shelf"
    env.mkdir(parents=True)
    (env / "env.yaml").write_text(textwrap.dedent(ENV))
    tasks = tmp_path / "bund" / "tasks"
    tasks.mkdir()
    # a name of its own per test: the repeat counter is per task name for the process
    path = tasks / f"{tmp_path.name}.yaml"
    path.write_text(textwrap.dedent(TASK))
    return Task.load(path)


async def finished(task: Task):
    episode = await EpisodeSpec.from_task(task).start()
    result = await asyncio.wait_for(episode.result(), 30)
    assert result.status == "passed", result.error
    return episode


async def test_episodes_of_one_task_get_distinct_repeats_and_ids(
    task: Task, tmp_path: Path
) -> None:
    episodes = [await finished(task) for _ in range(3)]
    records = [e.record(agent="my-policy") for e in episodes]
    assert [r.repeat for r in records] == [0, 1, 2]
    assert len({r.episode_id for r in records}) == 3
    assert records[1].episode_id == episode_id(task.name, "my-policy", {}, 1)
    assert episodes[1].record(agent="my-policy") is records[1]  # built once

    store = RolloutStore(tmp_path / "runs" / "sdk").open()
    for record in records:
        store.append(record)
    store.close()
    kept = list(RolloutStore(tmp_path / "runs" / "sdk").records())
    assert sorted(r.repeat for r in kept) == [0, 1, 2]


async def test_repeat_given_to_record_overrides_the_counter(task: Task) -> None:
    episode = await finished(task)
    auto = episode.record(agent="p")
    seventh = episode.record(agent="p", repeat=7)
    assert (auto.repeat, seventh.repeat) == (episode.repeat, 7)
    assert seventh.episode_id == episode_id(task.name, "p", {}, 7) != auto.episode_id
    with pytest.raises(ValueError, match="repeat=-1"):
        episode.record(agent="p", repeat=-1)


async def test_episodes_run_at_once_still_get_distinct_repeats(task: Task) -> None:
    episodes = await asyncio.gather(*(finished(task) for _ in range(4)))
    assert sorted(e.repeat for e in episodes) == [0, 1, 2, 3]
