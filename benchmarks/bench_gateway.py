"""In-process gateway figures, each printed beside floors measured in the same run.

    python benchmarks/bench_gateway.py               # full run (about a minute)
    python benchmarks/bench_gateway.py --quick       # fewer repetitions (well under a minute)
    python benchmarks/bench_gateway.py --breakdown   # also: what each step of a call costs

1. `Gateway.call` in process (RBAC, clock, validation, transaction, trajectory record all
   on): a read tool, a write tool on a collection without a record schema, and one with a
   simple 3-field object schema; beside two floors: a plain dict operation plus
   `json.dumps` of the record, and the tool function called directly on a state (which, for
   the schema write, includes the store's schema validation: the split is printed);
2. what a rollout pays per episode: `Gateway(env)` + `create_instance` + `list_tools`, beside
   a state fork alone;
3. forking a fresh instance from a seeded snapshot of 10,000 records vs deep-copying them.

Figures are process CPU time per call (best of a few loops, then the median of interleaved
rounds: floor, direct, gateway, floor, ...), so other work on the machine shifts all alike.
The REST `/step` figures are benchmarks/bench_rest.py's.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import socket
import statistics
import time
import timeit
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from agentenv import Environment, Gateway, Principal, ToolContext, tool
from agentenv.env.tool import Tool
from agentenv.spec import parse_environment_spec


@tool(kind="read")
def read_note(ctx: ToolContext, note_id: str) -> dict[str, Any]:
    """Read one note.

    Args:
        note_id: The note's id.
    """
    return ctx.state.require("notes", note_id)


@tool
def write_note(ctx: ToolContext, note_id: str, text: str) -> dict[str, Any]:
    """Write one note (a collection without a record schema)."""
    return ctx.state.put("notes", {"id": note_id, "text": text, "stars": 3})


@tool
def write_doc(ctx: ToolContext, doc_id: str, text: str) -> dict[str, Any]:
    """Write one doc (a collection with a 3-field object schema)."""
    return ctx.state.put("docs", {"id": doc_id, "text": text, "stars": 3})


CALL_BODY = {"action": "call_tool", "tool_name": "read_note", "arguments": {"note_id": "n7"}}
DOC_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "text": {"type": "string"},
        "stars": {"type": "integer"},
    },
    "required": ["id", "text"],
}
CALLS = {
    "read": ("read_note", {"note_id": "n7"}),
    "write, no schema": ("write_note", {"note_id": "n7", "text": "hello"}),
    "write, 3-field schema": ("write_doc", {"doc_id": "d7", "text": "hello"}),
}


def build_env(records: int) -> Environment:
    """The benchmark environment: `records` seeded notes, an empty schema'd `docs`."""
    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "bench",
            "roles": [{"name": "agent"}],
            "state": {"notes": {"key": "id"}, "docs": {"key": "id", "schema": DOC_SCHEMA}},
            "seed": {
                "notes": [
                    {"id": f"n{i}", "text": f"note {i}", "tags": ["a", "b"]} for i in range(records)
                ]
            },
            "clock": {"start": "2026-03-02T09:00:00Z"},
        }
    )
    env = Environment.from_spec(spec)
    tools = {f.__name__: Tool.from_function(f) for f in (read_note, write_note, write_doc)}
    return replace(env, tools=tools)


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_per_call(loop: Callable[[int], None], n: int, repeats: int) -> float:
    """CPU µs per iteration of `loop(n)`, best of `repeats`."""
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        loop(n)
        best = min(best, (time.process_time() - start) / n)
    return best * 1e6


def call_figures(n: int, repeats: int, rounds: int) -> dict[str, dict[str, float]]:
    """Per call kind: the two floors and `Gateway.call`, medians of interleaved rounds."""
    env = build_env(100)
    principal = Principal("agent")
    out: dict[str, dict[str, list[float]]] = {}
    for label, (name, args) in CALLS.items():
        fn = {"read_note": read_note, "write_note": write_note, "write_doc": write_doc}[name]
        plain: dict[str, Any] = {f"n{i}": {"id": f"n{i}", "text": "x"} for i in range(100)}
        key = next(iter(args.values()))

        def floor(count: int, name: str = name, key: str = key, plain: Any = plain) -> None:
            if name == "read_note":
                for _ in range(count):
                    json.dumps(plain[key])
            else:
                for _ in range(count):
                    record = {"id": key, "text": "hello", "stars": 3}
                    plain[key] = record
                    json.dumps(record)

        state = env.new_state()
        ctx = ToolContext(state, datetime.now(UTC), principal)

        def direct(count: int, fn: Any = fn, args: dict[str, Any] = args, ctx: Any = ctx) -> None:
            for _ in range(count):
                fn(ctx, **args)

        def via_gateway(count: int, name: str = name, args: dict[str, Any] = args) -> float:
            gateway = Gateway(env)  # a fresh trajectory for each loop

            async def loop() -> float:
                call = gateway.call
                start = time.process_time()  # the loop itself, not its setup
                for _ in range(count):
                    await call(principal, name, args)
                return (time.process_time() - start) / count * 1e6

            return asyncio.run(loop())

        figures = out.setdefault(label, {"floor": [], "direct": [], "gateway": []})
        for _ in range(rounds):
            figures["floor"].append(cpu_per_call(floor, n, repeats))
            figures["direct"].append(cpu_per_call(direct, n, repeats))
            figures["gateway"].append(min(via_gateway(n) for _ in range(repeats)))
    return {
        label: {k: statistics.median(v) for k, v in figures.items()}
        for label, figures in out.items()
    }


