"""Gateway and REST figures, each printed beside a baseline measured in the same run.

    python benchmarks/bench_gateway.py            # full run (about a minute)
    python benchmarks/bench_gateway.py --quick    # fewer repetitions

1. in-process `Gateway.call` on a read tool (RBAC, clock, validation, transaction,
   trajectory record all on) vs calling the tool function directly;
2. `POST /step` throughput vs a bare FastAPI endpoint doing the same work (validate the
   body, call the same function, return the result), same httpx client, same uvicorn;
3. forking a fresh instance from a seeded snapshot of 10,000 records vs deep-copying them.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import socket
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import uvicorn
from _cpu import cpu_per_call_us, describe, process_cpu_seconds
from fastapi import FastAPI, Request
from starlette.responses import Response

from agentenv import Environment, Gateway, Principal, ToolContext, tool
from agentenv.serve import create_app
from agentenv.spec import StepRequest, parse_environment_spec


@tool(kind="read")
def read_note(ctx: ToolContext, note_id: str) -> dict[str, Any]:
    """Read one note.

    Args:
        note_id: The note's id.
    """
    return ctx.state.require("notes", note_id)


CALL_BODY = {"action": "call_tool", "tool_name": "read_note", "arguments": {"note_id": "n7"}}


def build_env(records: int) -> Environment:
    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "bench",
            "roles": [{"name": "agent"}],
            "state": {"notes": {"key": "id"}},
            "seed": {
                "notes": [
                    {"id": f"n{i}", "text": f"note {i}", "tags": ["a", "b"]} for i in range(records)
                ]
            },
            "clock": {"start": "2026-03-02T09:00:00Z"},
        }
    )
    env = Environment.from_spec(spec)
    from agentenv.env.tool import Tool

    tools = {"read_note": Tool.from_function(read_note)}
    from dataclasses import replace

    return replace(env, tools=tools)


def best_of(fn: Any, repeats: int) -> float:
    return min(fn() for _ in range(repeats))


def bench_call(n: int, repeats: int) -> tuple[float, float]:
    env = build_env(100)
    gateway = Gateway(env)
    principal = Principal("agent")
    state = gateway.instance().state
    ctx = ToolContext(state, datetime.now(UTC), principal)

    def direct() -> float:
        start = time.perf_counter()
        for _ in range(n):
            read_note(ctx, note_id="n7")
        return (time.perf_counter() - start) / n

    async def via_gateway_loop() -> float:
        inst = gateway.create_instance()  # a fresh trajectory per repetition
        start = time.perf_counter()
        for _ in range(n):
            await gateway.call(principal, "read_note", {"note_id": "n7"}, instance=inst.id)
        elapsed = (time.perf_counter() - start) / n
        gateway.drop_instance(inst.id)
        return elapsed

    def via_gateway() -> float:
        return asyncio.run(via_gateway_loop())

    return best_of(direct, repeats), best_of(via_gateway, repeats)


def bare_app(env: Environment) -> FastAPI:
    """The same work as /step with nothing of ours around it: parse, validate, call, answer."""
    app = FastAPI()
    state = env.new_state()
    ctx = ToolContext(state, datetime.now(UTC), Principal("agent"))

    @app.post("/step")
    async def step(request: Request) -> Response:
        body = StepRequest.model_validate(json.loads(await request.body()))
        value = read_note(ctx, **body.arguments)
        text = json.dumps(value)
        return Response(
            json.dumps(
                {
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                    "structuredContent": value,
                }
            ),
            media_type="application/json",
        )

    return app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """One of the two apps served by uvicorn in its own process (so that the client and the
    server do not share a GIL), on a free loopback port."""

    def __init__(self, which: str) -> None:
        self.port = free_port()
        self.which = which
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The server process's id."""
        assert self.process is not None
        return self.process.pid

    def __enter__(self) -> str:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", self.which, "--port", str(self.port)]
        )
        url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.post(url + "/step", json=CALL_BODY, timeout=1)
                return url
            except httpx.TransportError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"the {self.which} server did not start") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=10)


def serve(which: str, port: int) -> None:
    env = build_env(100)
    app = bare_app(env) if which == "bare" else create_app(Gateway(env))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


def bench_step(requests: int, repeats: int) -> tuple[float, float, str, str]:
    """Median req/s of the bare app and ours, and each server's CPU per call."""
    body = CALL_BODY

    def throughput(url: str, pid: int) -> tuple[float, float | None]:
        with httpx.Client(base_url=url) as client:
            for _ in range(50):  # warm up the connection and the code paths
                client.post("/step", json=body)
            cpu = process_cpu_seconds(pid)
            start = time.perf_counter()
            for _ in range(requests):
                response = client.post("/step", json=body)
                assert response.status_code == 200, response.text
            rate = requests / (time.perf_counter() - start)
            return rate, cpu_per_call_us(pid, cpu, requests)

    bare_server, ours_server = Served("bare"), Served("ours")
    with bare_server as bare_url, ours_server as ours_url:
        bare, ours, bare_cpu, ours_cpu = [], [], [], []
        for _ in range(repeats):  # interleave, so drift in machine load hits both alike
            rate, cpu = throughput(bare_url, bare_server.pid)
            bare.append(rate)
            bare_cpu.append(cpu)
            rate, cpu = throughput(ours_url, ours_server.pid)
            ours.append(rate)
            ours_cpu.append(cpu)
    return (
        statistics.median(bare),
        statistics.median(ours),
        describe(bare_cpu),
        describe(ours_cpu),
    )


def bench_fork(records: int, repeats: int) -> tuple[float, float]:
    env = build_env(records)
    gateway = Gateway(env)
    rows = env.seed.to_dict()

    def deepcopy_rows() -> float:
        start = time.perf_counter()
        copy.deepcopy(rows)
        return time.perf_counter() - start

    def fork() -> float:
        start = time.perf_counter()
        inst = gateway.create_instance()
        elapsed = time.perf_counter() - start
        gateway.drop_instance(inst.id)
        return elapsed

    return best_of(deepcopy_rows, max(3, repeats // 10)), best_of(fork, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--serve", choices=["bare", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve:
        serve(opts.serve, opts.port)
        return
    calls, repeats, requests = (5_000, 3, 500) if opts.quick else (50_000, 5, 3_000)

    direct, gateway_call = bench_call(calls, repeats)
    print(f"Gateway.call (read tool, everything on): {gateway_call * 1e6:7.2f} µs/call")
    print(f"  baseline, the tool function called directly: {direct * 1e6:7.2f} µs/call")
    print(
        f"  overhead of the gateway: {(gateway_call - direct) * 1e6:.2f} µs; ratio {gateway_call / direct:.1f}x"
    )

    bare, ours, bare_cpu, ours_cpu = bench_step(requests, repeats)
    print(f"POST /step: {ours:7.0f} req/s{ours_cpu}")
    print(f"  baseline, bare FastAPI endpoint doing the same work: {bare:7.0f} req/s{bare_cpu}")
    print(f"  ratio ours/bare: {ours / bare:.2f}")

    deep, fork = bench_fork(10_000, 200 if not opts.quick else 50)
    print(f"fork a fresh instance from a 10,000-record snapshot: {fork * 1e3:.3f} ms")
    print(
        f"  baseline, deepcopy of the same records: {deep * 1e3:.1f} ms; ratio {deep / fork:.0f}x faster"
    )


if __name__ == "__main__":
    main()
