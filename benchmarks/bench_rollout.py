"""Rollout figures on the support-desk environment, with a scripted agent making 20 tool
calls per episode (read the ticket, look up the customer and order, refund, reply, email,
wait for the answer, close). Each run is its own subprocess (so its memory and GC are its
own), and the runs of a comparison are interleaved (A, B, A, B, ...; the median of the
rounds), since the machine is shared.

    python benchmarks/bench_rollout.py --quick    # the ratios, about 2 minutes
    python benchmarks/bench_rollout.py            # also memory, store size, Ray (minutes)

1. runner overhead: the local runner at concurrency 1 / 64 / 1,024 against the same 20
   calls on a fresh Gateway per episode in a plain loop (no task runner, no store), as
   episodes per second of wall clock and per CPU-second of the process (the per-core
   figure: on a shared machine a process gets a varying share of a core, and CPU time
   counts only what it got); the share of time spent in the cyclic GC;
2. GC: the runner at concurrency 1,024 with `rollout.gctune` (environments frozen,
   thresholds raised) against the same runner with CPython's default GC;
3. processes: `ProcessRunner` with one worker per core against the local runner (one
   process), wall clock and CPU per episode (parent and workers together), start-up apart;
4. (full run only) 10,000 episodes at concurrency 256 into a run folder: throughput, peak
   memory, store size; memory per concurrent episode; Ray with 2 workers against local.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DESK = ROOT / "examples" / "envs" / "support-desk"
DANA = "dana.whitfield@example.com"

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("list_tickets", {"status": "open"}),
    ("read_ticket", {"ticket_id": "T-1042"}),
    ("get_customer", {"id": "C-003"}),
    ("search_customers", {"query": "dana"}),
    ("get_order", {"id": "O-5531"}),
    ("list_refunds", {"order_id": "O-5531"}),
    ("read_inbox", {"from_addr": DANA}),
    ("list_tickets", {"customer_id": "C-003"}),
    ("get_customer", {"id": "C-006"}),
    ("read_ticket", {"ticket_id": "T-1040"}),
    (
        "issue_refund",
        {
            "ticket_id": "T-1042",
            "customer_id": "C-003",
            "amount": 98.0,
            "reason": "charged twice for order O-5531",
            "order_id": "O-5531",
        },
    ),
    ("list_refunds", {"ticket_id": "T-1042"}),
    ("reply_to_customer", {"ticket_id": "T-1042", "message": "We refunded the $98.00."}),
    (
        "send_email",
        {
            "to": DANA,
            "subject": "Your refund",
            "body": "We refunded the second charge.",
            "ticket_id": "T-1042",
        },
    ),
    ("wait", {}),
    ("wait", {}),
    ("read_inbox", {"from_addr": DANA, "limit": 1}),
    ("get_order", {"id": "O-5531"}),
    ("close_ticket", {"ticket_id": "T-1042", "resolution": "Refunded the double charge."}),
    ("read_ticket", {"ticket_id": "T-1042"}),
]
assert len(CALLS) == 20

TASK = f"""
name: refund
description: Resolve T-1042 (a double charge) end to end.
steps:
  - {{id: env, type: deploy_env, env_id: desk, env: {DESK}}}
  - {{id: agent, type: deploy_agent, agent_name: support}}
  - {{id: p1, type: prompt_agent, prompt: "Resolve ticket T-1042."}}
  - id: check
    type: env_outcome_verifier
    checks:
      - {{collection: tickets, key: T-1042, field: status, equals: closed}}
      - {{collection: refunds, where: {{ticket_id: T-1042}}, count: 1}}
