"""MCP `tools/call` throughput over Streamable HTTP: ours vs a bare `mcp` SDK server.

    python benchmarks/bench_mcp.py            # full run
    python benchmarks/bench_mcp.py --quick    # fewer calls

Both servers serve one `echo(text)` tool, each in its own process on a free loopback port,
stateless with JSON answers; the same official SDK client calls both, interleaved, in the
same run. Ours goes through the whole gateway (RBAC, validation, transaction, trajectory).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time

import uvicorn
from _cpu import cpu_per_call_us, describe, process_cpu_seconds

from agentenv import Environment, Gateway, tool
from agentenv.env.tool import Tool
from agentenv.serve import create_app
from agentenv.spec import parse_environment_spec


@tool(kind="read")
def echo(text: str) -> str:
    """Echo the text back.

    Args:
        text: What to echo.
    """
    return text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve(which: str, port: int) -> None:
    if which == "bare":
        from mcp.server.mcpserver import MCPServer

        bare = MCPServer("bare-echo")
        bare.tool()(echo)
        bare.run(
            "streamable-http", host="127.0.0.1", port=port, stateless_http=True, json_response=True
        )
        return
    from dataclasses import replace

    spec = parse_environment_spec(
        {"apiVersion": "agentenv/v1", "kind": "Environment", "name": "echo"}
    )
    env = replace(Environment.from_spec(spec), tools={"echo": Tool.from_function(echo)})
    uvicorn.run(create_app(Gateway(env)), host="127.0.0.1", port=port, log_level="error")


class Served:
    """A server process on a free port, stopped on exit."""

    def __init__(self, which: str) -> None:
        self.which = which
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The server process's id."""
        assert self.process is not None
        return self.process.pid

    def __enter__(self) -> str:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", self.which, "--port", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return f"http://127.0.0.1:{self.port}/mcp"
            except OSError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"the {self.which} server did not start") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=10)


async def throughput(url: str, calls: int, pid: int) -> tuple[float, float | None]:
    """Calls/s over one client session, and the server's CPU microseconds per call."""
    from mcp import Client

    async with Client(url) as client:
        await client.list_tools()
        for _ in range(30):
            await client.call_tool("echo", {"text": "hello"})
        cpu = process_cpu_seconds(pid)
        start = time.perf_counter()
        for _ in range(calls):
            result = await client.call_tool("echo", {"text": "hello"})
            assert not result.is_error, result
        rate = calls / (time.perf_counter() - start)
        return rate, cpu_per_call_us(pid, cpu, calls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", choices=["bare", "ours"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve:
        serve(opts.serve, opts.port)
        return
    calls, rounds = (300, 3) if opts.quick else (1500, 5)
    bare: list[float] = []
    ours: list[float] = []
    bare_cpu: list[float | None] = []
    ours_cpu: list[float | None] = []
    bare_server, ours_server = Served("bare"), Served("ours")
    with bare_server as bare_url, ours_server as ours_url:
        for _ in range(rounds):  # interleaved, so drift in machine load hits both alike
            rate, cpu = asyncio.run(throughput(bare_url, calls, bare_server.pid))
            bare.append(rate)
            bare_cpu.append(cpu)
            rate, cpu = asyncio.run(throughput(ours_url, calls, ours_server.pid))
            ours.append(rate)
            ours_cpu.append(cpu)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"MCP tools/call over Streamable HTTP: {o:7.0f} calls/s{describe(ours_cpu)}")
    print(
        "  baseline, bare mcp SDK server (MCPServer, one echo tool): "
        f"{b:7.0f} calls/s{describe(bare_cpu)}"
    )
    print(f"  ratio ours/bare: {o / b:.2f}")


if __name__ == "__main__":
    main()
