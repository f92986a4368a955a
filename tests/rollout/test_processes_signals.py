"""The process runner end to end in a subprocess: Ctrl-C to the whole process group (as a
terminal sends it) stops cleanly, keeps what finished and exits 130, and resuming records
every episode exactly once; SIGKILL of the parent leaves no worker process behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from agentenv.rollout import PlanAgent, RolloutPlan

SCRIPT = """
import asyncio
import sys

from agentenv.agents import OracleAgent
from agentenv.rollout import PlanAgent, ProcessRunner, RolloutPlan


class Slow(OracleAgent):
    async def run_turn(self, turn):
        await asyncio.sleep(0.04)
        return await super().run_turn(turn)


if __name__ == "__main__":
    plan = RolloutPlan.build([sys.argv[1]], [PlanAgent.of("slow", Slow)], repeats=int(sys.argv[3]))
    summary = ProcessRunner(plan, sys.argv[2], workers=2, concurrency=2).run()
    print("SUMMARY", summary.ran, summary.skipped, summary.interrupted, flush=True)
    sys.exit(130 if summary.interrupted else 0)
"""

REPEATS = 30


def start(tmp_path: Path, bundle: Path, folder: Path) -> subprocess.Popen[str]:
    script = tmp_path / "rollout_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    return subprocess.Popen(
        [sys.executable, str(script), str(bundle), str(folder), str(REPEATS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's job
    )


def wait_for_lines(path: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if path.is_file() and path.read_bytes().count(b"\n") >= count:
            return
        if proc.poll() is not None:
            raise AssertionError(f"the rollout ended early: {proc.communicate()}")
        time.sleep(0.02)
    proc.kill()
    raise AssertionError("the rollout wrote too few records in time")


def planned_ids(bundle: Path) -> list[str]:
    plan = RolloutPlan.build([bundle], [PlanAgent.of("slow", object)], repeats=REPEATS)
    return [e.id for e in plan.episodes()]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_ctrl_c_to_the_process_group_stops_cleanly_and_resume_finishes(
    tmp_path: Path, bundle: Path
) -> None:
    folder = tmp_path / "run"
    episodes = folder / "episodes.jsonl"
    proc = start(tmp_path, bundle, folder)
    wait_for_lines(episodes, 4, proc)
    os.killpg(proc.pid, signal.SIGINT)  # the parent and its workers, as Ctrl-C does
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "Traceback" not in err  # the workers ignore it; the parent stops them
    _, ran, skipped, interrupted = out.split()
    assert interrupted == "True" and skipped == "0"
    lines = episodes.read_bytes().splitlines(keepends=True)
    assert len(lines) == int(ran) and all(line.endswith(b"\n") for line in lines)
    assert int(ran) < 2 * REPEATS

    proc = start(tmp_path, bundle, folder)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    ids = [json.loads(line)["episode_id"] for line in episodes.read_text().splitlines()]
    assert sorted(ids) == sorted(planned_ids(bundle))  # every episode, each exactly once


def test_a_killed_parent_leaves_no_worker_behind(tmp_path: Path, bundle: Path) -> None:
    folder = tmp_path / "run"
    episodes = folder / "episodes.jsonl"
    proc = start(tmp_path, bundle, folder)
    wait_for_lines(episodes, 4, proc)
    workers = {
        int(json.loads(line)["worker"].rpartition(":")[2])
        for line in episodes.read_text().splitlines()
    }
    os.kill(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 30
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(pid) for pid in workers)  # they saw their pipe close and left
    for line in episodes.read_bytes().splitlines():
        json.loads(line)  # every record written whole
