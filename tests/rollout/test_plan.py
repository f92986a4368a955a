"""The rollout plan: tasks x agents x seeds x repeats, stable episode ids, and every bad
input caught before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.agents import OracleAgent
from agentenv.rollout import PlanAgent, PlanError, RolloutPlan, episode_id


def test_the_plan_is_the_product_of_its_parts(bundle: Path) -> None:
    plan = RolloutPlan.build(
        [bundle], ["oracle"], repeats=3, seeds=[{"counter": "c1"}, {"counter": "c2"}]
    )
    episodes = list(plan.episodes())
    assert len(plan) == len(episodes) == 2 * 1 * 2 * 3
    assert sorted(plan.tasks) == ["counters/bump", "counters/wrong"]
    assert len({e.id for e in episodes}) == len(episodes)
    first = episodes[0]
    assert (first.task, first.agent, first.seed, first.repeat) == (
        "counters/bump",
        "oracle",
        {"counter": "c1"},
        0,
    )
    assert [e.repeat for e in episodes[:3]] == [0, 1, 2]


def test_a_seed_set_given_twice_is_planned_once(bundle: Path) -> None:
    once = RolloutPlan.build([bundle], ["oracle"], seeds=[{"counter": "c1"}, {"counter": "c2"}])
    plan = RolloutPlan.build(
        [bundle],
        ["oracle"],
        seeds=[{"counter": "c1"}, {"counter": "c2"}, {"counter": "c1"}, {"counter": "c2"}],
    )
    episodes = list(plan.episodes())
    assert len(plan) == len(episodes) == 2 * 2
    assert len({e.id for e in episodes}) == len(episodes)
    assert plan.seeds == [{"counter": "c1"}, {"counter": "c2"}]  # first-seen order
    assert [e.id for e in episodes] == [e.id for e in once.episodes()]
    # the same values in another key order are the same seed set
    reordered = RolloutPlan.build(
        [bundle], ["oracle"], seeds=[{"counter": "c1", "n": 1}, {"n": 1, "counter": "c1"}]
    )
    assert len(reordered) == 2
    assert len({e.id for e in reordered.episodes()}) == 2


def test_episode_ids_are_stable_and_derived_from_their_inputs(bundle: Path) -> None:
    one = [e.id for e in RolloutPlan.build([bundle], ["oracle"], repeats=2).episodes()]
    two = [e.id for e in RolloutPlan.build([bundle], ["oracle"], repeats=2).episodes()]
    assert one == two
    assert one[0] == episode_id("counters/bump", "oracle", {}, 0)
    assert episode_id("counters/bump", "oracle", {"a": 1, "b": 2}, 0) == episode_id(
        "counters/bump", "oracle", {"b": 2, "a": 1}, 0
    )
    assert episode_id("t", "oracle", {}, 0) != episode_id("t", "oracle", {}, 1)
    assert episode_id("t", "oracle", {}, 0) != episode_id("t", "other", {}, 0)
    # more repeats keep the ids of the first ones: a bigger plan resumes a smaller one
    more = [e.id for e in RolloutPlan.build([bundle], ["oracle"], repeats=3).episodes()]
    assert set(one) < set(more)


def test_targets_can_be_files_folders_and_catalog_names(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    by_file = RolloutPlan.build([bundle / "tasks" / "bump.yaml"], ["oracle"])
    assert list(by_file.tasks) == ["counters/bump"]
    assert by_file.tasks["counters/bump"].file.is_absolute()
    monkeypatch.setenv("AGENTENV_PATH", str(bundle.parent))
    monkeypatch.chdir(bundle.parent.parent)
    assert list(RolloutPlan.build(["counters/wrong"], ["oracle"]).tasks) == ["counters/wrong"]
    assert len(RolloutPlan.build(["counters"], ["oracle"]).tasks) == 2
    # the same task twice is one task
    twice = RolloutPlan.build(["counters/bump", bundle / "tasks" / "bump.yaml"], ["oracle"])
    assert len(twice) == 1


@pytest.mark.parametrize(
    ("targets", "agents", "message"),
    [
        (["nowhere/at-all.yaml"], ["oracle"], "no task file, bundle folder or catalog task"),
        (["{bundle}/tasks/../missing"], ["oracle"], "no task file"),
        (["{bundle}"], ["no-such-agent"], "unknown agent 'no-such-agent'"),
        (["{bundle}"], ["oracle:extra"], "takes no argument"),
        (["{bundle}"], [], "no agents"),
        (["{bundle}"], ["oracle", "oracle"], "named twice"),
        ([], ["oracle"], "no tasks"),
    ],
)
def test_a_plan_naming_something_missing_fails_before_anything_runs(
    bundle: Path, targets: list[str], agents: list[str], message: str
) -> None:
    resolved = [t.format(bundle=bundle) for t in targets]
    with pytest.raises(PlanError, match=message):
        RolloutPlan.build(resolved, agents)


def test_a_catalog_name_that_is_not_there_is_named(
    bundle: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTENV_PATH", str(bundle.parent))
    with pytest.raises(PlanError, match="has no task 'nope'"):
        RolloutPlan.build(["counters/nope"], ["oracle"])


def test_an_environment_folder_is_named_so_with_what_runs_it(tmp_path: Path) -> None:
    examples = Path(__file__).resolve().parents[2] / "examples"
    with pytest.raises(PlanError) as caught:
        RolloutPlan.build([examples / "envs" / "support-desk"], ["oracle"])
    message = str(caught.value)
    assert "is an environment, not a bundle" in message
    assert "agent-env validate" in message and "agent-env serve" in message
    # the example bundle links the environment into its envs/
    assert str(examples / "bundles" / "support-desk") in message

    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "env.yaml").write_text("name: alone\n")
    with pytest.raises(PlanError, match=r"is an environment.*whose envs/ holds it"):
        RolloutPlan.build([alone], ["oracle"])


def test_a_task_that_cannot_run_fails_the_plan(bundle: Path) -> None:
    (bundle / "tasks" / "broken.yaml").write_text(
        "steps:\n  - {id: a, type: deploy_envv, env_id: x, env: counter}\n"
    )
    with pytest.raises(PlanError, match=r"counters/broken.*deploy_envv"):
        RolloutPlan.build([bundle], ["oracle"])
    (bundle / "tasks" / "broken.yaml").write_text("steps: 3\n")
    with pytest.raises(PlanError, match=r"broken\.yaml"):
        RolloutPlan.build([bundle], ["oracle"])


@pytest.mark.parametrize(
    ("repeats", "seeds", "message"),
    [(0, None, "repeats"), (1, [], "no seeds"), (1, [["x"]], "seeds\\[0\\]")],
)
def test_bad_numbers_and_seeds(bundle: Path, repeats: int, seeds: list, message: str) -> None:
    with pytest.raises(PlanError, match=message):
        RolloutPlan.build([bundle], ["oracle"], repeats=repeats, seeds=seeds)


def test_python_agents_are_classes_factories_or_instances(bundle: Path) -> None:
    by_class = PlanAgent.of("mine", OracleAgent)
    assert isinstance(by_class.make(), OracleAgent)
    assert by_class.make() is not by_class.make()
    shared = OracleAgent()
    assert PlanAgent.of("shared", shared).make() is shared
    assert isinstance(PlanAgent.of("f", lambda: OracleAgent()).make(), OracleAgent)
    with pytest.raises(PlanError, match="expected an Agent"):
        PlanAgent.of("bad", 42)  # type: ignore[arg-type]
    plan = RolloutPlan.build([bundle], [by_class, "oracle"])
    assert list(plan.agents) == ["mine", "oracle"]
    assert plan.describe()["agents"] == ["mine", "oracle"]
    assert plan.describe(ids=True)["episode_ids"] == [e.id for e in plan.episodes()]


EXAMPLES = Path(__file__).parents[2] / "examples"


def test_a_harbor_task_directory_is_a_target() -> None:
    from agentenv.rollout.plan import resolve_targets

    (task,) = resolve_targets([EXAMPLES / "harbor" / "word-stats"])
    assert task.name == "harbor/word-stats"


async def test_a_harbor_task_directory_is_a_target_inside_an_event_loop() -> None:
    # A trainer builds its plan from async code: the Harbor build must not nest asyncio.run.
    plan = RolloutPlan.build([EXAMPLES / "harbor" / "word-stats"], ["oracle"])
    assert list(plan.tasks) == ["harbor/word-stats"]


def test_a_bundle_given_as_dot_is_named_by_its_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentenv.rollout.plan import resolve_targets

    monkeypatch.chdir(EXAMPLES / "bundles" / "support-desk")
    names = sorted(t.name for t in resolve_targets(["."]))
    assert names == ["support-desk/escalate-refund", "support-desk/resolve-billing"]


def test_a_base_url_reaches_the_agent_but_not_its_name() -> None:
    plan = RolloutPlan.build(
        [EXAMPLES / "bundles" / "support-desk"], ["openai:m"], base_url="http://h:9/v1"
    )
    assert plan.describe()["agents"] == ["openai:m"]
    agent = plan.agents["openai:m"]
    assert agent.spec == "openai:m?base_url=http://h:9/v1"
    assert agent.make().settings.base_url == "http://h:9/v1"  # type: ignore[attr-defined]
    with pytest.raises(PlanError, match="agent 'oracle' takes no --base-url"):
        RolloutPlan.build([EXAMPLES / "bundles" / "support-desk"], ["oracle"], base_url="x")
