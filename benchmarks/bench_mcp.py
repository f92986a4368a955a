"""MCP `tools/call` over Streamable HTTP: ours vs the bare low-level `mcp` Server.

    python benchmarks/bench_mcp.py                  # full run (a few minutes)
    python benchmarks/bench_mcp.py --quick          # fewer calls (under ~2 minutes)
    python benchmarks/bench_mcp.py --no-aged        # skip the "after 1M recorded calls" server
    python benchmarks/bench_mcp.py --profile DIR    # cProfile each server process into DIR
    python benchmarks/bench_mcp.py --quick --era modern   # the 2026-07-28 era (no handshake)

Servers, each in its own uvicorn process on a free loopback port:

- `bare`: the floor. `mcp.server.lowlevel.Server` behind the SDK's
  `StreamableHTTPSessionManager`, configured as we serve (stateless, JSON answers, the
  same loopback Host/Origin checks), one `read_note` tool that reads a record from a
  `State` and returns it as text plus `structuredContent`, as ours does.
- `ours`: `make_server(Gateway(env))`, the whole app as `agent-env serve` runs it (guard,
  body limit, routing, credentials, RBAC, clock, validation, transaction, trajectory).
- `sdk` (skip with `--no-sdk-path`): `ours` with the direct `tools/call` path off, every
  call through the SDK's stateless transport as before issue 12: what the adapter adds.
- `alone` (with `--alone`): our MCP endpoint alone in a plain Starlette app, no REST
  routes or middleware around it: what the rest of the app costs an MCP call.
- `aged` (skip with `--no-aged`): `ours`, after 1,000,000 in-process `Gateway.call`s on the
  default instance before it serves, to show whether the tail grows with what was recorded.

The client is `_loadgen.py` (raw keep-alive HTTP/1.1; the MCP SDK client costs more CPU
per call than either server): per connection an `initialize` + `notifications/initialized`
handshake (a session id, if the server gives one, is sent back), then `tools/call`s with
the negotiated `mcp-protocol-version`. Sequential (1 client) and 32 clients, the servers
interleaved round by round; medians of the rounds for calls/s, p50/p99 and server CPU per
call (`_cpu.py`), and the ratio ours/bare. `aged` is compared with `ours` (p99 at 32
clients, target within 1.5x).
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
from dataclasses import replace
from typing import Any

from _cpu import cpu_per_call_us, process_cpu_seconds
from _loadgen import Answer, Connection, LoadResult, load
from _served import ServerProcess

from agentenv import Environment, Gateway, Principal, ToolContext, tool
from agentenv.env.tool import Tool
from agentenv.spec import parse_environment_spec

RECORDS = 100
AGED_CALLS = 1_000_000
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@tool(kind="read")
def read_note(ctx: ToolContext, note_id: str) -> dict[str, Any]:
    """Read one note.

    Args:
        note_id: The note's id.
    """
    return ctx.state.require("notes", note_id)


def build_env() -> Environment:
    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "bench",
            "state": {"notes": {"key": "id"}},
            "seed": {
                "notes": [
                    {"id": f"n{i}", "text": f"note {i}", "tags": ["a", "b"]} for i in range(RECORDS)
                ]
            },
        }
    )
    return replace(Environment.from_spec(spec), tools={"read_note": Tool.from_function(read_note)})


# -- the servers ------------------------------------------------------------------------


def bare_app() -> Any:
    """The floor: the SDK's low-level Server and session manager, nothing of ours."""
    import contextlib
    from datetime import UTC, datetime

    import mcp.types as types
    from mcp.server import Server
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    state = build_env().new_state()
    ctx = ToolContext(state, datetime.now(UTC), Principal("default"))
    tool_list = types.ListToolsResult(
        tools=[
            types.Tool(
                name="read_note",
                description="Read one note.",
                input_schema=Tool.from_function(read_note).input_schema,
            )
        ]
    )

    async def list_tools(ctx_: Any, params: Any) -> types.ListToolsResult:
        return tool_list

    async def call_tool(ctx_: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        value = read_note(ctx, **(params.arguments or {}))
        return types.CallToolResult(
            content=[types.TextContent(text=json.dumps(value))], structured_content=value
        )

    server: Server[Any] = Server("bare", on_list_tools=list_tools, on_call_tool=call_tool)
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1", "127.0.0.1:*", "localhost", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*"],
    )
    manager = StreamableHTTPSessionManager(
        app=server, stateless=True, json_response=True, security_settings=security
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with manager.run():
            yield

    return Starlette(
        routes=[Route("/mcp", endpoint=StreamableHTTPASGIApp(manager))], lifespan=lifespan
    )


def ours_server(aged: int, port: int, *, direct: bool = True) -> Any:
    from agentenv.serve import make_server
    from agentenv.serve.mcp import McpHttp

    gateway = Gateway(build_env())
    if aged:

        async def record() -> None:
            principal = Principal(gateway.env.default_role)
            for i in range(aged):
                await gateway.call(principal, "read_note", {"note_id": f"n{i % RECORDS}"})

        asyncio.run(record())
    # As `agent-env serve` runs it (trusted local mode, access log off).
    server = make_server(gateway, port=port, log_level="error")
    if not direct:  # every tools/call through the SDK's stateless transport, as before
        for route in server.config.app.router.routes:
            if isinstance(getattr(route, "endpoint", None), McpHttp):
                route.endpoint.direct.enabled = False
    return server


def alone_app() -> Any:
    """Our MCP endpoint alone in a plain Starlette app: no REST routes before it, no
    RequestGuard or BodyLimit around it (what the rest of the app costs an MCP call)."""
    import contextlib

    from starlette.applications import Starlette

    from agentenv.gateway.auth import Authenticator
    from agentenv.serve.mcp import McpAdapter

    gateway = Gateway(build_env())
    mcp_http = McpAdapter(gateway, Authenticator(default_role=gateway.env.default_role)).http()

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with mcp_http.lifespan(app):
            yield

    return Starlette(routes=mcp_http.routes(), lifespan=lifespan)


def serve(which: str, port: int, aged: int, profile: str | None) -> None:
    import uvicorn

    if which in ("bare", "alone"):
        app = bare_app() if which == "bare" else alone_app()
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="error", access_log=False
        )
        server = uvicorn.Server(config)
    else:
        server = ours_server(aged, port, direct=which == "ours")
    # A connection waits while the others do their handshakes on a busy machine.
    server.config.timeout_keep_alive = 120
    if profile is None:
        server.run()
        return
    import cProfile
    import signal

    profiler = cProfile.Profile()

    def stop(*_: object) -> None:
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    profiler.enable()
    try:
        server.run()
    finally:
        profiler.disable()
        profiler.dump_stats(os.path.join(profile, f"{which}.prof"))


