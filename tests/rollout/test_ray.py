"""The Ray runner: the same plan over a local Ray cluster (started by the test with two
CPUs and its temp dir under tmp_path, shut down after), results streamed back to one
store, resume, errors and timeouts recorded inside workers, and workers that die for real
(a tool exits their process) replaced, their batches run again, each episode recorded once."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agentenv.cli.rollout_command import report, rollout
from agentenv.rollout import LocalRunner, RayRunner, RayUnavailable, RolloutPlan, RolloutStore
from agentenv.rollout.episode import WORKER
from agentenv.rollout.plan import PlanAgent
from agentenv.rollout.ray_runner import EpisodeWorker, import_ray

RAY_MISSING = "Ray is not installed (pip install 'agentenv-kit[ray]')"


@pytest.fixture(scope="module")
def ray_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One local Ray session for the module (Ray takes seconds to start)."""
    ray = pytest.importorskip("ray", reason=RAY_MISSING)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    temp = tmp_path_factory.mktemp("ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        _temp_dir=str(temp),
        configure_logging=False,
    )
    try:
        yield ray
    finally:
        ray.shutdown()


def statuses(folder: Path) -> dict[str, str]:
    return {r.episode_id: r.status for r in RolloutStore(folder).records()}


def test_ray_runs_the_same_plan_as_the_local_runner(
    ray_session: Any, bundle: Path, tmp_path: Path
) -> None:
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=6)
    summary = RayRunner(plan, tmp_path / "ray", num_workers=2, batch_size=4).run()
    assert (summary.ran, summary.passed, summary.failed) == (12, 6, 6)
    assert ray_session.is_initialized()  # a session it did not start is left running
    LocalRunner(plan, tmp_path / "local").run_sync()
    assert statuses(tmp_path / "ray") == statuses(tmp_path / "local")
    lines = (tmp_path / "ray" / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 12  # each episode once
    workers = {r.worker for r in RolloutStore(tmp_path / "ray").records()}
    assert WORKER not in workers and 1 <= len(workers) <= 2  # ran in the Ray workers

    more = RolloutPlan.build([bundle], ["oracle"], repeats=7)
    resumed = RayRunner(more, tmp_path / "ray", num_workers=2).run()
    assert (resumed.ran, resumed.skipped) == (2, 12)
    assert len(statuses(tmp_path / "ray")) == 14


def test_errors_and_timeouts_in_workers_are_recorded(
    ray_session: Any, tmp_path: Path, make_bundle: Any
) -> None:
    bundle = make_bundle("sleepy", "unsolved")
    plan = RolloutPlan.build([bundle], ["oracle"])
    summary = RayRunner(plan, tmp_path / "run", num_workers=2, batch_size=1, timeout=0.5).run()
    assert (summary.timeouts, summary.errors) == (1, 1)
    by_task = {r.task: r for r in RolloutStore(tmp_path / "run").records()}
    assert "took longer than 0.5 s" in (by_task["counters/sleepy"].error or "")
    assert "no reference solution" in (by_task["counters/unsolved"].error or "")


def test_the_cli_runs_on_ray(ray_session: Any, bundle: Path, tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(rollout)
    app.command()(report)
    out = tmp_path / "run"
    args = [str(bundle), "-n", "2", "-o", str(out), "--backend", "ray", "--workers", "2"]
    result = CliRunner().invoke(app, ["rollout", *args, "--batch-size", "1", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "4 episodes in" in result.stdout and "2 passed, 2 failed" in result.stdout
    assert len(RolloutStore(out)) == 4


def test_a_worker_runs_batches_without_ray(bundle: Path) -> None:
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=3)
    worker = EpisodeWorker(plan.tasks, plan.agents, plan.seeds, concurrency=2)
    results = worker.run_batch(list(plan.episodes()))
    assert sorted(status for status, _ in results) == ["failed"] * 3 + ["passed"] * 3
    assert len(worker.envs) == 1 and worker.ping() == WORKER


def test_without_ray_the_runner_says_how_to_install_it(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(RayUnavailable, match=r"pip install 'agentenv-kit\[ray\]'"):
        import_ray()
    with pytest.raises(RayUnavailable):
        RayRunner(RolloutPlan.build([bundle], ["oracle"]), tmp_path)


# -- workers that die ---------------------------------------------------------------------

EXIT_TOOLS = """

import os


@tool(kind="read", blocking=True)
def exit_worker(ctx: ToolContext, marker: str = "") -> dict:
    \"\"\"Without a marker, exit this process at once. With one, the first caller to remove
    the marker file leaves its pid in marker.pid and waits to be killed.

    Args:
        marker: A file whose removal lets one caller wait to be killed.
    \"\"\"
    if not marker:
        os._exit(1)
    try:
        os.unlink(marker)
    except FileNotFoundError:
        return {"killed": False}
    with open(marker + ".tmp", "w") as out:
        out.write(str(os.getpid()))
    os.replace(marker + ".tmp", marker + ".pid")
    while True:
        time.sleep(0.05)
"""

EXIT_TASK = """
name: {name}
description: Calls exit_worker (which may kill the process running it), then bumps by 3.
steps:
  - {{id: env, type: deploy_env, env_id: main, env: counter}}
  - {{id: agent, type: deploy_agent, agent_name: worker}}
  - {{id: p1, type: prompt_agent, prompt: "Bump the counter by 3."}}
  - id: check
    type: env_outcome_verifier
    checks:
      - {{collection: counters, key: c1, field: value, equals: 3}}
solution:
  p1:
    calls:
      - {{tool: exit_worker, args: {args}}}
      - {{tool: bump, args: {{amount: 3}}}}
    response: "Bumped."
"""


def exit_bundle(make_bundle: Any, name: str, args: dict[str, str]) -> Path:
    """The counters bundle with tasks bump, `name` (exit_worker(**args), then bump: it
    passes when it gets that far) and wrong."""
    bundle: Path = make_bundle("bump", "wrong")
    (bundle / "tasks" / f"{name}.yaml").write_text(
        EXIT_TASK.format(name=name, args=json.dumps(args))
    )
    with (bundle / "envs" / "counter" / "counter_tools.py").open("a") as tools:
        tools.write(textwrap.dedent(EXIT_TOOLS))
    return bundle


def store_lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]


def kill_when_told(pid_file: Path, done: threading.Event) -> None:
    """SIGKILL the process whose pid appears in pid_file (until `done`)."""
    while not done.wait(0.05):
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            return


def test_a_worker_killed_mid_batch_is_replaced_and_each_episode_recorded_once(
    ray_session: Any, tmp_path: Path, make_bundle: Any
) -> None:
    marker = tmp_path / "kill-once"
    marker.touch()
    bundle = exit_bundle(make_bundle, "crash", {"marker": str(marker)})
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=2)
    ids = [e.id for e in plan.episodes()]
    assert [e.task for e in plan.episodes()][:3] == ["counters/bump"] * 2 + ["counters/crash"]
    # One worker, one episode at a time, batches of 3: the worker finishes bump, bump, then
    # is SIGKILLed (by the thread) in the first crash episode, mid-batch, with the second
    # batch queued behind it. (The timeout only turns a failed kill into a failed test.)
    runner = RayRunner(
        plan, tmp_path / "run", num_workers=1, batch_size=3, concurrency=1, timeout=120
    )
    done = threading.Event()
    killer = threading.Thread(target=kill_when_told, args=(tmp_path / "kill-once.pid", done))
    killer.start()
    try:
        summary = runner.run()
    finally:
        done.set()
        killer.join()
    dead = (tmp_path / "kill-once.pid").read_text()  # a worker was killed
    assert (summary.ran, summary.passed, summary.failed, summary.errors) == (6, 4, 2, 0)
    lines = store_lines(tmp_path / "run")
    assert sorted(r["episode_id"] for r in lines) == sorted(ids)  # none lost, none twice
    by_task = {r["task"]: r["status"] for r in lines}
    assert by_task == {
        "counters/bump": "passed",
        "counters/crash": "passed",
        "counters/wrong": "failed",
    }
    # What the dead worker finished before dying never reached the driver: it ran again.
    assert not any(r["worker"].endswith(f":{dead}") for r in lines)


def test_an_episode_that_kills_every_worker_is_recorded_as_an_error_after_the_retries(
    ray_session: Any, tmp_path: Path, make_bundle: Any
) -> None:
    bundle = exit_bundle(make_bundle, "doom", {})
    plan = RolloutPlan.build([bundle], ["oracle"])
    # Batches [bump, doom] and [wrong]: doom kills every worker it runs on, bump with it once.
    runner = RayRunner(
        plan, tmp_path / "run", num_workers=2, batch_size=2, concurrency=2, worker_retries=1
    )
    summary = runner.run()
    assert (summary.ran, summary.passed, summary.failed, summary.errors) == (3, 1, 1, 1)
    lines = store_lines(tmp_path / "run")
    assert sorted(r["episode_id"] for r in lines) == sorted(e.id for e in plan.episodes())
    for record in lines:
        if record["task"] == "counters/doom":
            assert record["status"] == "error"
            assert "the Ray worker running this episode died, 2 times" in record["error"]
            assert "worker_retries=1" in record["error"]
        else:
            assert record["status"] in ("passed", "failed") and not record["error"]


def test_workers_that_cannot_start_stop_the_rollout_with_a_clear_error(
    ray_session: Any, bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent factory from a module only the driver has: no worker can unpickle its
    # arguments, so every fresh worker would fail the same way; no retries, no records.
    module = types.ModuleType("agentenv_driver_only_agents")
    exec(
        "def make():\n    from agentenv.agents.oracle import OracleAgent\n    return OracleAgent()",
        module.__dict__,
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    plan = RolloutPlan.build([bundle], [PlanAgent.of("mine", module.make)])
    runner = RayRunner(plan, tmp_path / "run", num_workers=1, batch_size=1)
    with pytest.raises(RayUnavailable, match="a Ray worker could not start") as info:
        runner.run()
    assert "No module named 'agentenv_driver_only_agents'" in str(info.value)
    assert len(RolloutStore(tmp_path / "run")) == 0
