"""WebSocket session calls (one frame per call) vs a bare FastAPI `POST /step`, at the server.

    python benchmarks/bench_ws.py            # full run (a few minutes)
    python benchmarks/bench_ws.py --quick    # fewer calls and rounds (under 2 minutes)

Issue 12's figure: our WebSocket session transport at >= 1.2x bare FastAPI over HTTP.
Each server runs in its own process under uvicorn (access log off) on a free loopback port:

- **bare**: one FastAPI route `POST /step` that parses the body with the `StepRequest`
  model, calls the same tool function on a State and answers the same JSON shape; nothing
  of ours around it (as in bench_rest.py), driven by `_loadgen` (raw keep-alive HTTP/1.1);
- **ws**: `make_server` over a Gateway (handshake guard, auth, RBAC, clock, validation,
  transaction, trajectory record), a `step` frame per call on `/ws`, driven by the raw
  WebSocket client below (one connection per session, each waiting for its answer);
- **step**: the same server as `ws`, over `POST /step` with `_loadgen`, for reference.

Sequential (1 session) and 32 concurrent sessions, in interleaved rounds (bare, ws, step,
bare, ...); each figure is the median over rounds, printed beside bare's as a ratio, with
p50/p99 and the server's CPU per call read from /proc (`_cpu`).

The WebSocket client writes frames on a socket: a masked text frame per call with an
all-zero masking key (legal framing; RFC 6455 wants an unpredictable key to protect
proxies from browser scripts, which a loopback benchmark has none of), so it spends no
CPU masking, and it parses only the frame header of each answer; like `_loadgen`, it
costs the client far less CPU per call than the servers spend.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import statistics
import time
from typing import Any

from _cpu import process_cpu_seconds
from _loadgen import Connection, LoadResult, load
from _notes_env import bare_app, build_env
from _served import ServerProcess

from agentenv import Gateway

HOST = "127.0.0.1"
ARGUMENTS = {"note_id": "n7"}
STEP_BODY = json.dumps({"action": "call_tool", "tool_name": "read_note", "arguments": ARGUMENTS})
WS_FRAME = json.dumps(
    {
        "type": "step",
        "data": {"type": "call_tool", "tool_name": "read_note", "arguments": ARGUMENTS},
    }
).encode()
HEADERS = {"content-type": "application/json"}


# -- the servers ------------------------------------------------------------------------


def serve(which: str, port: int) -> None:
    import uvicorn

    if which == "bare":
        config = uvicorn.Config(
            bare_app(), host=HOST, port=port, log_level="error", access_log=False
        )
        uvicorn.Server(config).run()
        return
    from agentenv.serve import make_server

    make_server(Gateway(build_env()), host=HOST, port=port, log_level="error").run()


def Served(which: str) -> ServerProcess:
    """One server in its own process, on a free loopback port."""
    return ServerProcess(which, [__file__, "--serve", which])


# -- a raw WebSocket client -------------------------------------------------------------


class WsConnection:
    """One WebSocket session: a text frame out, the answer frame in, one at a time."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, host: str, port: int, path: str = "/ws") -> WsConnection:
        """Connect and do the opening handshake."""
        reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n"
            ).encode()
        )
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError(f"the handshake was refused: {head[:200]!r}")
        return cls(reader, writer)

    async def call(self, payload: bytes) -> bytes:
        """Send one text frame and return the payload of the next data frame."""
        size = len(payload)
        if size < 126:
            header = bytes((0x81, 0x80 | size))
        elif size < 1 << 16:
            header = bytes((0x81, 0x80 | 126)) + size.to_bytes(2, "big")
        else:
            header = bytes((0x81, 0x80 | 127)) + size.to_bytes(8, "big")
        self._writer.write(header + b"\0\0\0\0" + payload)  # zero key: masking is a no-op
        while True:
            first, second = await self._reader.readexactly(2)
            length = second & 0x7F
            if length == 126:
                length = int.from_bytes(await self._reader.readexactly(2), "big")
            elif length == 127:
                length = int.from_bytes(await self._reader.readexactly(8), "big")
            data = await self._reader.readexactly(length)
            opcode = first & 0x0F
            if opcode == 0x9:  # the server's keepalive ping: answer it, read on
                self._writer.write(bytes((0x8A, 0x80 | len(data))) + b"\0\0\0\0" + data)
                continue
            if opcode == 0x8:
                raise ConnectionError(f"the server closed the session: {data[:200]!r}")
            return data

    async def close(self) -> None:
        """Send a close frame and drop the connection."""
        with contextlib.suppress(OSError):
            self._writer.write(bytes((0x88, 0x82)) + b"\0\0\0\0" + (1000).to_bytes(2, "big"))
            self._writer.close()
            await self._writer.wait_closed()


async def ws_load(port: int, *, clients: int, calls: int, warmup: int) -> LoadResult:
    """`calls` step frames over `clients` sessions, each waiting for its answer."""
    conns = [await WsConnection.open(HOST, port) for _ in range(clients)]
    try:
        for conn in conns:
            for _ in range(warmup):
                _check(await conn.call(WS_FRAME))
        latencies: list[float] = []
        errors = 0
        next_index = 0

        async def client(conn: WsConnection) -> None:
            nonlocal next_index, errors
            while next_index < calls:
                next_index += 1
                start = time.perf_counter()
                answer = await conn.call(WS_FRAME)
                latencies.append((time.perf_counter() - start) * 1000)
                if (
                    not answer.startswith(b'{"type": "observation"')
                    or b'"isError": false' not in answer
                ):
                    errors += 1

        start = time.perf_counter()
        await asyncio.gather(*(client(conn) for conn in conns))
        elapsed = time.perf_counter() - start
    finally:
        for conn in conns:
            await conn.close()
    return LoadResult(len(latencies), elapsed, latencies, errors)


