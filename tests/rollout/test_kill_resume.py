"""Crash safety end to end: a rollout in a subprocess is SIGKILLed (or Ctrl-C'd) partway;
resuming finishes the plan with every episode recorded exactly once."""

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
from agentenv.rollout import LocalRunner, PlanAgent, RolloutPlan


class Slow(OracleAgent):
    async def run_turn(self, turn):
        await asyncio.sleep(0.04)
        return await super().run_turn(turn)


plan = RolloutPlan.build([sys.argv[1]], [PlanAgent.of("slow", Slow)], repeats=int(sys.argv[3]))
summary = LocalRunner(plan, sys.argv[2], concurrency=3).run_sync()
print("SUMMARY", summary.ran, summary.skipped, summary.interrupted, flush=True)
sys.exit(130 if summary.interrupted else 0)
"""

REPEATS = 20


def start(tmp_path: Path, bundle: Path, folder: Path) -> subprocess.Popen[str]:
    script = tmp_path / "rollout_script.py"
    script.write_text(textwrap.dedent(SCRIPT))
    return subprocess.Popen(
        [sys.executable, str(script), str(bundle), str(folder), str(REPEATS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_lines(path: Path, count: int, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 30
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


def test_sigkill_then_resume_records_every_episode_exactly_once(
    tmp_path: Path, bundle: Path
) -> None:
    folder = tmp_path / "run"
    episodes = folder / "episodes.jsonl"
    proc = start(tmp_path, bundle, folder)
    wait_for_lines(episodes, 6, proc)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    kept = episodes.read_bytes()
    done = kept.count(b"\n")
    assert 6 <= done < 2 * REPEATS
    for line in kept.splitlines():  # every finished record survived whole
        json.loads(line)
    # as a kill in the middle of a write would leave it: a partial last line
    partial = kept.splitlines()[0][:80]
    episodes.write_bytes(kept + partial)

    proc = start(tmp_path, bundle, folder)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "dropped a partial record at the end (80 bytes)" in err
    ran, skipped = (int(x) for x in out.split()[1:3])
    assert skipped == done and ran == 2 * REPEATS - done
    lines = episodes.read_text().splitlines()
    ids = [json.loads(line)["episode_id"] for line in lines]
    assert sorted(ids) == sorted(planned_ids(bundle))  # every episode, each exactly once


def test_ctrl_c_stops_cleanly_and_keeps_what_finished(tmp_path: Path, bundle: Path) -> None:
    folder = tmp_path / "run"
    episodes = folder / "episodes.jsonl"
    proc = start(tmp_path, bundle, folder)
    wait_for_lines(episodes, 4, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    _, ran, skipped, interrupted = out.split()
    assert interrupted == "True" and skipped == "0"
    lines = episodes.read_bytes().splitlines(keepends=True)
    assert len(lines) == int(ran) and all(line.endswith(b"\n") for line in lines)
    assert int(ran) < 2 * REPEATS

    proc = start(tmp_path, bundle, folder)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    ids = [json.loads(line)["episode_id"] for line in episodes.read_text().splitlines()]
    assert sorted(ids) == sorted(planned_ids(bundle))
