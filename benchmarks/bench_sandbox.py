"""Sandboxes (issue 14): what one command costs in a sandbox, against `subprocess.run` of the
same command in the same run.

    python benchmarks/bench_sandbox.py            # 200 runs of each, interleaved
    python benchmarks/bench_sandbox.py --runs 50

Three commands: `true` (the bare cost of starting a process), `sh -c 'echo hi'` and
`python3 -c pass` (an interpreter start, what most tool calls are). For each: the median
wall time of `subprocess.run` with the same minimal environment (the baseline), of `Sandbox.exec` on `local` (rlimits, a new
session, output capture, a minimal environment) and on `bwrap` (the same inside
bubblewrap's namespaces), rounds interleaved so drifting load hits all alike.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import time

from agentenv.sandbox import BwrapProvider, LocalProvider, SandboxLimits
from agentenv.sandbox._process import base_env

COMMANDS = {
    "true": ["true"],
    "sh echo": ["sh", "-c", "echo hi"],
    "python3 -c pass": ["python3", "-c", "pass"],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    opts = parser.parse_args()
    load = os.getloadavg()
    print(
        f"at the start: load {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}, {os.cpu_count()} cores"
    )
    limits = SandboxLimits(timeout=30)
    boxes = {"local": LocalProvider().create(limits)}
    if BwrapProvider.unavailable() is None:
        boxes["bwrap"] = BwrapProvider().create(limits)
    else:
        print(f"bwrap skipped: {BwrapProvider.unavailable()}")
    loop = asyncio.new_event_loop()
    where = boxes["local"].workspace
    env = base_env(str(where), None)  # the sandboxes' own minimal environment, for fairness
    times: dict[tuple[str, str], list[float]] = {}
    try:
        for _ in range(opts.runs):
            for label, argv in COMMANDS.items():
                began = time.perf_counter()
                subprocess.run(argv, cwd=where, env=env, capture_output=True, check=True)
                times.setdefault((label, "subprocess.run"), []).append(time.perf_counter() - began)
                for name, box in boxes.items():
                    began = time.perf_counter()
                    result = loop.run_until_complete(box.exec(argv))
                    assert result.ok, result
                    times.setdefault((label, name), []).append(time.perf_counter() - began)
    finally:
        for box in boxes.values():
            box.destroy()
        loop.close()
    print(f"\nmedian of {opts.runs} runs, interleaved")
    print(f"{'command':18} {'subprocess.run':>15} {'local':>16} {'bwrap':>16}")
    for label in COMMANDS:
        base = statistics.median(times[(label, "subprocess.run")]) * 1e3
        cells = []
        for name in ("local", "bwrap"):
            if (label, name) in times:
                ms = statistics.median(times[(label, name)]) * 1e3
                cells.append(f"{ms:6.2f} ms {ms / base:4.1f}x")
            else:
                cells.append("-")
        print(f"{label:18} {base:12.2f} ms {cells[0]:>16} {cells[1]:>16}")
    load = os.getloadavg()
    print(f"\nat the end: load {load[0]:.2f} / {load[1]:.2f} / {load[2]:.2f}")


if __name__ == "__main__":
    main()