def Served(which: str, *, aged: int = 0, profile: str | None = None) -> ServerProcess:
    """A server process on a free port."""
    args = [__file__, "--serve", which, "--aged-calls", str(aged)]
    if profile:
        args += ["--profile", profile]
    return ServerProcess(which, args, stdout=subprocess.DEVNULL, stderr=sys.stderr)


# -- the client -------------------------------------------------------------------------


def rpc(method: str, params: dict[str, Any], request_id: int | None = None) -> bytes:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not None:
        message["id"] = request_id
    return json.dumps(message).encode()


def answer_json(answer: Answer) -> dict[str, Any]:
    """The JSON-RPC message of an answer, a JSON body or the first SSE `data:` event."""
    body = answer.body
    if answer.headers.get("content-type", "").startswith("text/event-stream"):
        for line in body.split(b"\n"):
            if line.startswith(b"data:"):
                return json.loads(line[5:])
        raise ValueError(f"no data event in {body[:200]!r}")
    return json.loads(body)


INIT = rpc(
    "initialize",
    {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "loadgen", "version": "1"},
    },
    0,
)


async def handshake(conn: Connection) -> None:
    """initialize, keep the session id and protocol version, notifications/initialized."""
    answer = await conn.request("POST", "/mcp", INIT, HEADERS)
    if answer.status != 200:
        raise RuntimeError(f"initialize failed: {answer.status} {answer.body[:300]!r}")
    result = answer_json(answer)["result"]
    if "mcp-session-id" in answer.headers:
        conn.headers["mcp-session-id"] = answer.headers["mcp-session-id"]
    conn.headers["mcp-protocol-version"] = result["protocolVersion"]
    done = await conn.request("POST", "/mcp", rpc("notifications/initialized", {}), HEADERS)
    if done.status not in (200, 202):
        raise RuntimeError(f"notifications/initialized failed: {done.status}")


