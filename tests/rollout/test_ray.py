"""The Ray runner: the same plan over a local Ray cluster (started by the test with two
CPUs and its temp dir under tmp_path, shut down after), results streamed back to one
store, resume, and errors and timeouts recorded inside workers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agentenv.cli.rollout_command import report, rollout
from agentenv.rollout import LocalRunner, RayRunner, RayUnavailable, RolloutPlan, RolloutStore
from agentenv.rollout.episode import WORKER
from agentenv.rollout.ray_runner import EpisodeWorker, import_ray

RAY_MISSING = "Ray is not installed (pip install 'agentenv-framework[ray]')"


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
    with pytest.raises(RayUnavailable, match=r"pip install 'agentenv-framework\[ray\]'"):
        import_ray()
    with pytest.raises(RayUnavailable):
        RayRunner(RolloutPlan.build([bundle], ["oracle"]), tmp_path)
