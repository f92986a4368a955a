"""Task synthesis on the support-desk environment: verified tasks per minute per core and
the acceptance rate, printed with the command that made them.

    python benchmarks/bench_synth.py            # the issue's command: 500 tasks
    python benchmarks/bench_synth.py --quick    # 100 tasks, same shape

Each run is the `agent-env synth tasks` command in a fresh subprocess pinned to one CPU
core (so "per core" is what it says), timed from outside: process start to exit, which
includes importing, loading the environment, building the tool graph and writing the
bundle. Two runs of the same command:

1. baseline: `--trials direct`, the verifiers evaluated on the replayed states only;
2. `--trials full` (the default): every accepted task is also run through the task
   runner three ways: the oracle (must score 1.0), an agent that does nothing (0 on
   every verifier) and an agent for every strict prefix of the solution (below 1.0).

The goal is at least 200 verified tasks per minute per core with all trials.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DESK = ROOT / "examples" / "envs" / "support-desk"
GOAL = 200.0
SHIM = (
    "import sys; from agentenv.cli.synth_command import synth_app; "
    "synth_app(sys.argv[1:], prog_name='agent-env synth')"
)


def _pin() -> None:
    if hasattr(os, "sched_setaffinity"):
        core = sorted(os.sched_getaffinity(0))[0]
        os.sched_setaffinity(0, {core})


def run(n: int, trials: str, out: Path) -> dict[str, Any]:
    """One synthesis in a pinned subprocess: its report, wall time and command."""
    args = ["tasks", str(DESK.relative_to(ROOT)), "-n", str(n), "--depth", "2..6"]
    args += ["--obfuscation", "0.5", "--distractors", "3", "--random-seed", "7"]
    args += ["--trials", trials, "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", SHIM, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=_pin,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"synthesis failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    report = json.loads((out / "report.json").read_text())
    command = "agent-env synth " + " ".join(shlex.quote(a) for a in args)
    return {"report": report, "elapsed": elapsed, "command": command}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 tasks instead of 500")
    options = parser.parse_args()
    n = 100 if options.quick else 500
    with tempfile.TemporaryDirectory() as tmp:
        base = run(n, "direct", Path(tmp) / "direct")
        full = run(n, "full", Path(tmp) / "full")
    print(f"support-desk, {n} tasks, 1 core (pinned), wall time of the whole command\n")
    rates = {}
    for label, result in (
        ("baseline (--trials direct)", base),
        ("all trials (--trials full)", full),
    ):
        report = result["report"]
        rate = report["accepted"] / result["elapsed"] * 60
        rates[label] = rate
        print(f"{label}")
        print(f"  command:          {result['command']}")
        print(
            f"  tasks:            {report['accepted']} verified of {report['candidates']} "
            f"candidates (acceptance rate {report['acceptance_rate'] * 100:.1f}%)"
        )
        dropped = ", ".join(f"{k} {v}" for k, v in report["dropped"].items())
        print(f"  dropped:          {dropped}")
        print(f"  elapsed:          {result['elapsed']:.1f} s")
        print(f"  tasks/min/core:   {rate:.0f}\n")
    full_rate = rates["all trials (--trials full)"]
    ratio = full_rate / rates["baseline (--trials direct)"]
    print(f"full trials run at {ratio:.2f}x the speed of the direct-only baseline")
    verdict = "meets" if full_rate >= GOAL else "MISSES"
    print(
        f"goal: >= {GOAL:.0f} verified tasks/min/core with all trials: {verdict} ({full_rate:.0f})"
    )


if __name__ == "__main__":
    main()