CALLS = [
    rpc("tools/call", {"name": "read_note", "arguments": {"note_id": f"n{i % RECORDS}"}}, i + 1)
    for i in range(RECORDS)
]
# The 2026-07-28 era: no handshake; every request names its version and method in headers
# and carries the client's envelope in `_meta`, as the SDK client writes it.
MODERN = "2026-07-28"
MODERN_HEADERS = {
    **HEADERS,
    "mcp-protocol-version": MODERN,
    "mcp-method": "tools/call",
    "mcp-name": "read_note",
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "loadgen", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
MODERN_CALLS = [
    rpc(
        "tools/call",
        {"name": "read_note", "arguments": {"note_id": f"n{i}"}, "_meta": MODERN_META},
        i + 1,
    )
    for i in range(RECORDS)
]


async def call(conn: Connection, i: int) -> Answer:
    return await conn.request("POST", "/mcp", CALLS[i % RECORDS], HEADERS)


async def modern_call(conn: Connection, i: int) -> Answer:
    return await conn.request("POST", "/mcp", MODERN_CALLS[i % RECORDS], MODERN_HEADERS)


def ok(answer: Answer) -> bool:
    if answer.status != 200:
        return False
    message = answer_json(answer)
    return "result" in message and not message["result"].get("isError")


def measure(served: Served, clients: int, calls: int, era: str) -> tuple[LoadResult, float | None]:
    before = process_cpu_seconds(served.pid)
    if era == "modern":
        run = load("127.0.0.1", served.port, modern_call, clients=clients, calls=calls, ok=ok)
        extra = 20  # warm-up calls a connection
    else:
        run = load(
            "127.0.0.1", served.port, call, clients=clients, calls=calls, setup=handshake, ok=ok
        )
        extra = 22  # the two handshake messages and 20 warm-up calls a connection
    result = asyncio.run(run)
    if result.errors:
        raise RuntimeError(f"{served.which}: {result.errors} calls failed")
    # CPU from before the connections opened: the warm-up is in it.
    return result, cpu_per_call_us(served.pid, before, calls + clients * extra)


def rss_mb(pid: int) -> float:
    """The process's resident memory, MB (NaN where /proc is absent)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-aged", action="store_true", help="skip the aged server")
    parser.add_argument("--profile", metavar="DIR", help="cProfile the server processes")
    parser.add_argument("--rounds", type=int)
    parser.add_argument(
        "--era",
        choices=["legacy", "modern"],
        default="legacy",
        help="legacy: initialize + 2025-11-25 (the default); modern: 2026-07-28, no handshake",
    )
    parser.add_argument("--no-sdk-path", action="store_true", help="skip the sdk-path server")
    parser.add_argument(
        "--alone", action="store_true", help="add our MCP endpoint alone in a Starlette app"
    )
    parser.add_argument("--serve", choices=["bare", "ours", "sdk", "alone"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--aged-calls", type=int, default=AGED_CALLS, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve:
        serve(opts.serve, opts.port, opts.aged_calls, opts.profile)
        return
    seq_calls, par_calls, rounds = (1000, 4000, 3) if opts.quick else (3000, 12000, 5)
    rounds = opts.rounds or rounds
    if opts.profile:
        os.makedirs(opts.profile, exist_ok=True)
    servers = [Served("bare", profile=opts.profile), Served("ours", aged=0, profile=opts.profile)]
    if not opts.no_sdk_path:
        servers.append(Served("sdk", profile=opts.profile))
    if opts.alone:
        servers.append(Served("alone", profile=opts.profile))
    if not opts.no_aged:
        servers.append(Served("ours", aged=opts.aged_calls))
        servers[-1].which = "aged"
    try:
        started = time.monotonic()
        for served in servers:  # nothing is measured while the aged server records
            served.wait_ready(600)
        if not opts.no_aged:
            waited = time.monotonic() - started
            print(f"(aged server: {opts.aged_calls:,} calls recorded, ready after {waited:.0f} s)")
        figures: dict[tuple[str, int], list[tuple[LoadResult, float | None]]] = {}
        for _ in range(rounds):  # interleaved: drift in machine load hits every server alike
            for clients, calls in ((1, seq_calls), (32, par_calls)):
                for served in servers:
                    figures.setdefault((served.which, clients), []).append(
                        measure(served, clients, calls, opts.era)
                    )
        rss = {served.which: rss_mb(served.pid) for served in servers}
    finally:
        for served in servers:
            served.close()
    print(f"protocol era: {opts.era}")
    report(figures, [s.which for s in servers], rounds)
    print("server RSS at the end: " + ", ".join(f"{k} {v:.0f} MB" for k, v in rss.items()))


def report(
    figures: dict[tuple[str, int], list[tuple[LoadResult, float | None]]],
    names: list[str],
    rounds: int,
) -> None:
    print(f"MCP tools/call over Streamable HTTP, median of {rounds} interleaved rounds")
    print(f"{'server':6} {'clients':>7} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU µs':>8}")
    summary: dict[tuple[str, int], dict[str, float]] = {}
    for clients in (1, 32):
        for name in names:
            runs = figures[(name, clients)]
            cpus = [c for _, c in runs if c is not None]
            row = {
                "rate": median([r.rate for r, _ in runs]),
                "p50": median([r.p50 for r, _ in runs]),
                "p99": median([r.p99 for r, _ in runs]),
                "cpu": median(cpus) if cpus else float("nan"),
            }
            summary[(name, clients)] = row
            print(
                f"{name:6} {clients:7} {row['rate']:8.0f} {row['p50']:8.2f} {row['p99']:8.2f}"
                f" {row['cpu']:8.0f}"
            )
    for clients in (1, 32):
        o, b = summary[("ours", clients)], summary[("bare", clients)]
        print(
            f"ours/bare, {clients:2} client(s): calls/s {o['rate'] / b['rate']:.2f}x"
            f" (goal >= 0.9), server CPU/call {o['cpu'] / b['cpu']:.2f}x,"
            f" p99 {o['p99'] / b['p99']:.2f}x"
        )
    if "sdk" in names:
        for clients in (1, 32):
            o, b = summary[("sdk", clients)], summary[("bare", clients)]
            print(
                f"sdk-path/bare, {clients:2} client(s): calls/s {o['rate'] / b['rate']:.2f}x,"
                f" server CPU/call {o['cpu'] / b['cpu']:.2f}x"
            )
    if "alone" in names:
        for clients in (1, 32):
            o, a = summary[("ours", clients)], summary[("alone", clients)]
            print(
                f"ours/alone, {clients:2} client(s): server CPU/call {o['cpu'] / a['cpu']:.2f}x"
                f" ({o['cpu'] - a['cpu']:.0f} µs/call for the REST app around /mcp)"
            )
    if "aged" in names:
        a, o = summary[("aged", 32)], summary[("ours", 32)]
        print(
            f"aged/fresh, 32 clients: p99 {a['p99'] / o['p99']:.2f}x (goal <= 1.5),"
            f" calls/s {a['rate'] / o['rate']:.2f}x"
        )


if __name__ == "__main__":
    main()
