"""The process runner: the same plan over worker processes of this machine (spawned, one
store written by the parent), the same records as the local runner, resume after a stop,
errors retried, workers that die for real (SIGKILLed by the test, or a tool that exits
their process) replaced with each episode recorded once, and workers that cannot start
stopping the rollout with a clear error."""

from __future__ import annotations

import json
import os
import signal
import sys
import textwrap
import threading
import types
from pathlib import Path
from typing import Any

import pytest
import typer
from tests.rollout.conftest import (
    BUMP_TASK,
    CHAT_TASK,
    NO_SOLUTION_TASK,
    TWO_ENVS_TASK,
    WRONG_TASK,
    write_bundle,
)
from typer.testing import CliRunner

from agentenv.cli.rollout_command import rollout
from agentenv.rollout import (
    LocalRunner,
    PlanAgent,
    ProcessRunner,
    RolloutPlan,
    RolloutStore,
    WorkerStartError,
)
from agentenv.rollout.episode import WORKER

# Fields that differ between two runs of the same episode: wall-clock times and who ran it.
TIMING = {"started_at", "ended_at", "duration_s", "wall_time", "duration_ms", "worker"}


def timeless(value: Any) -> Any:
    """A record's JSON without its wall-clock fields (at any depth)."""
    if isinstance(value, dict):
        return {k: timeless(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [timeless(v) for v in value]
    return value


def store_lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]


def by_id(folder: Path) -> dict[str, Any]:
    return {r["episode_id"]: timeless(r) for r in store_lines(folder)}


def test_the_records_are_the_local_runners_for_the_same_plan(tmp_path: Path) -> None:
    tasks = {
        "bump": BUMP_TASK,
        "wrong": WRONG_TASK,
        "two": TWO_ENVS_TASK,
        "chat": CHAT_TASK,
        "unsolved": NO_SOLUTION_TASK,
    }
    bundle = write_bundle(tmp_path, tasks=tasks)
    seeds = [{"counter": "c1"}, {"counter": "c2"}]
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=3, seeds=seeds)
    summary = ProcessRunner(plan, tmp_path / "procs", workers=2, concurrency=4).run()
    assert (summary.ran, summary.passed, summary.failed, summary.errors) == (30, 18, 6, 6)
    LocalRunner(plan, tmp_path / "local").run_sync()
    lines = store_lines(tmp_path / "procs")
    assert len(lines) == 30  # each episode once
    assert by_id(tmp_path / "procs") == by_id(tmp_path / "local")
    workers = {r["worker"] for r in lines}
    assert WORKER not in workers and 1 <= len(workers) <= 2  # ran in the worker processes


class StopAfter:
    """A Progress that stops the runner after n episodes."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.runner: ProcessRunner | None = None
        self.started: tuple[int, int] | None = None
        self.statuses: list[str] = []

    def start(self, total: int, done: int) -> None:
        self.started = (total, done)

    def advance(self, status: str) -> None:
        self.statuses.append(status)
        if len(self.statuses) == self.n and self.runner is not None:
            self.runner.stop()

    def stop(self) -> None:
        pass


SLOW_TOOLS = """

@tool(kind="read")
async def pause(ctx: ToolContext, seconds: float) -> dict:
    \"\"\"Wait (on the event loop).

    Args:
        seconds: How long.
    \"\"\"
    import asyncio

    await asyncio.sleep(seconds)
    return {"paused": seconds}
"""

SLOW_TASK = """
name: slow
description: Pauses a little, then bumps by 3.
steps:
  - {id: env, type: deploy_env, env_id: main, env: counter}
  - {id: agent, type: deploy_agent, agent_name: worker}
  - {id: p1, type: prompt_agent, prompt: "Bump the counter by 3."}
  - id: check
    type: env_outcome_verifier
    checks:
      - {collection: counters, key: c1, field: value, equals: 3}
solution:
  p1:
    calls:
      - {tool: pause, args: {seconds: 0.05}}
      - {tool: bump, args: {amount: 3}}
    response: "Bumped."
