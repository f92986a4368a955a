"""Task synthesis end to end: trials, knobs, determinism, splits, the bundle, bad input."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.testing import CliRunner

from agentenv import Environment
from agentenv.state import State, canonical_json
from agentenv.synth.dataset import assign_split, parse_ratios
from agentenv.synth.knobs import KnobError, Knobs, near_text
from agentenv.synth.tasks import SynthConfig, TaskSynthesizer
from agentenv.synth.trials import full_trials
from agentenv.synth.verify import number_pattern
from agentenv.tasks.bundle import Bundle, Task

ROOT = Path(__file__).resolve().parents[2]
DESK = ROOT / "examples" / "envs" / "support-desk"
N = 40
ARGS = ["--depth", "2..6", "--obfuscation", "0.5", "--distractors", "3", "--random-seed", "7"]
runner = CliRunner()

BROKEN_ENV = """\
apiVersion: agentenv/v1
kind: Environment
name: broken
state:
  items: {key: id}
seed:
  items: [{id: I-1, name: first}]
tools:
  - module: tools.py
"""
BROKEN_TOOLS = '''\
from agentenv import ToolContext, ToolError, tool


@tool(kind="read")
def get_item(ctx: ToolContext, item_id: str) -> dict:
    """Get an item by id."""
    raise ToolError("the item service is down")
'''


def cli() -> typer.Typer:
    """The commands as the main app wires them (imported here: the CLI pulls in all)."""
    from agentenv.cli.synth_command import graph as graph_command
    from agentenv.cli.synth_command import synth_app

    app = typer.Typer()
    app.command()(graph_command)
    app.add_typer(synth_app, name="synth")
    return app


def synth(out: Path, *extra: str, n: int = N) -> Any:
    return runner.invoke(
        cli(), ["synth", "tasks", str(DESK), "-n", str(n), "--out", str(out), *extra]
    )


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "support-desk"
    result = synth(out, *ARGS)
    assert result.exit_code == 0, result.output
    assert f"{N} tasks from" in result.output and "acceptance rate" in result.output
    assert "command: agent-env synth tasks" in result.output
    return out


@pytest.fixture(scope="module")
def docs(bundle: Path) -> dict[str, dict[str, Any]]:
    return {
        p.stem: yaml.safe_load(p.read_text()) for p in sorted((bundle / "tasks").glob("*.yaml"))
    }


@pytest.fixture(scope="module")
def seed() -> Any:
    return Environment.load(DESK).seed


def start_state(seed: Any, doc: dict[str, Any]) -> State:
    """The state a task's agent starts from: the seed and the task's distractors."""
    state = seed.fork()
    for step in steps_of(doc, "load_artifact"):
        for coll, rows in step["records"].items():
            for row in rows:
                state.put(coll, row)
    return state


def steps_of(doc: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [s for s in doc["steps"] if s["type"] == kind]


def prompt_of(doc: dict[str, Any]) -> str:
    return steps_of(doc, "prompt_agent")[0]["prompt"]


# -- the bundle ----------------------------------------------------------------------------


def test_the_bundle_is_laid_out_for_agent_env_run(bundle: Path, docs: dict[str, Any]) -> None:
    assert Bundle.is_bundle(bundle) and len(docs) == N
    assert sorted(docs) == [f"support-desk-{i:05d}" for i in range(1, N + 1)]
    env = Environment.load(bundle / "envs" / "support-desk")  # a copy: the bundle stands alone
    assert (
        env.name == "support-desk"
        and not (bundle / "envs" / "support-desk" / "__pycache__").exists()
    )
    for name in ("README.md", "report.json", "splits.json", "graph.json"):
        assert (bundle / name).is_file()
    assert f"{N} verifiable tasks" in (bundle / "README.md").read_text()


def test_every_task_passes_under_agent_env_run(bundle: Path, tmp_path: Path) -> None:
    from agentenv.cli import app as main_app

    result = runner.invoke(
        main_app, ["run", str(bundle), "--agent", "oracle", "--out", str(tmp_path / "run")]
    )
    assert result.exit_code == 0, result.output[-2000:]
    assert f"{N} passed" in result.output  # the rest of the wording is `run`'s own


def test_rollout_plans_accept_the_bundle(bundle: Path) -> None:
    from agentenv.rollout.plan import RolloutPlan

    plan = RolloutPlan.build([bundle], ["oracle"])
    assert len(plan.tasks) == N


async def test_every_task_passes_its_trials_read_back_from_disk(bundle: Path) -> None:
    """The written files, through the task runner: reference 1.0, nothing 0, prefixes < 1."""
    env = Environment.load(bundle / "envs" / "support-desk")
    for path in Bundle(bundle).task_files():
        task = Task.load(path)
        calls = len(task.spec.solution["main"].calls)
        trials = await full_trials(task.spec, env, calls)
        assert trials["reference"] == 1.0 and trials["nothing"] == 0.0
        assert len(trials["prefixes"]) == calls - 1 and all(p < 1.0 for p in trials["prefixes"])
        assert task.spec.metadata["synth"]["trials"]["prefixes"] == trials["prefixes"]


def test_verifiers_are_written_from_the_walk(docs: dict[str, Any]) -> None:
    writes = reads = 0
    for doc in docs.values():
        outcome = steps_of(doc, "env_outcome_verifier")
        answer = steps_of(doc, "agent_prompt_response_verifier")
        walk = doc["metadata"]["synth"]["walk"]
        if any(c["kind"] == "write" for c in walk):
            writes += 1
            assert outcome and outcome[0]["gold_replay"] == {"prompt_id": "main"}
            for check in outcome[0].get("checks", []):  # no time stamp is checked
                assert not any(k.endswith("_at") for k in check.get("where", {}))
                assert not str(check.get("field", "")).endswith("_at")
        else:
            reads += 1
            assert not outcome and answer  # read-only: required facts in the answer
        for check in answer[0]["checks"] if answer else []:
            needle = check.get("contains")
            assert needle is None or needle.lower() not in prompt_of(doc).lower()
    assert writes and reads


def test_provenance_regenerates_a_task(docs: dict[str, Any]) -> None:
    doc = docs["support-desk-00007"]
    synth = doc["metadata"]["synth"]
    assert synth["generator"].startswith("agentenv-synth/")
    assert synth["env"]["name"] == "support-desk" and synth["env"]["hash"].startswith("sha256:")
    assert synth["seed"] == 7 and synth["knobs"]["distractors"] == 3
    assert [c["tool"] for c in synth["walk"]] == [
        c["tool"] for c in doc["solution"]["main"]["calls"]
    ]
    env = Environment.load(DESK)
    config = SynthConfig(n=1, knobs=Knobs.parse("2..6", "mixed", 0.5, 3), seed=7)
    synthesizer = TaskSynthesizer(env, config)

    async def again() -> Any:
        from agentenv.synth.graph import build_graph

        synthesizer.graph = await build_graph(env, seed=7, sandbox=synthesizer.sandbox)
        return await synthesizer.candidate(synth["candidate"], 7)

    task = asyncio.run(again())
    assert task.document == doc


# -- knobs ---------------------------------------------------------------------------------


def test_knob_values_are_in_each_tasks_metadata(docs: dict[str, Any]) -> None:
    topologies = set()
    for doc in docs.values():
        difficulty = doc["metadata"]["difficulty"]
        calls = doc["solution"]["main"]["calls"]
        assert 2 <= difficulty["depth"] == len(calls) <= 6
        topologies.add(difficulty["topology"])
        loaded = steps_of(doc, "load_artifact")
        count = sum(len(v) for v in loaded[0]["records"].values()) if loaded else 0
        assert difficulty["distractors"] == count <= 3
        assert difficulty["obfuscation"] == 0.5
    assert topologies == {"chain", "fan-in", "fan-out"}
    assert any(d["metadata"]["difficulty"]["obfuscated"] for d in docs.values())
    assert any(d["metadata"]["difficulty"]["distractors"] for d in docs.values())


def test_obfuscated_records_are_named_by_a_unique_attribute(
    docs: dict[str, Any], seed: Any
) -> None:
    seen = 0
    for doc in docs.values():
        state = start_state(seed, doc)
        for hidden in doc["metadata"]["synth"]["obfuscated"]:
            seen += 1
            key = doc["solution"]["main"]["calls"][hidden["step"] - 1]["args"][hidden["param"]]
            prompt = prompt_of(doc)
            assert json.dumps(hidden["value"]) in prompt and json.dumps(key) not in prompt
            same = [
                r
                for r in state.list(hidden["collection"])
                if r.get(hidden["field"]) == hidden["value"]
            ]
            assert len(same) == 1 and str(same[0]["id"]) == str(key)
    assert seen


def test_distractors_are_near_duplicates_of_walk_records(docs: dict[str, Any], seed: Any) -> None:
    seed = seed.fork()
    for doc in docs.values():
        for step in steps_of(doc, "load_artifact"):
            for coll, rows in step["records"].items():
                for row in rows:
                    assert not seed.has(coll, row["id"])  # a new key
                    twins = [
                        r
                        for r in seed.list(coll)
                        if sum(r.get(k) == v for k, v in row.items()) >= len(row) - 3
                    ]
                    assert twins, row


def test_knobs_parse_and_refuse_bad_values() -> None:
    assert Knobs.parse("3").depth == (3, 3)
    assert Knobs.parse("2..6", "chain,fan_in").topologies == ("chain", "fan-in")
    for bad in ({"depth": "0..3"}, {"depth": "5..2"}, {"depth": "x"}, {"depth": "2..13"}):
        with pytest.raises(KnobError):
            Knobs.parse(**bad)
    with pytest.raises(KnobError, match="unknown topology"):
        Knobs.parse(topology="star")
    with pytest.raises(KnobError, match="between 0 and 1"):
        Knobs.parse(obfuscation=1.5)
    with pytest.raises(KnobError, match="distractors"):
        Knobs.parse(distractors=-1)
    text = near_text("Dana Whitfield", random.Random(0))
    assert text != "Dana Whitfield" and text.startswith("Dana")
    assert near_text("Order O-5531", random.Random(0)) != "Order O-5531"


def test_number_facts_match_as_people_write_them() -> None:
    import re

    assert re.search(number_pattern(98.0), "refunded $98.00 today")
    assert re.search(number_pattern(98), "it was 98")
    assert not re.search(number_pattern(98), "it was 980 or 1.98")
    assert re.search(number_pattern(29.95), "price 29.95")


# -- determinism, duplicates, splits -------------------------------------------------------


def test_the_same_seed_writes_the_same_bytes(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "again"
    result = synth(out, *ARGS)
    assert result.exit_code == 0, result.output
    files = sorted(p.relative_to(bundle) for p in bundle.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(out) for p in out.rglob("*") if p.is_file())
    for rel in files:
        assert (bundle / rel).read_bytes() == (out / rel).read_bytes(), rel
    other = tmp_path / "other"
    assert synth(other, *ARGS[:-1], "8", n=5).exit_code == 0
    assert (other / "tasks" / "support-desk-00001.yaml").read_text() != (
        bundle / "tasks" / "support-desk-00001.yaml"
    ).read_text()


def test_rerunning_into_the_same_folder_replaces_it(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "twice"
    assert synth(out, "--random-seed", "3", n=4).exit_code == 0
    assert synth(out, "--random-seed", "3", n=2).exit_code == 0
    assert len(list((out / "tasks").glob("*.yaml"))) == 2


def test_duplicates_are_removed(bundle: Path, docs: dict[str, Any]) -> None:
    walks = [canonical_json(d["solution"]["main"]["calls"]) for d in docs.values()]
    assert len(set(walks)) == len(walks)
    report = json.loads((bundle / "report.json").read_text())
    assert report["accepted"] == N
    assert sum(report["dropped"].values()) == report["candidates"] - N
    assert report["acceptance_rate"] == round(N / report["candidates"], 4)
    assert "internal_error" not in report["dropped"]
    assert all(k.startswith("trial_") is False for k in report["dropped"])


def test_splits_share_no_walk_prefix(bundle: Path, docs: dict[str, Any]) -> None:
    splits = json.loads((bundle / "splits.json").read_text())
    assert sorted(n for names in splits.values() for n in names) == sorted(docs)
    by_split = {name: s for s, names in splits.items() for name in names}
    for name, doc in docs.items():
        assert doc["metadata"]["split"] == by_split[name]
        assert assign_split(doc["metadata"]["synth"]["ancestry"]) == by_split[name]
    walks = {
        n: [canonical_json(c) for c in d["solution"]["main"]["calls"]] for n, d in docs.items()
    }
    for a, wa in walks.items():
        for b, wb in walks.items():
            if by_split[a] != by_split[b]:
                assert wa[0] != wb[0]  # no shared prefix at all, not even one call
    assert len(set(by_split.values())) >= 2


def test_split_ratios() -> None:
    assert parse_ratios("80/10/10") == (80.0, 10.0, 10.0)
    assert assign_split("0" * 16) == "train" and assign_split("f" * 16) == "test"
    assert assign_split("f" * 16, (1, 0, 0)) == "train"


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--obfuscation", "1.5"], "obfuscation must be between 0 and 1"),
        (["--depth", "0..3"], "depth must be a range within 1..12"),
        (["--depth", "6..2"], "is empty"),
        (["--distractors", "-1"], "distractors must be between 0 and 50"),
        (["--topology", "star"], "unknown topology 'star'"),
        (["-n", "0"], "-n must be between 1"),
        (["--split", "a,b"], "split must be three numbers"),
        (["--trials", "some"], "trials must be 'direct' or 'full'"),
    ],
)
def test_bad_knobs_give_a_clear_message(tmp_path: Path, flags: list[str], message: str) -> None:
    result = runner.invoke(
        cli(), ["synth", "tasks", str(DESK), "--out", str(tmp_path / "o"), *flags]
    )
    assert result.exit_code == 2 and message in result.output, result.output
    assert isinstance(result.exception, SystemExit)  # no traceback
    assert not (tmp_path / "o").exists()


def test_an_env_whose_tools_all_fail_keeps_its_report(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "env.yaml").write_text(BROKEN_ENV)
    (folder / "tools.py").write_text(BROKEN_TOOLS)
    out = tmp_path / "out"
    result = runner.invoke(
        cli(), ["synth", "tasks", str(folder), "-n", "3", "--depth", "1..2", "--out", str(out)]
    )
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert (
        "no task survived" in result.output
        and "no probe call of any tool returned something informative" in result.output
    )
    report = json.loads((out / "report.json").read_text())
    assert report["accepted"] == 0 and report["candidates"] == 3 * 40
    assert set(report["dropped"]) == {"call_failed", "no_walk"}
    assert "the item service is down" in report["drop_examples"]["call_failed"]


def test_a_foreign_output_folder_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    result = synth(out, n=1)
    assert result.exit_code == 2 and "not empty" in result.output
    assert (out / "notes.txt").read_text() == "keep me"


async def test_an_interrupted_run_keeps_what_it_made() -> None:
    env = Environment.load(DESK)
    synthesizer = TaskSynthesizer(env, SynthConfig(n=10, seed=1, trials="direct"))

    def progress(accepted: int, candidates: int) -> None:
        if accepted == 2:
            raise KeyboardInterrupt

    result = await synthesizer.run(progress)
    assert len(result.tasks) == 2 and result.report["stopped"] == "interrupted"


def test_direct_and_full_trials_accept_the_same_tasks() -> None:
    env = Environment.load(DESK)

    def names(trials: str) -> list[str]:
        config = SynthConfig(n=8, knobs=Knobs.parse("2..4"), seed=11, trials=trials)  # type: ignore[arg-type]
        result = asyncio.run(TaskSynthesizer(env, config).run())
        return [canonical_json(t.document["solution"]) for t in result.tasks]

    assert names("direct") == names("full")


def test_state_checklists_leave_out_what_holds_before(docs: dict[str, Any], seed: Any) -> None:
    from agentenv.grading import check_state

    for doc in docs.values():
        state = start_state(seed, doc)
        for step in steps_of(doc, "env_outcome_verifier"):
            for check in step.get("checks", []):
                assert not check_state(state, [check]).passed, check


def test_a_composed_env_is_copied_with_its_children(tmp_path: Path) -> None:
    """`personal` composes `../services/*`: they are copied beside it, so the bundle runs."""
    out = tmp_path / "personal"
    env = ROOT / "examples" / "envs" / "personal"
    result = runner.invoke(
        cli(), ["synth", "tasks", str(env), "-n", "2", "--random-seed", "2", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert (out / "envs" / "services" / "email" / "env.yaml").is_file()
    copied = Environment.load(out / "envs" / "personal")
    assert copied.seed.hash() == Environment.load(env).seed.hash()
    for path in Bundle(out).task_files():
        task = Task.load(path)
        calls = len(task.spec.solution["main"].calls)
        assert asyncio.run(full_trials(task.spec, copied, calls))["reference"] == 1.0
