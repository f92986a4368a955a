"""Episodes per second from the episode SDK against the rollout runner, on the same task
(support-desk/resolve-billing) and the same nine calls (the task's reference solution,
played as a fixed policy). Each run is its own subprocess; the runs are interleaved (A, B,
C, ... per round; the median of the rounds), since the machine is shared.

    python benchmarks/bench_sdk.py                    # 400 episodes, 64 at once, 3 rounds
    python benchmarks/bench_sdk.py --episodes 1000 --concurrency 128 --rounds 5

Scenarios:
- `rollout`: `LocalRunner` (the baseline: environments loaded once, steps checked once per
  task and seed, records written to a run folder), agent `oracle`;
- `sdk`: `EpisodeSpec.from_task(task).start()` per episode, the caller playing the calls
  (the process's shared `EnvironmentCache`, the default);
- `sdk+data`: the same, also taking what a trainer keeps (`episode.messages()`, which
  builds the record and its trajectory, and `episode.usage`);
- `sdk-nocache`: `cache=False`: every episode loads the environment document afresh (what
  the SDK did before issue 15).
Ratios are against `rollout` in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TASK = "support-desk/resolve-billing"
SCENARIOS = ("rollout", "sdk", "sdk+data", "sdk-nocache")


def scenario_sdk(episodes: int, concurrency: int, cache: bool, data: bool) -> dict[str, Any]:
    from agentenv import EpisodeSpec, Task

    task = Task.get(TASK)  # loaded once, as a trainer keeps it
    solution = task.spec.solution["main"]
    gate = asyncio.Semaphore(concurrency)

    async def one() -> bool:
        async with gate:
            episode = await EpisodeSpec.from_task(task, cache=None if cache else False).start()
            while (turn := await episode.next_turn()) is not None:
                async with turn.tools() as tools:
                    for call in solution.calls:
                        await tools.call(call.tool, call.args)
                await turn.end(
                    solution.response, usage={"prompt_tokens": 1, "completion_tokens": 1}
                )
            passed = (await episode.result()).passed
            if data:
                assert episode.messages() and episode.usage
            return passed

    async def main() -> list[bool]:
        return await asyncio.gather(*(one() for _ in range(episodes)))

    t0, c0 = time.perf_counter(), time.process_time()
    passed = asyncio.run(main())
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    assert all(passed), f"{passed.count(False)} of {episodes} episodes failed"
    return {"episodes": episodes, "elapsed_s": elapsed, "cpu_s": cpu}


def scenario_rollout(episodes: int, concurrency: int) -> dict[str, Any]:
    from agentenv.rollout import LocalRunner, RolloutPlan

    with tempfile.TemporaryDirectory() as tmp:
        plan = RolloutPlan.build([TASK], ["oracle"], repeats=episodes)
        runner = LocalRunner(plan, Path(tmp) / "run", concurrency=concurrency)
        t0, c0 = time.perf_counter(), time.process_time()
        summary = runner.run_sync()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        assert summary.passed == episodes, summary.to_json()
    return {"episodes": episodes, "elapsed_s": elapsed, "cpu_s": cpu}


def run_scenario(name: str, episodes: int, concurrency: int) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--scenario", name, str(episodes), str(concurrency)],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"scenario {name} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenario", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scenario:
        name, episodes, concurrency = args.scenario[0], *map(int, args.scenario[1:])
        if name == "rollout":
            result = scenario_rollout(episodes, concurrency)
        else:
            result = scenario_sdk(episodes, concurrency, name != "sdk-nocache", name == "sdk+data")
        print(json.dumps(result))
        return
    rates: dict[str, list[float]] = {name: [] for name in SCENARIOS}
    per_cpu: dict[str, list[float]] = {name: [] for name in SCENARIOS}
    for _ in range(args.rounds):
        for name in SCENARIOS:
            r = run_scenario(name, args.episodes, args.concurrency)
            rates[name].append(r["episodes"] / r["elapsed_s"])
            per_cpu[name].append(r["episodes"] / r["cpu_s"])
    base = statistics.median(rates["rollout"])
    base_cpu = statistics.median(per_cpu["rollout"])
    print(
        f"{TASK}: {args.episodes} episodes, {args.concurrency} at once, "
        f"median of {args.rounds} interleaved rounds; wall clock, then per CPU-second "
        "(the figure a shared machine disturbs least)"
    )
    for name in SCENARIOS:
        rate, cpu = statistics.median(rates[name]), statistics.median(per_cpu[name])
        each = ", ".join(f"{x:.0f}" for x in rates[name])
        print(
            f"  {name:12} {rate:8.1f} episodes/s {rate / base:5.2f}x rollout | "
            f"{cpu:8.1f} per CPU-s {cpu / base_cpu:5.2f}x   (wall: {each})"
        )


if __name__ == "__main__":
    main()