def episode_setup(n: int, repeats: int, rounds: int) -> tuple[float, float]:
    """µs for Gateway(env) + create_instance + list_tools, and for a state fork alone."""
    env = build_env(100)
    principal = Principal("agent")

    def setup(count: int) -> None:
        for _ in range(count):
            gateway = Gateway(env)
            inst = gateway.create_instance()
            gateway.list_tools(principal, inst.id)

    def fork(count: int) -> None:
        for _ in range(count):
            env.new_state()

    ours, floor = [], []
    for _ in range(rounds):
        floor.append(cpu_per_call(fork, n, repeats))
        ours.append(cpu_per_call(setup, n, repeats))
    return statistics.median(ours), statistics.median(floor)


def bench_fork(records: int, repeats: int) -> tuple[float, float]:
    """Seconds to deep-copy `records` seeded records, and to fork an instance of them."""
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

    return (
        min(deepcopy_rows() for _ in range(max(3, repeats // 10))),
        min(fork() for _ in range(repeats)),
    )


def breakdown() -> None:
    """What each step of a read call costs on its own (timeit, best of 5)."""
    from agentenv.gateway.results import CallResult, encode_result
    from agentenv.gateway.trajectory import Trajectory

    env = build_env(100)
    gateway = Gateway(env)
    inst = gateway.instance()
    state = inst.state
    principal = Principal("agent")
    made = env.tools["read_note"]
    fast = made.fast_args()
    args = {"note_id": "n7"}
    value = state.require("notes", "n7")
    ctx = ToolContext(state, datetime.now(UTC), principal)
    traj = Trajectory()
    now = datetime.now(UTC)

    def transaction() -> None:
        with state.transaction():
            pass

    steps: list[tuple[str, Callable[[], Any]]] = [
        ("pydantic model_validate (the slow path)", lambda: made.args_model.model_validate(args)),
        ("fast argument check (env.fast_args)", lambda: fast(args)),  # type: ignore[misc]
        ("ToolContext", lambda: ToolContext(state, now, principal, "x")),
        ("state.transaction() enter + exit", transaction),
        ("the tool itself (require: a copy)", lambda: made.invoke(ctx, args)),
        ("encode_result", lambda: encode_result(value)),
        ("state.hash() (cached between writes)", state.hash),
        ("clock.now()", inst.clock.now),
        ("time.time_ns() (the record's wall time)", time.time_ns),
        (
            "Trajectory.add_call (the record)",
            lambda: traj.add_call(
                "call", 0, now, principal, "read_note", args, "{}", None, False, "h", 0, 0, 0.1
            ),
        ),
        (
            "  ... as the gateway calls it (flat arguments)",
            lambda: traj.add_call(
                "call",
                0,
                now,
                principal,
                "read_note",
                args,
                "{}",
                None,
                False,
                "h",
                0,
                0,
                0.1,
                None,
                None,
                0,
                True,
            ),
        ),
        ("CallResult", lambda: CallResult(True, value, "{}", None, 0, 0, "h")),
        ("datetime.now(UTC) (no longer made per call)", lambda: datetime.now(UTC)),
    ]
    print("breakdown of a read call, each step alone:")
    for label, fn in steps:
        n = 20_000
        best = min(timeit.repeat(fn, number=n, repeat=5, timer=time.process_time)) / n
        print(f"  {label:48s} {best * 1e6:6.2f} µs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--breakdown", action="store_true", help="also time each step")
    opts = parser.parse_args()
    n, repeats, rounds = (3_000, 3, 3) if opts.quick else (20_000, 3, 5)

    figures = call_figures(n, repeats, rounds)
    print(f"Gateway.call in process, CPU µs/call (median of {rounds} interleaved rounds):")
    for label, f in figures.items():
        print(
            f"  {label:22s} gateway {f['gateway']:6.2f} | floor (dict op + json.dumps) "
            f"{f['floor']:5.2f} ({f['gateway'] / f['floor']:4.1f}x) | tool called directly "
            f"{f['direct']:5.2f} ({f['gateway'] / f['direct']:4.1f}x)"
        )
    plain, schema = figures["write, no schema"], figures["write, 3-field schema"]
    print(
        f"  the schema's share of a write: {schema['gateway'] - plain['gateway']:+.2f} µs through "
        f"the gateway, {schema['direct'] - plain['direct']:+.2f} µs called directly "
        "(the store's record validation)"
    )

    ours, floor = episode_setup(max(n // 10, 300), repeats, rounds)
    print(
        f"per episode, Gateway(env) + create_instance + list_tools: {ours:6.2f} µs; "
        f"floor, a state fork alone: {floor:5.2f} µs ({ours / floor:.0f}x)"
    )

    deep, fork = bench_fork(10_000, 200 if not opts.quick else 50)
    print(f"fork a fresh instance from a 10,000-record snapshot: {fork * 1e3:.3f} ms")
    print(
        f"  baseline, deepcopy of the same records: {deep * 1e3:.1f} ms; "
        f"ratio {deep / fork:.0f}x faster"
    )
    if opts.breakdown:
        breakdown()


if __name__ == "__main__":
    main()
