"""REST `POST /step`: ours vs a bare FastAPI endpoint doing the same work, measured at the server.

    python benchmarks/bench_rest.py            # full run (a few minutes)
    python benchmarks/bench_rest.py --quick    # fewer calls and rounds (under 2 minutes)
    python benchmarks/bench_rest.py --prerecord 0   # skip the "after 1M recorded calls" server
    python benchmarks/bench_rest.py --no-freeze     # our servers without make_server's gc.freeze()

Last, in process: the ASGI apps alone (no uvicorn, no socket) beside `Gateway.call` alone,
and what a full garbage collection costs a process holding a gateway over `--gc-records`
seed records (default 100,000) before and after `make_server`'s `gc.freeze()`.

Each server runs in its own process under uvicorn with the same config (access log off),
on a free loopback port:

- **bare**: one FastAPI route that parses the body with the `StepRequest` model, calls the
  same tool function on a State and answers the same JSON shape; nothing of ours around it;
- **ours**: `make_server` over a Gateway (guard, auth, RBAC, clock, validation, transaction,
  trajectory record, `gc.freeze()` at start);
- **aged** (with `--prerecord N`, default 1,000,000): the same server after it made N
  in-process `gateway.call`s on the default instance before serving, so its trajectory
  holds N records: its p99 at 32 clients against the fresh server's is issue 12's
  "flat under load" figure (goal within 1.5x).

The client is `_loadgen` (raw keep-alive HTTP/1.1, about 30-60 µs of client CPU per call),
sequential (1 connection) and 32 connections, in interleaved rounds (bare, ours, aged,
bare, ...); each figure is the median over rounds, printed beside the bare one as a ratio,
with the server's CPU per call read from /proc (`_cpu`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

from _cpu import process_cpu_seconds
from _loadgen import Connection, LoadResult, load
from _notes_env import bare_app, build_env
from _served import ServerProcess

from agentenv import Gateway, Principal

HOST = "127.0.0.1"
CALL_BODY = json.dumps(
    {"action": "call_tool", "tool_name": "read_note", "arguments": {"note_id": "n7"}}
).encode()
HEADERS = {"content-type": "application/json"}


# -- the servers ------------------------------------------------------------------------


def prerecord(gateway: Gateway, calls: int) -> float:
    """`calls` in-process calls on the default instance (what a long-lived server has
    recorded); returns the seconds they took."""

    async def run() -> None:
        principal = Principal("agent")
        args = {"note_id": "n7"}
        for _ in range(calls):
            await gateway.call(principal, "read_note", args)

    start = time.perf_counter()
    asyncio.run(run())
    return time.perf_counter() - start


def serve(which: str, port: int, calls: int, freeze: bool) -> None:
    import uvicorn

    if which == "bare":
        config = uvicorn.Config(
            bare_app(),
            host=HOST,
            port=port,
            log_level="error",
            access_log=False,
            timeout_graceful_shutdown=5,
        )
        uvicorn.Server(config).run()
        return
    from agentenv.serve import make_server

    gateway = Gateway(build_env())
    server = make_server(gateway, host=HOST, port=port, log_level="error", freeze_gc=freeze)
    if calls:
        took = prerecord(gateway, calls)
        print(f"  (aged server: {calls:,} calls recorded in {took:.1f} s)", flush=True)
    server.run()


# -- in process: the ASGI apps alone, no uvicorn, no socket -------------------------------


def _scope() -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/step",
        "raw_path": b"/step",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(CALL_BODY)).encode()),
        ],
        "client": (HOST, 50000),
        "server": (HOST, 8000),
        "state": {},
    }


def asgi_us(which: str, calls: int) -> float:
    """µs per `/step` of one app's ASGI callable driven in process (a fresh app each time,
    so the trajectory is as long in every round)."""
    from agentenv.serve import create_app

    app = bare_app() if which == "bare" else create_app(Gateway(build_env()))
    message = {"type": "http.request", "body": CALL_BODY, "more_body": False}
    sent: list[Any] = []

    async def receive() -> Any:
        return message

    async def send(answer: Any) -> None:
        sent.append(answer)

    async def run() -> float:
        for _ in range(50):
            await app(_scope(), receive, send)
        sent.clear()
        start = time.perf_counter()
        for _ in range(calls):
            await app(_scope(), receive, send)
        elapsed = time.perf_counter() - start
        assert sent[0]["status"] == 200, sent
        return elapsed / calls * 1e6

    return asyncio.run(run())


def gateway_us(calls: int) -> float:
    """µs per in-process `Gateway.call` of the same tool (what a transport adds to)."""
    return prerecord(Gateway(build_env()), calls) / calls * 1e6


def in_process(rounds: int, calls: int) -> None:
    """Print the in-process figures: the apps alone, beside `Gateway.call` alone."""
    bare, ours, gate = [], [], []
    for _ in range(rounds):
        bare.append(asgi_us("bare", calls))
        ours.append(asgi_us("ours", calls))
        gate.append(gateway_us(calls))
    b, o, g = statistics.median(bare), statistics.median(ours), statistics.median(gate)
    print(f"\nin process (the ASGI app alone, no uvicorn, no socket), {rounds} rounds")
    print(f"  bare  {b:6.1f} µs/request")
    print(f"  ours  {o:6.1f} µs/request ({b / o:4.2f}x bare's rate)")
    print(f"  Gateway.call alone {g:6.1f} µs: the transport adds {o - g:5.1f} µs")


def gc_pause(records: int) -> None:
    """Print a full collection's time in this process, holding a gateway over `records`
    seed records, before and after `make_server`'s `gc.freeze()` (run in a fresh process:
    the freeze is process-wide)."""
    import gc

    from agentenv.serve import make_server

    def full_collection_ms() -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            gc.collect()
            times.append((time.perf_counter() - start) * 1000)
        return statistics.median(times)

    gateway = Gateway(build_env(records))
    before, tracked = full_collection_ms(), len(gc.get_objects())
    make_server(gateway, host=HOST, port=0)
    after, left = full_collection_ms(), len(gc.get_objects())
    print(
        f"\na full gc.collect() holding {records:,} seed records: {after:.3f} ms after "
        f"make_server's gc.freeze() vs {before:.1f} ms before (objects the collector walks: "
        f"{left:,} vs {tracked:,})"
    )


def Served(which: str, prerecorded: int = 0, freeze: bool = True) -> ServerProcess:
    """One server in its own process, on a free loopback port."""
    args = [__file__, "--serve", "bare" if which == "bare" else "ours"]
    args += ["--prerecord", str(prerecorded), *([] if freeze else ["--no-freeze"])]
    return ServerProcess(which, args)


def _call(conn: Connection, i: int) -> Any:
    return conn.request("POST", "/step", CALL_BODY, HEADERS)


def measure(served: Served, clients: int, calls: int) -> tuple[LoadResult, float | None]:
    """One load run against `served` and its server CPU per call (µs)."""
    asyncio.run(load(HOST, served.port, _call, clients=clients, calls=min(calls, 200), warmup=5))
    before = process_cpu_seconds(served.process.pid)
    result = asyncio.run(load(HOST, served.port, _call, clients=clients, calls=calls, warmup=0))
    after = process_cpu_seconds(served.process.pid)
    if result.errors:
        raise RuntimeError(f"{served.which}: {result.errors} calls failed")
    cpu = None if before is None or after is None else (after - before) / result.calls * 1e6
    return result, cpu


def rss_mb(pid: int) -> float | None:
    """Resident memory of a process in MB (None where /proc is absent)."""
    try:
        for line in open(f"/proc/{pid}/status").read().splitlines():  # noqa: SIM115
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 9, quick 5)")
    parser.add_argument(
        "--prerecord",
        type=int,
        default=1_000_000,
        help="calls the aged server records before serving (0: no aged server)",
    )
    parser.add_argument(
        "--no-freeze", action="store_true", help="our servers without make_server's gc.freeze()"
    )
    parser.add_argument(
        "--gc-records", type=int, default=100_000, help="seed records of the GC pause figure"
    )
    parser.add_argument("--serve", choices=["bare", "ours", "gc"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve == "gc":
        gc_pause(opts.gc_records)
        return
    if opts.serve:
        serve(opts.serve, opts.port, opts.prerecord, not opts.no_freeze)
        return

    rounds = opts.rounds or (5 if opts.quick else 9)
    seq_calls, par_calls = (800, 2400) if opts.quick else (2000, 6000)
    print(
        f"POST /step, {rounds} interleaved rounds, pid {os.getpid()} drives the load"
        + ("" if not opts.no_freeze else ", our servers without gc.freeze()")
    )
    freeze = not opts.no_freeze
    servers = [Served("bare"), Served("ours", freeze=freeze)]
    if opts.prerecord:
        servers.append(Served("aged", opts.prerecord, freeze=freeze))
    try:
        for served in servers:
            served.wait_ready(timeout=60 + opts.prerecord / 5000)
        figures: dict[tuple[str, int], list[tuple[LoadResult, float | None]]] = {}
        for _ in range(rounds):  # interleaved: drift in machine load hits every server alike
            for served in servers:
                for clients, calls in ((1, seq_calls), (32, par_calls)):
                    figures.setdefault((served.which, clients), []).append(
                        measure(served, clients, calls)
                    )
        rss = {s.which: rss_mb(s.process.pid) for s in servers}
    finally:
        for served in servers:
            served.close()
    report(figures, [s.which for s in servers], opts.prerecord, rss)
    in_process(rounds, 2000 if opts.quick else 10000)
    if opts.gc_records:
        subprocess.run(
            [sys.executable, __file__, "--serve", "gc", "--gc-records", str(opts.gc_records)],
            check=True,
        )


def report(
    figures: dict[tuple[str, int], list[tuple[LoadResult, float | None]]],
    names: list[str],
    prerecorded: int,
    rss: dict[str, float | None],
) -> None:
    """Print the medians, each beside bare's (and aged beside fresh ours) as a ratio."""

    def med(name: str, clients: int) -> dict[str, float | None]:
        runs = figures[(name, clients)]
        return {
            "rate": statistics.median(r.rate for r, _ in runs),
            "p50": statistics.median(r.p50 for r, _ in runs),
            "p99": statistics.median(r.p99 for r, _ in runs),
            "cpu": _median([c for _, c in runs]),
        }

    for clients in (1, 32):
        label = "sequential (1 client)" if clients == 1 else f"{clients} clients"
        print(f"\n{label}")
        bare = med("bare", clients)
        for name in names:
            m = med(name, clients)
            cpu = f"{m['cpu']:6.0f} µs/call" if m["cpu"] is not None else "   n/a"
            ratio = m["rate"] / bare["rate"]  # type: ignore[operator]
            print(
                f"  {name:5s} {m['rate']:8.0f} calls/s ({ratio:4.2f}x bare)  "
                f"p50 {m['p50']:6.2f} ms  p99 {m['p99']:6.2f} ms  server CPU {cpu}"
            )
    if "aged" in names:
        fresh, aged = med("ours", 32), med("aged", 32)
        ratio = aged["p99"] / fresh["p99"]  # type: ignore[operator]
        print(
            f"\nafter {prerecorded:,} recorded calls, p99 at 32 clients: {aged['p99']:.2f} ms vs "
            f"{fresh['p99']:.2f} ms fresh, {ratio:.2f}x (goal <= 1.5x)"
        )
        if rss["aged"] is not None and rss["ours"] is not None:
            print(f"  server RSS: aged {rss['aged']:.0f} MB, fresh {rss['ours']:.0f} MB")


if __name__ == "__main__":
    main()