"""


def slow_bundle(root: Path) -> Path:
    bundle = write_bundle(root, tasks={"slow": SLOW_TASK})
    with (bundle / "envs" / "counter" / "counter_tools.py").open("a") as tools:
        tools.write(textwrap.dedent(SLOW_TOOLS))
    return bundle


def test_stop_keeps_what_finished_and_resume_finishes(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    plan = RolloutPlan.build([slow_bundle(tmp_path)], ["oracle"], repeats=40)
    progress = StopAfter(5)
    runner = ProcessRunner(plan, folder, workers=2, concurrency=2, progress=progress)
    progress.runner = runner
    summary = runner.run()
    assert summary.interrupted and progress.started == (40, 0)
    assert 5 <= summary.ran < 40 and summary.remaining == 40 - summary.ran
    assert len(store_lines(folder)) == summary.ran == len(progress.statuses)
    after = StopAfter(10_000)
    rest = ProcessRunner(plan, folder, workers=2, concurrency=8, progress=after).run()
    assert after.started == (40, summary.ran)
    assert not rest.interrupted and rest.ran == 40 - summary.ran
    ids = [r["episode_id"] for r in store_lines(folder)]
    assert sorted(ids) == sorted(e.id for e in plan.episodes())  # each once
    again = ProcessRunner(plan, folder, workers=2).run()
    assert again.ran == 0 and again.skipped == 40


def test_errors_are_retried_with_retry_errors(tmp_path: Path) -> None:
    bundle = write_bundle(tmp_path, tasks={"bump": BUMP_TASK, "unsolved": NO_SOLUTION_TASK})
    folder = tmp_path / "run"
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=2)
    first = ProcessRunner(plan, folder, workers=2).run()
    assert (first.passed, first.errors) == (2, 2)
    skipped = ProcessRunner(plan, folder, workers=2).run()
    assert skipped.ran == 0
    retried = ProcessRunner(plan, folder, workers=2, retry_errors=True).run()
    assert (retried.skipped, retried.ran, retried.errors) == (2, 2, 2)
    assert len(RolloutStore(folder)) == 4 and len(store_lines(folder)) == 6


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


def exit_bundle(root: Path, name: str, args: dict[str, str]) -> Path:
    """Tasks bump, wrong and `name` (exit_worker(**args), then bump: it passes when it
    gets that far)."""
    bundle = write_bundle(root, tasks={"bump": BUMP_TASK, "wrong": WRONG_TASK})
    (bundle / "tasks" / f"{name}.yaml").write_text(
        EXIT_TASK.format(name=name, args=json.dumps(args))
    )
    with (bundle / "envs" / "counter" / "counter_tools.py").open("a") as tools:
        tools.write(textwrap.dedent(EXIT_TOOLS))
    return bundle


def kill_when_told(pid_file: Path, done: threading.Event) -> None:
    """SIGKILL the process whose pid appears in pid_file (until `done`)."""
    while not done.wait(0.05):
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
            return


def test_a_worker_killed_mid_run_is_replaced_and_each_episode_recorded_once(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "kill-once"
    marker.touch()
    bundle = exit_bundle(tmp_path, "crash", {"marker": str(marker)})
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=4)
    ids = [e.id for e in plan.episodes()]
    # Two workers, three episodes at once each: the first crash episode to start waits in
    # its worker, which the thread SIGKILLs with the other episodes it holds in flight.
    runner = ProcessRunner(plan, tmp_path / "run", workers=2, concurrency=3, timeout=120)
    done = threading.Event()
    killer = threading.Thread(target=kill_when_told, args=(tmp_path / "kill-once.pid", done))
    killer.start()
    try:
        summary = runner.run()
    finally:
        done.set()
        killer.join()
    dead = int((tmp_path / "kill-once.pid").read_text())
    assert dead in runner.pids and len(runner.pids) == 3  # killed, and replaced once
    assert (summary.ran, summary.passed, summary.failed, summary.errors) == (12, 8, 4, 0)
    lines = store_lines(tmp_path / "run")
    assert sorted(r["episode_id"] for r in lines) == sorted(ids)  # none lost, none twice
    assert {r["task"]: r["status"] for r in lines} == {
        "counters/bump": "passed",
        "counters/crash": "passed",
        "counters/wrong": "failed",
    }
    # What the dead worker sent before it died was written; the rest ran again elsewhere.
    alive = {f"{r['worker'].rpartition(':')[2]}" for r in lines}
    assert alive <= {str(pid) for pid in runner.pids}


def test_an_episode_that_kills_every_worker_is_recorded_as_an_error_after_the_retries(
    tmp_path: Path,
) -> None:
    bundle = exit_bundle(tmp_path, "doom", {})
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=2)
    runner = ProcessRunner(plan, tmp_path / "run", workers=2, concurrency=2, worker_retries=1)
    summary = runner.run()
    assert (summary.ran, summary.passed, summary.failed, summary.errors) == (6, 2, 2, 2)
    lines = store_lines(tmp_path / "run")
    assert sorted(r["episode_id"] for r in lines) == sorted(e.id for e in plan.episodes())
    for record in lines:
        if record["task"] == "counters/doom":
            assert record["status"] == "error"
            assert (
                "the worker process running this episode died (exit code 1), 2 times"
                in (record["error"])
            )
            assert "worker_retries=1" in record["error"]
        else:
            assert record["status"] in ("passed", "failed") and not record["error"]


# -- bad paths ----------------------------------------------------------------------------


def test_a_plan_no_worker_can_load_stops_the_rollout_with_a_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An agent factory from a module only the parent has: no worker can unpickle the plan.
    module = types.ModuleType("agentenv_parent_only_agents")
    exec(
        "def make():\n    from agentenv.agents.oracle import OracleAgent\n    return OracleAgent()",
        module.__dict__,
    )
    monkeypatch.setitem(sys.modules, module.__name__, module)
    bundle = write_bundle(tmp_path)
    plan = RolloutPlan.build([bundle], [PlanAgent.of("mine", module.make)])
    runner = ProcessRunner(plan, tmp_path / "run", workers=2)
    with pytest.raises(WorkerStartError, match="a worker process could not start") as info:
        runner.run()
    assert "No module named 'agentenv_parent_only_agents'" in str(info.value)
    assert len(RolloutStore(tmp_path / "run")) == 0


def test_a_plan_that_cannot_be_pickled_is_refused_before_any_worker_starts(
    tmp_path: Path,
) -> None:
    from agentenv.agents.oracle import OracleAgent

    plan = RolloutPlan.build([write_bundle(tmp_path)], [PlanAgent.of("l", lambda: OracleAgent())])
    runner = ProcessRunner(plan, tmp_path / "run", workers=2)
    with pytest.raises(WorkerStartError, match="cannot be sent to worker processes"):
        runner.run()
    assert runner.pids == []


def test_an_environment_that_fails_to_load_in_the_workers_is_an_error_per_episode(
    tmp_path: Path,
) -> None:
    bundle = write_bundle(tmp_path)
    plan = RolloutPlan.build([bundle], ["oracle"], repeats=2)
    (bundle / "envs" / "counter" / "env.yaml").write_text("kind: Environment\nname: [broken\n")
    summary = ProcessRunner(plan, tmp_path / "run", workers=2).run()
    assert (summary.ran, summary.errors) == (4, 4)
    for record in store_lines(tmp_path / "run"):
        assert "env.yaml" in record["error"]


def test_bad_numbers_are_refused(tmp_path: Path) -> None:
    plan = RolloutPlan.build([write_bundle(tmp_path)], ["oracle"])
    for bad in (
        {"workers": 0},
        {"concurrency": 0},
        {"worker_retries": -1},
        {"start_method": "fork"},
    ):
        with pytest.raises(ValueError):
            ProcessRunner(plan, tmp_path / "run", **bad)


def test_the_cli_runs_on_worker_processes(tmp_path: Path) -> None:
    app = typer.Typer()
    app.command()(rollout)
    app.command()(lambda: None)
    out = tmp_path / "run"
    bundle = write_bundle(tmp_path)
    args = [str(bundle), "-n", "2", "-o", str(out), "--backend", "processes", "--workers", "2"]
    result = CliRunner().invoke(app, ["rollout", *args, "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "4 episodes in" in result.stdout and "2 passed, 2 failed" in result.stdout
    assert len(RolloutStore(out)) == 4
    local = CliRunner().invoke(app, ["rollout", str(bundle), "--workers", "2", "-o", str(out)])
    assert local.exit_code != 0 and "--workers is for --backend processes or ray" in local.output
