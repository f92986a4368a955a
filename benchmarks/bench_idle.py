"""Idle CPU of a served gateway with many live instances, against one with a single instance.

    python benchmarks/bench_idle.py            # 3 rounds of 10 s (about 1 minute)
    python benchmarks/bench_idle.py --quick    # 2 rounds of 5 s (about 30 s)
    python benchmarks/bench_idle.py --instances 20000 --rounds 5 --window 10

Three uvicorn servers (`make_server`, the app's lifespan ticker at its default 0.25 s) run
at once, each in its own process on a free loopback port, and nobody calls them:

- **base**: a gateway with its one default instance;
- **crowd**: the same environment with N live instances (default 10,000) created in the
  server process before serving, every one on an armed wall clock (rate 1), 1% of them
  with a time trigger due in the year 2100, the rest with no trigger;
- **sweep**: the crowd again, with the old ticker: every 0.25 s it visited every armed
  instance (`Ticker.sweep`), which is what issue 12 measured at 4% of a core.

Each round reads every server's CPU time from /proc (`schedstat`, to the nanosecond; `_cpu`
where that is missing) over the same window, so the
three share whatever else the machine does; a figure is the median over rounds, in ms of
CPU per second of wall time (10 ms/s is 1% of a core), printed beside base's as a ratio.
The goal: crowd / base near 1 (idle CPU does not grow with live instances).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from datetime import UTC, datetime

from _cpu import process_cpu_seconds

from agentenv import SYSTEM, Environment, Gateway, ToolContext, tool
from agentenv.env.tool import Tool
from agentenv.spec.environment import ClockSpec
from agentenv.spec.triggers import TriggerRegistration
from agentenv.state import State

HOST = "127.0.0.1"
T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


@tool
def bump(ctx: ToolContext, name: str) -> int:
    """Count a firing."""
    record = ctx.state.get("counters", name)
    count = (record["count"] if record else 0) + 1
    ctx.state.put("counters", {"id": name, "count": count})
    return count


def build(instances: int) -> Gateway:
    """A gateway with `instances` live ones on wall clocks, 1% with a far-future trigger."""
    env = Environment(
        name="idle",
        tools={"bump": Tool.from_function(bump)},
        seed=State.from_records({"counters": [{"id": "seed", "count": 0}]}).snapshot(),
        clock=ClockSpec(start=T0, mode="wall", rate=1.0),
    )
    gw = Gateway(env)
    far = TriggerRegistration.model_validate(
        {
            "triggers": [
                {
                    "id": "far",
                    "when": {"type": "time", "at": "2100-01-01T00:00:00Z"},
                    "actions": [{"type": "tool", "tool": "bump", "args": {"name": "far"}}],
                }
            ]
        }
    )

    async def fill() -> None:
        for i in range(1, instances):
            gw.create_instance(f"i{i}")
            if i % 100 == 0:
                await gw.register_triggers(SYSTEM, far, instance=f"i{i}")

    asyncio.run(fill())
    return gw


def serve(instances: int, ticker: str, port: int) -> None:
    """The server process: build, then serve until killed."""
    from agentenv.serve.server import make_server

    gw = build(instances)
    if ticker == "sweep":
        firer_ticker = gw._firer.ticker
        live = gw._instances

        async def sweeping(period: float = 0.25) -> None:  # the ticker before issue 12
            while True:
                await asyncio.sleep(period)
                await firer_ticker.sweep(live)

        gw.run_ticker = sweeping  # type: ignore[method-assign]
    make_server(gw, host=HOST, port=port).run()


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds of all the process's threads, to the nanosecond (/proc/*/schedstat),
    else to the clock tick (`_cpu`): an idle server's figure is a few ms a second, and a
    10 ms tick would be most of it."""
    total, found = 0, False
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as stat:
                total += int(stat.read().split()[0])
                found = True
        except (OSError, ValueError, IndexError):
            continue
    return total / 1e9 if found else process_cpu_seconds(pid)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def wait_ready(port: int, proc: subprocess.Popen[bytes], limit: float = 300) -> None:
    deadline = time.monotonic() + limit
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server on port {port} exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"the server on port {port} did not start in {limit:g} s")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--instances", type=int, default=10_000)
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--window", type=float, help="seconds per round")
    parser.add_argument("--serve", nargs=3, metavar=("INSTANCES", "TICKER", "PORT"))
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1], int(args.serve[2]))
        return
    rounds = args.rounds or (2 if args.quick else 3)
    window = args.window or (5.0 if args.quick else 10.0)
    servers = {
        "base": (1, "heap"),
        "crowd": (args.instances, "heap"),
        "sweep": (args.instances, "sweep"),
    }
    procs: dict[str, tuple[subprocess.Popen[bytes], int]] = {}
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        for name, (instances, ticker) in servers.items():
            port = free_port()
            command = [sys.executable, __file__, "--serve", str(instances), ticker, str(port)]
            procs[name] = (subprocess.Popen(command, cwd=here), port)
        for proc, port in procs.values():
            wait_ready(port, proc)
        time.sleep(2.0)  # let start-up settle before measuring
        print(
            f"idle CPU, {rounds} rounds of {window:g} s; crowd and sweep have "
            f"{args.instances:,} live instances (wall clocks, 1% with a far-future trigger)"
        )
        samples: dict[str, list[float]] = {name: [] for name in servers}
        for r in range(rounds):
            start = {name: cpu_seconds(proc.pid) for name, (proc, _) in procs.items()}
            began = time.monotonic()
            time.sleep(window)
            elapsed = time.monotonic() - began
            line = []
            for name, (proc, _) in procs.items():
                before, after = start[name], cpu_seconds(proc.pid)
                if before is None or after is None:
                    raise SystemExit("no /proc here: this benchmark reads CPU time from it")
                samples[name].append((after - before) / elapsed * 1000)
                line.append(f"{name} {samples[name][-1]:.2f}")
            print(f"  round {r + 1}: " + ", ".join(line) + " ms CPU/s")
        median = {name: statistics.median(values) for name, values in samples.items()}
        base = median["base"]

        def ratio(value: float) -> str:
            return f"{value / base:.2f}x base" if base > 0 else "base read 0"

        print(f"base  (1 instance):          {base:6.2f} ms CPU/s")
        print(
            f"crowd (heap of due times):   {median['crowd']:6.2f} ms CPU/s  {ratio(median['crowd'])}"
        )
        print(
            f"sweep (old: every instance): {median['sweep']:6.2f} ms CPU/s  {ratio(median['sweep'])}"
        )
        per = (median["crowd"] - base) / max(1, args.instances - 1) * 1000
        print(
            f"crowd's extra idle CPU per live instance: {per:.3f} µs/s "
            f"(sweep's: {(median['sweep'] - base) / max(1, args.instances - 1) * 1000:+.3f})"
        )
        if median["crowd"] > 0:
            print(f"sweep / crowd: {median['sweep'] / median['crowd']:.1f}x")
    finally:
        for proc, _ in procs.values():
            proc.terminate()
        for proc, _ in procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
