"""`agent-env run` against `agent-env rollout` on the same tasks (issue 15: run is as fast as
rollout): both commands as a user starts them, interleaved rounds, each in a fresh process
and run folder. Prints the runner's episodes/s (what each command reports) and the whole
command's wall time, as ratios against `rollout` measured in the same run.

    python benchmarks/bench_run.py [--repeats 500] [--rounds 3] [--bundle PATH]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RATE = re.compile(r"episodes in [\d.]+ s \(([\d.]+)/s\)")

COMMANDS = {
    "rollout": ["rollout"],
    "run": ["run"],
    "run --no-states": ["run", "--no-states"],
}


def once(args: list[str], bundle: Path, repeats: int, out: Path) -> tuple[float, float]:
    """One command: (the runner's episodes/s as it reports them, the command's wall s)."""
    command = [sys.executable, "-c", "from agentenv.cli import main; main()", *args, str(bundle)]
    command += ["-n", str(repeats), "--no-progress", "-o", str(out)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    found = RATE.search(done.stdout)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stdout}\n{done.stderr}")
    return float(found.group(1)), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=500, help="-n of each command")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bundle", type=Path, default=ROOT / "examples/bundles/support-desk")
    options = parser.parse_args()
    rates: dict[str, list[float]] = {name: [] for name in COMMANDS}
    walls: dict[str, list[float]] = {name: [] for name in COMMANDS}
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(options.rounds):
            for name, args in COMMANDS.items():
                out = Path(scratch) / f"{name.replace(' ', '_')}-{round_}"
                rate, wall = once(args, options.bundle, options.repeats, out)
                rates[name].append(rate)
                walls[name].append(wall)
    base_rate = statistics.median(rates["rollout"])
    base_wall = statistics.median(walls["rollout"])
    print(f"{options.bundle.name}, -n {options.repeats}, {options.rounds} interleaved rounds")
    print(f"{'command':<18}{'runner ep/s':>12}{'vs rollout':>12}{'wall s':>9}{'vs rollout':>12}")
    for name in COMMANDS:
        rate, wall = statistics.median(rates[name]), statistics.median(walls[name])
        print(
            f"{name:<18}{rate:>12.0f}{rate / base_rate:>11.2f}x{wall:>9.2f}"
            f"{base_wall / wall:>11.2f}x"
        )


if __name__ == "__main__":
    main()
