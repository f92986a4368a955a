"""Process environments (issue 13): `tools/call` through our gateway to a server process,
against the official MCP client calling the same server directly; a fresh isolated
environment from the warm pool, against starting the server cold; memory per child.

    python benchmarks/bench_process.py --quick      # fewer calls and episodes (~2 minutes)
    python benchmarks/bench_process.py              # more rounds

The server is benchmarks/_mcp_child.py (the SDK's `MCPServer`, one read tool), over stdio
and over Streamable HTTP (a process of its own on a free loopback port).

1. in process: `Gateway.call` on a process environment whose server is the child (the
   whole gateway: RBAC, clock, validation, trajectory, the hop onto the children's loop,
   the SDK session) against `ClientSession.call_tool` on a session of our own to the same
   kind of child (stdio: another process of the same script; HTTP: the same process), one
   caller (the default gateway mode) and 8 concurrent ones (the gateway in `performance`
   mode, where calls on one instance may overlap, as they do on one SDK session); and
   `Gateway.call` made from a coroutine on the children's loop (`gateway on loop`), which
   is how `agent-env serve` calls it, with no hop between threads;
2. over the wire: the SDK client calling `agent-env serve`'s /mcp, which fronts the child,
   against the SDK client calling the child itself: what a remote agent sees (for a stdio
   child that adds an HTTP hop the direct client does not make);
3. an episode on a fresh isolated environment (`isolation: process`): create_instance +
   the first call + drop_instance, with the warm pool full (what a rollout sees while the
   pool keeps up) and back to back (when it does not: bounded by how fast processes start),
   against starting the server cold (the SDK: start, initialize, the first call, stop);
4. memory: RSS and PSS of a live child process; our process's RSS growth per live
   instance of a process environment (each holding a child of its own).

Rounds are interleaved (direct, gateway, direct, gateway, ...) and their medians printed
beside the load average, since the machine is shared. CPU per call, from /proc: `ours` is
this process (client and gateway, both threads), `server` the processes serving the call
(the child; for the wire rows `agent-env serve` and its child).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _cpu import process_cpu_seconds
from _procs import descendants, load_average, pss_kb, rss_kb, total_kb
from _served import HOST, ServerProcess
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

CHILD = Path(__file__).resolve().parent / "_mcp_child.py"
RECORDS = 100
WARMUP = 20
SERVE = "import sys; from agentenv.cli import main; sys.exit(main())"

Call = Callable[[int], Awaitable[bool]]


def args_for(i: int) -> dict[str, Any]:
    """The i-th call's arguments."""
    return {"note_id": f"n{i % RECORDS}"}


# -- what is measured -------------------------------------------------------------------


@dataclass
class Target:
    """One way of calling `read_note`: `call(i)` makes the i-th call (True when it
    answered without error); `pids()` the processes that serve it."""

    name: str
    call: Call
    pids: Callable[[], list[int]]
    on_children_loop: bool = False
    """Call from the children's loop, as `agent-env serve` does (no hop between threads)."""


@dataclass
class Figure:
    """One measured run: calls/s, latency (ms), CPU per call (µs) of us and the server."""

    rate: float
    p50: float
    p99: float
    ours_cpu: float | None
    server_cpu: float | None


def cpu_of(pids: list[int]) -> float | None:
    """CPU seconds of these processes together (None where /proc is absent)."""
    values = [process_cpu_seconds(p) for p in pids]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