def _check(answer: bytes) -> None:
    frame = json.loads(answer)
    if frame["type"] != "observation" or frame["data"]["observation"]["result"]["isError"]:
        raise RuntimeError(f"warm-up call failed: {answer[:300]!r}")


# -- the measurement --------------------------------------------------------------------


def _step_call(conn: Connection, i: int) -> Any:
    return conn.request("POST", "/step", STEP_BODY.encode(), HEADERS)


def measure(served: Served, how: str, clients: int, calls: int) -> tuple[LoadResult, float | None]:
    """One load run (`how`: "http" or "ws") and the server's CPU per call (µs)."""

    def run(n: int, warmup: int) -> LoadResult:
        if how == "ws":
            return asyncio.run(ws_load(served.port, clients=clients, calls=n, warmup=warmup))
        return asyncio.run(
            load(HOST, served.port, _step_call, clients=clients, calls=n, warmup=warmup)
        )

    run(min(calls, 200), 5)  # warm the code paths
    before = process_cpu_seconds(served.process.pid)
    result = run(calls, 0)
    after = process_cpu_seconds(served.process.pid)
    if result.errors:
        raise RuntimeError(f"{served.which} over {how}: {result.errors} calls failed")
    cpu = None if before is None or after is None else (after - before) / result.calls * 1e6
    return result, cpu


def _median(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and rounds")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 5, quick 3)")
    parser.add_argument("--serve", choices=["bare", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve:
        serve(opts.serve, opts.port)
        return

    rounds = opts.rounds or (3 if opts.quick else 5)
    seq_calls, par_calls = (1500, 4000) if opts.quick else (4000, 12000)
    print(f"WebSocket sessions vs bare FastAPI POST /step, {rounds} interleaved rounds")
    bare, ours = Served("bare"), Served("ours")
    runs = [("bare", bare, "http"), ("ws", ours, "ws"), ("step", ours, "http")]
    try:
        bare.wait_ready()
        ours.wait_ready()
        figures: dict[tuple[str, int], list[tuple[LoadResult, float | None]]] = {}
        for _ in range(rounds):  # interleaved: drift in machine load hits every side alike
            for name, served, how in runs:
                for clients, calls in ((1, seq_calls), (32, par_calls)):
                    figures.setdefault((name, clients), []).append(
                        measure(served, how, clients, calls)
                    )
    finally:
        bare.close()
        ours.close()
    report(figures, [name for name, _, _ in runs])


def report(
    figures: dict[tuple[str, int], list[tuple[LoadResult, float | None]]], names: list[str]
) -> None:
    """Print the medians, each beside bare's as a ratio (calls/s and server CPU)."""
    labels = {
        "bare": "bare FastAPI POST /step",
        "ws": "ours, WebSocket /ws",
        "step": "ours, POST /step",
    }

    def med(name: str, clients: int) -> dict[str, float | None]:
        runs = figures[(name, clients)]
        return {
            "rate": statistics.median(r.rate for r, _ in runs),
            "p50": statistics.median(r.p50 for r, _ in runs),
            "p99": statistics.median(r.p99 for r, _ in runs),
            "cpu": _median([c for _, c in runs]),
        }

    for clients in (1, 32):
        print(f"\n{'sequential (1 session)' if clients == 1 else f'{clients} sessions'}")
        base = med("bare", clients)
        for name in names:
            m = med(name, clients)
            ratio = m["rate"] / base["rate"]  # type: ignore[operator]
            cpu = "   n/a"
            if m["cpu"] is not None and base["cpu"] is not None:
                cpu = f"{m['cpu']:6.0f} µs/call (bare's / this: {base['cpu'] / m['cpu']:4.2f}x)"
            print(
                f"  {labels[name]:25s} {m['rate']:8.0f} calls/s ({ratio:4.2f}x bare)  "
                f"p50 {m['p50']:6.2f} ms  p99 {m['p99']:6.2f} ms  server CPU {cpu}"
            )
    print("\nWebSocket sessions vs bare FastAPI (goal >= 1.2x):")
    for clients in (1, 32):
        ws, base = med("ws", clients), med("bare", clients)
        by_cpu = ""
        if ws["cpu"] is not None and base["cpu"] is not None:
            by_cpu = f", by server CPU {base['cpu'] / ws['cpu']:.2f}x"
        rate = ws["rate"] / base["rate"]  # type: ignore[operator]
        p50 = base["p50"] / ws["p50"]  # type: ignore[operator]
        label = "sequential" if clients == 1 else f"{clients} sessions"
        print(f"  {label:12s} calls/s {rate:.2f}x, by p50 latency {p50:.2f}x{by_cpu}")
    print(
        "  (on a loaded machine calls/s is the noisiest of the three: one stall in a round "
        "moves it; server CPU per call is what the server spent)"
    )


if __name__ == "__main__":
    main()