"""


class ScriptedAgent:
    """Makes the 20 calls of CALLS, then answers."""

    name = "scripted-20"

    async def run_turn(self, turn: Any) -> str:
        for tool, args in CALLS:
            result = await turn.tools.call(tool, args)
            if not result.ok:
                raise RuntimeError(f"{tool} failed: {result.text}")
        return "Refunded and closed."


def bundle(folder: Path) -> Path:
    tasks = folder / "bench" / "tasks"
    tasks.mkdir(parents=True, exist_ok=True)
    (tasks / "refund.yaml").write_text(textwrap.dedent(TASK))
    return folder / "bench"


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


# -- scenarios (each in its own process) ----------------------------------------------------


def scenario_bare(episodes: int) -> dict[str, Any]:
    from agentenv import Environment, Gateway
    from agentenv.env.tool import Principal
    from agentenv.gateway.client import Binding, ToolClient

    agent = Principal(role="agent", name="support")

    async def main() -> None:
        for _ in range(episodes):
            gateway = Gateway(env)
            client = ToolClient(agent, [Binding("desk", gateway)])
            for tool, args in CALLS:
                result = await client.call(tool, args)
                assert result.ok, result.text

    with Clock() as clock:  # the environment is loaded once, as the runner loads it
        env = Environment.load(DESK)
        asyncio.run(main())
    return {"episodes": episodes, **clock.figures(), "peak_mb": peak_mb()}


class Clock:
    """Wall clock, CPU time (this process and its finished children) and time in the GC."""

    def __enter__(self) -> Clock:
        self.gc_s = 0.0
        self._gc_t0 = 0.0
        gc.callbacks.append(self._gc)
        self.t0, self.c0 = time.perf_counter(), _cpu()
        return self

    def _gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_t0 = time.perf_counter()
        else:
            self.gc_s += time.perf_counter() - self._gc_t0

    def __exit__(self, *exc: object) -> None:
        self.elapsed_s, self.cpu_s = time.perf_counter() - self.t0, _cpu() - self.c0
        gc.callbacks.remove(self._gc)

    def figures(self) -> dict[str, float]:
        return {"elapsed_s": self.elapsed_s, "cpu_s": self.cpu_s, "gc_s": self.gc_s}


def _cpu() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def scenario_local(
    episodes: int, concurrency: int, tools: bool, gc_tuning: bool = True
) -> dict[str, Any]:
    from agentenv.rollout import LocalRunner, PlanAgent, RolloutPlan, RolloutStore

    with tempfile.TemporaryDirectory() as tmp:
        plan = RolloutPlan.build(
            [bundle(Path(tmp))], [PlanAgent.of("scripted-20", ScriptedAgent)], repeats=episodes
        )
        base = peak_mb()
        runner = LocalRunner(
            plan,
            Path(tmp) / "run",
            concurrency=concurrency,
            record_tools=tools,
            gc_tuning=gc_tuning,
        )
        with Clock() as clock:
            summary = runner.run_sync()
        store = RolloutStore(Path(tmp) / "run")
        size = store.path.stat().st_size
        assert summary.passed == episodes, summary.to_json()
        return {
            "episodes": episodes,
            "concurrency": concurrency,
            **clock.figures(),
            "peak_mb": peak_mb(),
            "base_mb": base,
            "store_mb": size / 2**20,
        }


def scenario_procs(episodes: int, workers: int, concurrency: int) -> dict[str, Any]:
    from agentenv.rollout import PlanAgent, ProcessRunner, RolloutPlan

    with tempfile.TemporaryDirectory() as tmp:
        plan = RolloutPlan.build(
            [bundle(Path(tmp))], [PlanAgent.of("scripted-20", ScriptedAgent)], repeats=episodes
        )
        runner = ProcessRunner(plan, Path(tmp) / "run", workers=workers, concurrency=concurrency)
        parent0 = resource.getrusage(resource.RUSAGE_SELF)
        with Clock() as clock:
            summary = runner.run()
        parent1 = resource.getrusage(resource.RUSAGE_SELF)
        assert summary.passed == episodes, summary.to_json()
        parent = (parent1.ru_utime + parent1.ru_stime) - (parent0.ru_utime + parent0.ru_stime)
        return {
            "episodes": episodes,
            **clock.figures(),
            "parent_cpu_s": parent,
            "startup_s": runner.ready_after_s or 0.0,
        }


def scenario_ray(episodes: int, workers: int) -> dict[str, Any]:
    import ray

    from agentenv.rollout import PlanAgent, RayRunner, RolloutPlan

    with tempfile.TemporaryDirectory() as tmp:
        plan = RolloutPlan.build(
            [bundle(Path(tmp))], [PlanAgent.of("scripted-20", ScriptedAgent)], repeats=episodes
        )
        started = time.perf_counter()
        ray.init(
            num_cpus=workers,
            include_dashboard=False,
            log_to_driver=False,
            _temp_dir=str(Path(tmp) / "ray"),
        )
        ready = time.perf_counter()
        summary = RayRunner(
            plan, Path(tmp) / "run", num_workers=workers, batch_size=64, concurrency=64
        ).run()
        done = time.perf_counter()
        ray.shutdown()
        assert summary.passed == episodes, summary.to_json()
        return {
            "episodes": episodes,
            "startup_s": ready - started,
            "elapsed_s": done - ready,
            "peak_mb": peak_mb(),
        }


def run_scenario(*args: str) -> dict[str, Any]:
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(Path(__file__).parent)}
    out = subprocess.run(
        [sys.executable, __file__, "--scenario", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"scenario {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def rate(r: dict[str, Any]) -> float:
    return r["episodes"] / r["elapsed_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--scenario", nargs="+")
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    if args.scenario:
        name, *rest = args.scenario
        if name == "bare":
            result = scenario_bare(int(rest[0]))
        elif name == "local":
            result = scenario_local(
                int(rest[0]), int(rest[1]), rest[2] == "tools", rest[3:] != ["default-gc"]
            )
        elif name == "procs":
            result = scenario_procs(int(rest[0]), int(rest[1]), int(rest[2]))
        else:
            result = scenario_ray(int(rest[0]), int(rest[1]))
        print(json.dumps(result))
        return

    quick = args.quick
    rounds = 3
    over_n = 700 if quick else 3000
    proc_n = 1000 if quick else 6000
    cores = os.cpu_count() or 1
    say(
        f"support-desk, scripted agent, {len(CALLS)} tool calls per episode, {cores} cores, "
        f"{rounds} rounds interleaved, medians"
    )

    say(f"\n1. runner overhead ({over_n:,} episodes per run)")
    runs = interleaved(
        rounds,
        {
            "bare": ("bare", str(over_n)),
            **{c: ("local", str(over_n), str(c), "tools") for c in (1, 64, 1024)},
        },
    )
    bare = runs["bare"]
    say(
        f"   bare gateway loop      {med(bare, rate):8.1f} ep/s   {med(bare, cpu_rate):8.1f} "
        f"ep/CPU-s   GC {med(bare, gc_share):4.0%}"
    )
    for c in (1, 64, 1024):
        r = runs[c]
        say(
            f"   runner, conc. {c:<5d}   {med(r, rate):8.1f} ep/s   {med(r, cpu_rate):8.1f} "
            f"ep/CPU-s   GC {med(r, gc_share):4.0%}   ratio {ratio(r, bare, rate):.2f}x wall, "
            f"{ratio(r, bare, cpu_rate):.2f}x per core (goal >= 0.8)"
        )

    say(f"\n2. GC while the runner runs (concurrency 1,024, {over_n:,} episodes)")
    gcs = interleaved(
        rounds,
        {
            "default": ("local", str(over_n), "1024", "tools", "default-gc"),
            "tuned": ("local", str(over_n), "1024", "tools"),
        },
    )
    for key, label in (("default", "CPython's default GC"), ("tuned", "frozen + thresholds")):
        r = gcs[key]
        say(
            f"   {label:22s} {med(r, rate):8.1f} ep/s   {med(r, cpu_rate):8.1f} ep/CPU-s   "
            f"GC {med(r, gc_share):4.0%}   peak {med(r, lambda x: x['peak_mb']):5.0f} MB"
        )
    say(
        f"   ratio tuned / default  {ratio(gcs['tuned'], gcs['default'], rate):.2f}x wall, "
        f"{ratio(gcs['tuned'], gcs['default'], cpu_rate):.2f}x per core"
    )

    say(f"\n3. processes: {cores} workers against one process ({proc_n:,} episodes per run)")
    procs = interleaved(
        rounds,
        {
            "local": ("local", str(proc_n), "64", "tools"),
            "procs": ("procs", str(proc_n), str(cores), "64"),
            "start": ("procs", str(cores), str(cores), "1"),  # start-up: one episode each
        },
    )
    one, many = procs["local"], procs["procs"]
    start_cpu = med(procs["start"], lambda x: x["cpu_s"])
    say(
        f"   local runner, conc. 64 {med(one, rate):8.1f} ep/s   CPU {med(one, cpu_per):6.0f} µs/ep"
    )
    say(
        f"   {cores} worker processes    {med(many, rate):8.1f} ep/s   CPU "
        f"{med(many, cpu_per):6.0f} µs/ep (parent {med(many, parent_per):4.0f})   start-up "
        f"{med(many, lambda x: x['startup_s']):.1f} s"
    )
    steady = med(many, lambda x: x["episodes"] / max(x["elapsed_s"] - x["startup_s"], 1e-9))
    say(
        f"   ratio, wall            {ratio(many, one, rate):.2f}x "
        f"({steady / med(one, rate):.2f}x without start-up; goal >= {0.8 * cores:.1f}x "
        "on a quiet machine)"
    )
    steady_cpu = med(many, lambda x: (x["cpu_s"] - start_cpu) / x["episodes"] * 1e6)
    eff = med(one, cpu_per) / steady_cpu
    say(
        f"   CPU per episode after start-up ({start_cpu:.1f} CPU-s for {cores} workers): "
        f"{steady_cpu:.0f} µs; one process / workers {eff:.2f}, so {cores} idle cores give "
        f"about {eff * cores:.2f}x; the parent alone could write "
        f"{1e6 / max(med(many, parent_per), 1e-9):,.0f} ep/s"
    )
    if quick:
        return
    full(args.no_ray)


def full(no_ray: bool) -> None:
    """The memory, store and Ray figures (the full run only)."""
    main_n, scale_n, ray_n = 10_000, 8192, 4000
    big = run_scenario("local", str(main_n), "256", "tools")
    say(f"\n4. {main_n:,} episodes, concurrency 256, into a run folder")
    say(f"   throughput               {rate(big):8.1f} episodes/s  ({big['elapsed_s']:.1f} s)")
    say(f"   peak memory (RSS)        {big['peak_mb']:8.0f} MB       (goal < 2048)")
    kb = big["store_mb"] * 1024 / main_n
    say(f"   store                    {big['store_mb']:8.1f} MB  ({kb:.1f} KB/episode)")
    lean = run_scenario("local", str(main_n), "256", "notools")
    kb = lean["store_mb"] * 1024 / main_n
    say(
        f"   without tool lists       {rate(lean):8.1f} episodes/s, store {kb:.1f} KB/episode, "
        f"peak {lean['peak_mb']:.0f} MB"
    )

    say(f"\n5. concurrency scaling ({scale_n:,} episodes each)")
    results = {}
    for c in (1, 16, 256, 4096):
        results[c] = r = run_scenario("local", str(scale_n), str(c), "tools")
        say(
            f"   concurrency {c:5d}        {rate(r):8.1f} episodes/s  "
            f"{rate(r) / rate(results[1]):5.2f}x of conc. 1   peak {r['peak_mb']:6.0f} MB"
        )
    per = (results[4096]["peak_mb"] - results[1]["peak_mb"]) / 4095 * 1024
    say(f"   memory per concurrent episode  {per:6.1f} KB ((peak at 4,096 - peak at 1) / 4,095)")

    if no_ray:
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        say("\n6. Ray: not installed (pip install 'agentenv-kit[ray]'), skipped")
        return
    local = run_scenario("local", str(ray_n), "64", "tools")
    on_ray = run_scenario("ray", str(ray_n), "2")
    say(f"\n6. Ray, 2 workers, vs local on the same plan ({ray_n:,} episodes)")
    say(f"   local runner, conc. 64   {rate(local):8.1f} episodes/s")
    say(
        f"   Ray, 2 workers           {rate(on_ray):8.1f} episodes/s  "
        f"(+{on_ray['startup_s']:.1f} s to start Ray)"
    )
    say(f"   ratio Ray / local        {rate(on_ray) / rate(local):8.2f}x")


def interleaved(rounds: int, scenarios: dict[Any, tuple[str, ...]]) -> dict[Any, list[dict]]:
    """Each scenario once per round, in turn (A, B, A, B, ...)."""
    out: dict[Any, list[dict[str, Any]]] = {key: [] for key in scenarios}
    for _ in range(rounds):
        for key, args in scenarios.items():
            out[key].append(run_scenario(*args))
    return out


def med(runs: list[dict[str, Any]], figure: Any) -> float:
    return statistics.median(figure(r) for r in runs)


def ratio(runs: list[dict[str, Any]], base: list[dict[str, Any]], figure: Any) -> float:
    return med(runs, figure) / med(base, figure)


def cpu_rate(r: dict[str, Any]) -> float:
    return r["episodes"] / r["cpu_s"]


def cpu_per(r: dict[str, Any]) -> float:
    return r["cpu_s"] / r["episodes"] * 1e6


def parent_per(r: dict[str, Any]) -> float:
    return r["parent_cpu_s"] / r["episodes"] * 1e6


def gc_share(r: dict[str, Any]) -> float:
    return r["gc_s"] / r["elapsed_s"]


def say(text: str) -> None:
    print(text, flush=True)


if __name__ == "__main__":
    main()