async def measure(target: Target, calls: int, clients: int) -> Figure:
    """`calls` calls from `clients` concurrent callers, after a warm-up."""
    if target.on_children_loop:
        from agentenv.env.servers import loop

        if not loop.on_children_loop():
            return await loop.call(measure(target, calls, clients))
    for i in range(WARMUP):
        if not await target.call(i):
            raise RuntimeError(f"{target.name}: the warm-up call failed")
    pids = target.pids()
    ours_before, server_before = process_cpu_seconds(os.getpid()), cpu_of(pids)
    latencies: list[float] = []
    indexes = iter(range(calls))
    failed = 0

    async def caller() -> None:
        nonlocal failed
        for i in indexes:
            began = time.perf_counter()
            if not await target.call(i):
                failed += 1
            latencies.append(time.perf_counter() - began)

    began = time.perf_counter()
    await asyncio.gather(*(caller() for _ in range(clients)))
    wall = time.perf_counter() - began
    if failed:
        raise RuntimeError(f"{target.name}: {failed} of {calls} calls failed")
    ours_after, server_after = process_cpu_seconds(os.getpid()), cpu_of(pids)
    latencies.sort()

    def per_call(before: float | None, after: float | None) -> float | None:
        return None if before is None or after is None else (after - before) / calls * 1e6

    return Figure(
        rate=calls / wall,
        p50=latencies[len(latencies) // 2] * 1e3,
        p99=latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3,
        ours_cpu=per_call(ours_before, ours_after),
        server_cpu=per_call(server_before, server_after),
    )


# -- the direct baselines: the official client on the child itself ----------------------


def stdio_params() -> StdioServerParameters:
    """The SDK's parameters for a stdio child."""
    return StdioServerParameters(command=sys.executable, args=[str(CHILD)])


async def open_stdio(stack: contextlib.AsyncExitStack) -> tuple[ClientSession, list[int]]:
    """A direct SDK session to a new stdio child, and that child's pid."""
    before = set(descendants(os.getpid()))
    read, write = await stack.enter_async_context(stdio_client(stdio_params()))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session, [p for p in descendants(os.getpid()) if p not in before]


async def open_http(stack: contextlib.AsyncExitStack, url: str) -> ClientSession:
    """A direct SDK session over Streamable HTTP."""
    read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
    session = await stack.enter_async_context(ClientSession(read, write))
    await session.initialize()
    return session


def sdk_call(session: ClientSession) -> Call:
    """`ClientSession.call_tool` as a target's call."""

    async def call(i: int) -> bool:
        result = await session.call_tool("read_note", args_for(i))
        return not result.is_error

    return call


class HttpChild(ServerProcess):
    """_mcp_child.py over Streamable HTTP, in a process of its own."""

    def __init__(self) -> None:
        super().__init__("http child", [str(CHILD)], stdout=subprocess.DEVNULL)

    @property
    def url(self) -> str:
        """Its MCP endpoint."""
        return f"http://{HOST}:{self.port}/mcp"


# -- our side: process environments behind the gateway ----------------------------------


async def children_loop_call(coro: Any) -> Any:
    """Await a coroutine on the children's loop (where every child session lives)."""
    from agentenv.env.servers import loop

    return await loop.call(coro)


def our_backend() -> Any:
    """Our stdio backend for the child, as a `server: command:` block makes it."""
    from agentenv.env.servers.stdio import StdioBackend
    from agentenv.spec.server import ServerSpec

    return StdioBackend(ServerSpec(command=[sys.executable, str(CHILD)]), CHILD.parent, None)


async def seam_child() -> tuple[Any, list[int]]:
    """A child started by our stdio backend (no gateway), and its pid."""
    log_dir = Path(os.environ["AGENTENV_LOG_DIR"])
    before = set(descendants(os.getpid()))
    child = await children_loop_call(our_backend().start(log_dir))
    return child, [p for p in descendants(os.getpid()) if p not in before]


def seam_call(child: Any) -> Call:
    """`McpChild.call_tool` through the loop hop: the gateway's path without the gateway."""

    async def call(i: int) -> bool:
        answer = await children_loop_call(child.call_tool("read_note", args_for(i), None, 60))
        return not answer.is_error

    return call


def write_env(folder: Path, name: str, server: dict[str, Any], **top: Any) -> Path:
    """An environment document with this `server:` block, in a folder of its own."""
    path = folder / name
    path.mkdir(parents=True, exist_ok=True)
    doc = {"apiVersion": "agentenv/v1", "kind": "Environment", "name": name, "server": server}
    (path / "env.yaml").write_text(json.dumps({**doc, **top}, indent=2))  # JSON is YAML
    return path


def stdio_server(**more: Any) -> dict[str, Any]:
    """The `server:` block for a stdio child."""
    return {"command": [sys.executable, str(CHILD)], **more}


@dataclass
class Ours:
    """A loaded process environment behind a Gateway; `pids` the processes it started."""

    env: Any
    gateway: Any
    pids: list[int] = field(default_factory=list)

    @classmethod
    def load(cls, folder: Path, **gateway_options: Any) -> Ours:
        from agentenv import Environment, Gateway

        before = set(descendants(os.getpid()))
        env = Environment.load(folder)
        gateway = Gateway(env, **gateway_options)
        return cls(env, gateway, [p for p in descendants(os.getpid()) if p not in before])

    def call_on(self, instance: str = "default") -> Call:
        from agentenv import Principal

        principal = Principal(self.gateway.env.default_role)
        gateway_call = self.gateway.call

        async def call(i: int) -> bool:
            result = await gateway_call(principal, "read_note", args_for(i), instance=instance)
            return result.ok

        return call

    def close(self) -> None:
        """Stop its server processes (the runtime's own close, where it has one)."""
        runtime = getattr(self.env, "server", None)
        close = getattr(runtime, "close", None)
        if close is None:
            return
        done = close()
        if asyncio.iscoroutine(done):
            from agentenv.env.servers import loop

            loop.run(done, timeout=60)


def pool_stats(ours: Ours) -> dict[str, int] | None:
    """The warm pool's counters (idle, live, ...), where the runtime shows them."""
    runtime = getattr(ours.env, "server", None)
    for holder in (getattr(runtime, "pool", None), runtime):
        stats = getattr(holder, "stats", None)
        if callable(stats):
            return stats()
    return None


async def wait_pool_full(ours: Ours, size: int, timeout: float = 120) -> None:
    """Until the pool holds `size` idle started processes again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stats = pool_stats(ours)
        if stats is None:
            await asyncio.sleep(3)  # no counters to read: give the refill time
            return
        if stats.get("idle", 0) >= size:
            return
        await asyncio.sleep(0.02)
    raise RuntimeError(
        f"the pool did not refill to {size} within {timeout:g} s: {pool_stats(ours)}"
    )


# -- 1 and 2: calls/s --------------------------------------------------------------------


async def calls_section(
    opts: argparse.Namespace, folder: Path, stack: contextlib.AsyncExitStack
) -> None:
    http_child = HttpChild()
    stack.callback(http_child.close)
    http_child.wait_ready()
    direct_stdio, stdio_pids = await open_stdio(stack)
    direct_http = await open_http(stack, http_child.url)
    targets: dict[str, Target] = {
        "stdio direct": Target("stdio direct", sdk_call(direct_stdio), lambda: stdio_pids),
        "http direct": Target("http direct", sdk_call(direct_http), lambda: [http_child.pid]),
    }
    skipped: list[str] = []
    if opts.breakdown:
        child, child_pids = await seam_child()
        stack.push_async_callback(lambda: children_loop_call(child.close()))
        targets["stdio seam"] = Target("stdio seam", seam_call(child), lambda: child_pids)
    docs = {
        "stdio": write_env(folder, "calls-stdio", stdio_server(isolation="shared")),
        "http": write_env(folder, "calls-http", {"url": http_child.url}),
    }
    for kind, doc in docs.items():
        for mode, label in ((None, f"{kind} gateway"), ("performance", f"{kind} gateway perf")):
            try:
                ours = await asyncio.to_thread(Ours.load, doc, mode=mode)
            except Exception as exc:
                skipped.append(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
                break
            stack.callback(ours.close)
            pids = ours.pids if kind == "stdio" else [http_child.pid]
            targets[label] = Target(label, ours.call_on(), lambda pids=pids: pids)
            if mode is None:
                on_loop = f"{kind} gateway on loop"
                targets[on_loop] = Target(on_loop, ours.call_on(), lambda p=pids: p, True)
        if opts.wire and f"{kind} gateway" in targets:
            serve = ServerProcess(
                f"serve {kind}",
                ["-c", SERVE, "serve", str(doc), "--log-level", "error"],
                stdout=subprocess.DEVNULL,
            )
            stack.callback(serve.close)
            serve.wait_ready(120)
            session = await open_http(stack, f"http://{HOST}:{serve.port}/mcp")
            serve_pids = [serve.pid, *(descendants(serve.pid) if kind == "stdio" else [])]
            if kind == "http":
                serve_pids.append(http_child.pid)
            label = f"{kind} via serve"
            targets[label] = Target(label, sdk_call(session), lambda p=serve_pids: p)
    plan = [(1, n) for n in targets if not n.endswith("perf")]
    plan += [(opts.clients, n) for n in targets if n.endswith("direct")]
    plan += [(opts.clients, n) for n in targets if n.endswith("perf")]
    figures: dict[tuple[int, str], list[Figure]] = {}
    for _ in range(opts.rounds):  # interleaved, so drifting load hits every target alike
        for clients, name in plan:
            figures.setdefault((clients, name), []).append(
                await measure(targets[name], opts.calls, clients)
            )
    report_calls(figures, opts, skipped)


def med(values: list[float | None]) -> float:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else float("nan")


def report_calls(
    figures: dict[tuple[int, str], list[Figure]], opts: argparse.Namespace, skipped: list[str]
) -> None:
    print(f"\ntools/call read_note, {opts.calls} calls a run, median of {opts.rounds} rounds")
    print(
        f"{'target':22} {'clients':>7} {'calls/s':>8} {'p50 ms':>7} {'p99 ms':>7}"
        f" {'ours µs':>8} {'server µs':>9}"
    )
    rows: dict[tuple[int, str], Figure] = {}
    for (clients, name), runs in figures.items():
        row = Figure(
            med([r.rate for r in runs]),
            med([r.p50 for r in runs]),
            med([r.p99 for r in runs]),
            med([r.ours_cpu for r in runs]),
            med([r.server_cpu for r in runs]),
        )
        rows[(clients, name)] = row
        print(
            f"{name:22} {clients:7} {row.rate:8.0f} {row.p50:7.2f} {row.p99:7.2f}"
            f" {row.ours_cpu:8.0f} {row.server_cpu:9.0f}"
        )
    for kind in ("stdio", "http"):
        for clients, label, what in (
            (1, f"{kind} seam", "our McpChild via the children's loop, no gateway / SDK"),
            (1, f"{kind} gateway", "Gateway.call / ClientSession.call_tool, 1 caller"),
            (1, f"{kind} gateway on loop", "the same, called on the children's loop (as serve)"),
            (opts.clients, f"{kind} gateway perf", f"the same, {opts.clients} callers"),
            (1, f"{kind} via serve", "SDK client -> agent-env serve -> child / SDK -> child"),
        ):
            ours, direct = rows.get((clients, label)), rows.get((clients, f"{kind} direct"))
            if ours is None or direct is None:
                continue
            print(
                f"{kind:5} {what}: {ours.rate / direct.rate:.2f}x calls/s"
                f"{' (goal >= 0.8)' if 'gateway' in label else ''}"
                f", p50 +{ours.p50 - direct.p50:.2f} ms"
            )
    for line in skipped:
        print(f"skipped {line}")


# -- 3: a fresh isolated environment from the warm pool ----------------------------------


async def cold_episode() -> float:
    """The SDK starting the server, initialize, the first call, stop: seconds."""
    began = time.perf_counter()
    async with stdio_client(stdio_params()) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        if (await s.call_tool("read_note", args_for(0))).is_error:
            raise RuntimeError("cold episode: the call failed")
    return time.perf_counter() - began


async def backend_cold_episode() -> float:
    """Our stdio backend starting the server (what the pool pays per process), the first
    call, close: seconds."""
    log_dir = Path(os.environ["AGENTENV_LOG_DIR"])

    async def episode() -> None:
        child = await our_backend().start(log_dir)
        try:
            if (await child.call_tool("read_note", args_for(0), None, 60)).is_error:
                raise RuntimeError("backend cold episode: the call failed")
        finally:
            await child.close()

    began = time.perf_counter()
    await children_loop_call(episode())
    return time.perf_counter() - began


async def warm_episode(ours: Ours, n: int) -> float:
    """create_instance + the first call + drop_instance on our gateway: seconds."""
    began = time.perf_counter()
    instance = ours.gateway.create_instance(f"ep{n}").id
    ok = await ours.call_on(instance)(n)
    ours.gateway.drop_instance(instance)
    if not ok:
        raise RuntimeError("warm episode: the first call failed")
    return time.perf_counter() - began


async def pool_section(opts: argparse.Namespace, folder: Path) -> None:
    doc = write_env(folder, "pool", stdio_server(isolation="process", pool=opts.pool))
    try:
        ours = await asyncio.to_thread(Ours.load, doc)
    except Exception as exc:
        print(f"\nskipped the pool section: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        cold = [await cold_episode() for _ in range(3)]
        print(f"(cold start alone: {statistics.median(cold) * 1e3:.0f} ms per episode)")
        return
    try:
        warm: list[float] = []
        cold, backend_cold = [], []
        for n in range(opts.episodes):  # interleaved: warm, cold (SDK), cold (our backend)
            await wait_pool_full(ours, opts.pool)
            warm.append(await warm_episode(ours, n))
            cold.append(await cold_episode())
            backend_cold.append(await backend_cold_episode())
        await wait_pool_full(ours, opts.pool)
        began = time.perf_counter()
        for n in range(opts.episodes):
            await warm_episode(ours, 10_000 + n)
        back_to_back = (time.perf_counter() - began) / opts.episodes
        await wait_pool_full(ours, opts.pool)
        await memory_section(opts, ours)
    finally:
        await asyncio.to_thread(ours.close)
    w, c, b = statistics.median(warm), statistics.median(cold), statistics.median(backend_cold)
    print(
        f"\nan episode on a fresh isolated environment (pool of {opts.pool}),"
        f" median of {opts.episodes}:"
    )
    print(
        f"  warm pool: {w * 1e3:.2f} ms (create_instance + first call + drop_instance;"
        f" p90 {sorted(warm)[int(len(warm) * 0.9)] * 1e3:.2f} ms)"
    )
    print(f"  back to back, pool not refilled in between: {back_to_back * 1e3:.1f} ms/episode")
    print(f"  cold (SDK: start + initialize + first call + stop): {c * 1e3:.0f} ms")
    print(f"  cold through our stdio backend (what the pool pays a process): {b * 1e3:.0f} ms")
    print(
        f"  warm / cold: {w / c:.4f} ({c / w:.0f}x faster); back to back / cold:"
        f" {back_to_back / c:.2f}"
    )


# -- 4: memory ---------------------------------------------------------------------------


async def memory_section(opts: argparse.Namespace, ours: Ours) -> None:
    """K live instances, each past its first call (so each holds a child): our RSS and the
    children's RSS/PSS, before and after."""
    me = os.getpid()
    await asyncio.sleep(0.5)
    ours_before = rss_kb(me) or 0
    kids_before = descendants(me)
    instances = [ours.gateway.create_instance(f"mem{k}").id for k in range(opts.live)]
    for k, instance in enumerate(instances):
        if not await ours.call_on(instance)(k):
            raise RuntimeError("memory: a first call failed")
    await wait_pool_full(ours, opts.pool)
    await asyncio.sleep(0.5)
    kids = descendants(me)
    new = [p for p in kids if p not in set(kids_before)]
    ours_after = rss_kb(me) or 0
    one = [p for p in new if rss_kb(p)]
    for instance in instances:
        ours.gateway.drop_instance(instance)
    print(
        f"\nmemory, {opts.live} live instances of a process environment (+ the pool of"
        f" {opts.pool}): {len(new)} new child processes"
    )
    if one:
        rss = total_kb(one, rss_kb) / len(one) / 1024
        pss = total_kb(one, pss_kb) / len(one) / 1024
        print(
            f"  per live child process: RSS {rss:.1f} MB, PSS {pss:.1f} MB"
            " (PSS splits the pages the children share)"
        )
    print(
        f"  our process per live instance: +{(ours_after - ours_before) / opts.live:.0f} kB RSS"
        f" ({ours_before / 1024:.0f} -> {ours_after / 1024:.0f} MB)"
    )


# -- main --------------------------------------------------------------------------------


async def run(opts: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-process-") as tmp:
        os.environ.setdefault("AGENTENV_LOG_DIR", str(Path(tmp) / "logs"))
        async with contextlib.AsyncExitStack() as stack:
            await calls_section(opts, Path(tmp), stack)
        await pool_section(opts, Path(tmp))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--calls", type=int, help="calls a run")
    parser.add_argument("--clients", type=int, default=8, help="concurrent callers (default 8)")
    parser.add_argument("--episodes", type=int, help="episodes of each kind")
    parser.add_argument("--pool", type=int, default=2, help="warm pool size (default 2)")
    parser.add_argument("--live", type=int, default=8, help="live instances for memory")
    parser.add_argument(
        "--breakdown", action="store_true", help="add our stdio child without the gateway"
    )
    parser.add_argument("--no-wire", dest="wire", action="store_false", help="skip serve")
    opts = parser.parse_args()
    rounds, calls, episodes = (3, 300, 10) if opts.quick else (5, 1000, 30)
    opts.rounds, opts.calls = opts.rounds or rounds, opts.calls or calls
    opts.episodes = opts.episodes or episodes
    print(f"at the start: {load_average()}")
    asyncio.run(run(opts))
    print(f"\nat the end: {load_average()}")


if __name__ == "__main__":
    main()
