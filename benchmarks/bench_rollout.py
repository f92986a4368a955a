"""Rollout figures on the support-desk environment, with a scripted agent making 20 tool
calls per episode (read the ticket, look up the customer and order, refund, reply, email,
wait for the answer, close). Each scenario runs in a fresh subprocess, so its peak memory
is its own.

    python benchmarks/bench_rollout.py            # full run (several minutes on 2 cores)
    python benchmarks/bench_rollout.py --quick    # smaller numbers, same shape

1. baseline: the same 20 calls on a fresh Gateway per episode, in a plain loop (no task
   runner, no store), against the local runner at concurrency 1: the runner's overhead;
2. 10,000 episodes at concurrency 256 into a run folder: episodes/s, peak memory, store size;
3. concurrency 1, 16, 256 and 4,096: throughput for each, and memory per concurrent
   episode ((peak at 4,096 - peak at 1) / 4,095);
4. Ray with 2 workers against the local runner on the same plan (when Ray is installed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
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

    env = Environment.load(DESK)
    agent = Principal(role="agent", name="support")

    async def main() -> None:
        for _ in range(episodes):
            gateway = Gateway(env)
            client = ToolClient(agent, [Binding("desk", gateway)])
            for tool, args in CALLS:
                result = await client.call(tool, args)
                assert result.ok, result.text

    started = time.perf_counter()
    asyncio.run(main())
    elapsed = time.perf_counter() - started
    return {"episodes": episodes, "elapsed_s": elapsed, "peak_mb": peak_mb()}


def scenario_local(episodes: int, concurrency: int, tools: bool) -> dict[str, Any]:
    from agentenv.rollout import LocalRunner, PlanAgent, RolloutPlan, RolloutStore

    with tempfile.TemporaryDirectory() as tmp:
        plan = RolloutPlan.build(
            [bundle(Path(tmp))], [PlanAgent.of("scripted-20", ScriptedAgent)], repeats=episodes
        )
        base = peak_mb()
        started = time.perf_counter()
        summary = LocalRunner(
            plan, Path(tmp) / "run", concurrency=concurrency, record_tools=tools
        ).run_sync()
        elapsed = time.perf_counter() - started
        store = RolloutStore(Path(tmp) / "run")
        size = store.path.stat().st_size
        assert summary.passed == episodes, summary.to_json()
        return {
            "episodes": episodes,
            "concurrency": concurrency,
            "elapsed_s": elapsed,
            "peak_mb": peak_mb(),
            "base_mb": base,
            "store_mb": size / 2**20,
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
            result = scenario_local(int(rest[0]), int(rest[1]), rest[2] == "tools")
        else:
            result = scenario_ray(int(rest[0]), int(rest[1]))
        print(json.dumps(result))
        return

    quick = args.quick
    base_n = 300 if quick else 1000
    main_n = 2000 if quick else 10_000
    scale_n = 2000 if quick else 8192
    ray_n = 1000 if quick else 4000
    say(
        f"support-desk, scripted agent, {len(CALLS)} tool calls per episode, {os.cpu_count()} cores"
    )

    bare = run_scenario("bare", str(base_n))
    one = run_scenario("local", str(base_n), "1", "tools")
    say(f"\n1. runner overhead (sequential, same calls, {base_n:,} episodes)")
    say(f"   bare gateway loop        {rate(bare):8.1f} episodes/s")
    say(f"   local runner, conc. 1    {rate(one):8.1f} episodes/s")
    say(f"   ratio runner / bare      {rate(one) / rate(bare):8.2f}x")

    big = run_scenario("local", str(main_n), "256", "tools")
    say(f"\n2. {main_n:,} episodes, concurrency 256, into a run folder")
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

    say(f"\n3. concurrency scaling ({scale_n:,} episodes each)")
    results = {}
    for c in (1, 16, 256, 4096):
        results[c] = r = run_scenario("local", str(scale_n), str(c), "tools")
        say(
            f"   concurrency {c:5d}        {rate(r):8.1f} episodes/s  "
            f"{rate(r) / rate(results[1]):5.2f}x of conc. 1   peak {r['peak_mb']:6.0f} MB"
        )
    per = (results[4096]["peak_mb"] - results[1]["peak_mb"]) / 4095 * 1024
    say(f"   memory per concurrent episode  {per:6.1f} KB ((peak at 4,096 - peak at 1) / 4,095)")

    if args.no_ray:
        return
    try:
        import ray  # noqa: F401
    except ImportError:
        say("\n4. Ray: not installed (pip install 'agentenv-framework[ray]'), skipped")
        return
    local = run_scenario("local", str(ray_n), "64", "tools")
    on_ray = run_scenario("ray", str(ray_n), "2")
    say(f"\n4. Ray, 2 workers, vs local on the same plan ({ray_n:,} episodes)")
    say(f"   local runner, conc. 64   {rate(local):8.1f} episodes/s")
    say(
        f"   Ray, 2 workers           {rate(on_ray):8.1f} episodes/s  "
        f"(+{on_ray['startup_s']:.1f} s to start Ray)"
    )
    say(f"   ratio Ray / local        {rate(on_ray) / rate(local):8.2f}x")


def say(text: str) -> None:
    print(text, flush=True)


if __name__ == "__main__":
    main()
