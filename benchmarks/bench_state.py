"""The State store's figures, each beside a baseline measured in the same run.

    python benchmarks/bench_state.py            # full run (about 3 minutes)
    python benchmarks/bench_state.py --quick    # fewer rounds, smaller baselines (< 2 min)

The baseline is the store as it was before issue 12 (`store.py` at BEFORE, read with
`git show` and imported beside today's), and the floor is a plain dict operation plus
`json.dumps` of the record. Rounds are interleaved (baseline, ours, baseline, ours, ...)
and each figure is the median of the rounds' best loops, in process CPU time, so other
work on the machine shifts both sides alike (the samples of sections 3-4 are single
writes, also in CPU time).

1. schema validation of one 3-field record: jsonschema's `iter_errors` (what every write
   paid) against the compiled check;
2. a write (`put` of an existing key, inside a transaction, as the gateway does it), with
   the 3-field schema and without one, and what each step of it costs;
3. at N records (1,000,000 unless --n): a steady write, the first write on a fresh fork and
   the first write after a snapshot, ours and the baseline's;
4. delete at N (the baseline scanned for the record's position);
5. loading N seed records through `Environment.from_spec`, with memory per record, and the
   same records through the baseline's `State.from_records` (at a tenth of N with --quick);
6. reading a whole collection of 10,000 records (`list`, `find`): the price of the
   persistent map is the walk (a lookup per key, where a dict walked its values).
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from agentenv.env.environment import Environment
from agentenv.spec.environment import EnvironmentSpec
from agentenv.state import CollectionInfo, State
from agentenv.state._canonical import canonical_json, digest, parse_canonical, record_digest

BEFORE = "08635a407a9f90ae5031c0eef3808261ec714716"
"""The last commit with the store as it was before issue 12."""

SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "text": {"type": "string"},
        "stars": {"type": "integer"},
    },
    "required": ["id", "text", "stars"],
}
RECORD = {"id": "n1", "text": "hello", "stars": 3}


def _old_store() -> Any:
    """Today's package with the old store.py beside it, as module `_store_before`."""
    root = Path(__file__).resolve().parents[1]
    source = subprocess.run(
        ["git", "show", f"{BEFORE}:src/agentenv/state/store.py"],
        cwd=root,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    spec = importlib.util.spec_from_loader("_store_before", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["_store_before"] = module
    exec(compile(source, "store.py@before", "exec"), module.__dict__)
    return module


def _per_call(fn: Callable[[], Any], number: int) -> float:
    """Best of 3 loops, in µs of process CPU time per call."""
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(number):
            fn()
        best = min(best, time.process_time() - start)
    return best / number * 1e6


def _rounds(cases: dict[str, Callable[[], Any]], number: int, rounds: int) -> dict[str, float]:
    """Interleaved rounds of every case; the median per case."""
    seen: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            seen[name].append(_per_call(fn, number))
    return {name: statistics.median(values) for name, values in seen.items()}


def _line(label: str, value: float, base_label: str, base: float, unit: str = "µs") -> None:
    ratio = value / base
    shown = f"{ratio:6.2f}x" if ratio >= 0.01 else f"1/{1 / ratio:,.0f}"
    print(f"  {label:<40} {value:10.2f} {unit}   {base_label:<34} {base:10.2f} {unit}   {shown}")


def bench_validation(rounds: int) -> None:
    print("1. schema validation of one 3-field record")
    validator = Draft202012Validator(SCHEMA)
    check = CollectionInfo.create("id", SCHEMA).check
    assert check is not None
    record = json.loads(json.dumps(RECORD))
    got = _rounds(
        {
            "jsonschema": lambda: next(iter(validator.iter_errors(record)), None),
            "compiled": lambda: check(record),
        },
        20_000,
        rounds,
    )
    _line("compiled check", got["compiled"], "jsonschema iter_errors", got["jsonschema"])


def bench_write(old: Any, rounds: int) -> None:
    print("2. a write: put of an existing key in a transaction (the gateway's shape)")
    ours = State({"docs": CollectionInfo.create("id", SCHEMA), "notes": "id"})
    theirs = old.State({"docs": old.CollectionInfo.create("id", SCHEMA), "notes": "id"})
    for s in (ours, theirs):
        s.put("docs", RECORD)
        s.put("notes", RECORD)
    floor_table: dict[str, Any] = {}

    def floor() -> None:
        floor_table[RECORD["id"]] = dict(RECORD)
        json.dumps(RECORD)

    def write(state: Any, name: str) -> Callable[[], None]:
        def run() -> None:
            with state.transaction():
                state.put(name, RECORD)

        return run

    got = _rounds(
        {
            "floor": floor,
            "old schema": write(theirs, "docs"),
            "new schema": write(ours, "docs"),
            "old plain": write(theirs, "notes"),
            "new plain": write(ours, "notes"),
        },
        5_000,
        rounds,
    )
    _line("write, 3-field schema", got["new schema"], "before issue 12", got["old schema"])
    _line("write, no schema", got["new plain"], "before issue 12", got["old plain"])
    _line("write, 3-field schema", got["new schema"], "floor: dict op + json.dumps", got["floor"])
    _line("write, no schema", got["new plain"], "floor: dict op + json.dumps", got["floor"])

    text = canonical_json(RECORD)

    steps = _rounds(
        {
            "json.dumps(kwargs)": lambda: json.dumps(
                RECORD, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
            ),
            "canonical_json": lambda: canonical_json(RECORD),
            "json.loads": lambda: json.loads(text),
            "parse_canonical": lambda: parse_canonical(text),
            "digest": lambda: digest("docs", "n1", text),
            "record_digest": lambda: record_digest("docs", "n1", text),
            "old transaction": lambda: _empty_transaction(theirs),
            "transaction": lambda: _empty_transaction(ours),
        },
        20_000,
        rounds,
    )
    print("   its steps:")
    _line(
        "canonical_json",
        steps["canonical_json"],
        "json.dumps with its options",
        steps["json.dumps(kwargs)"],
    )
    _line(
        "parse_canonical (the private copy)",
        steps["parse_canonical"],
        "json.loads",
        steps["json.loads"],
    )
    _line("record_digest", steps["record_digest"], "digest", steps["digest"])
    _line(
        "empty transaction",
        steps["transaction"],
        "before issue 12 (@contextmanager)",
        steps["old transaction"],
    )


def _empty_transaction(state: Any) -> None:
    with state.transaction():
        pass


def _old_state_at(old: Any, n: int) -> Any:
    """The baseline's state of n records, built straight into its tables (its own
    from_records would take ~50 s at 1M: that figure is section 5's)."""
    state = old.State({"items": "id"})
    table = state._tables["items"]
    for i in range(n):
        key = f"r{i}"
        record = {"id": key, "n": i}
        table.records[key] = record
        table.digests[key] = d = record_digest("items", key, canonical_json(record))
        table.total += d
    table.total &= (1 << 256) - 1
    return state


def _first_writes(state: Any, samples: int) -> dict[str, float]:
    """µs (CPU) of a steady write, the first write on a fork, the first after a snapshot."""
    clock = time.process_time
    out: dict[str, list[float]] = {"steady": [], "fork": [], "snapshot": []}
    for i in range(samples):
        record = {"id": f"r{i % 1000}", "n": i}
        state.put("items", record)  # owned now
        start = clock()
        state.put("items", record)
        out["steady"].append(clock() - start)
        fork = state.fork()
        start = clock()
        fork.put("items", record)
        out["fork"].append(clock() - start)
        state.snapshot()
        start = clock()
        state.put("items", record)
        out["snapshot"].append(clock() - start)
    return {k: statistics.median(v) * 1e6 for k, v in out.items()}


def bench_forks(old: Any, n: int, samples: int) -> None:
    print(f"3. first writes at {n:,} records (median of {samples} samples each, CPU µs)")
    rows = [{"id": f"r{i}", "n": i} for i in range(n)]
    ours = State.from_records({"items": rows})
    theirs = _old_state_at(old, n)
    assert ours.hash() == theirs.hash()  # the same function of the state
    got_new = _first_writes(ours, samples)
    got_old = _first_writes(theirs, max(3, samples // 20))
    _line("steady write", got_new["steady"], "before issue 12", got_old["steady"])
    _line("first write on a fresh fork", got_new["fork"], "before issue 12", got_old["fork"])
    _line(
        "first write after a snapshot", got_new["snapshot"], "before issue 12", got_old["snapshot"]
    )
    _line("first write on a fresh fork", got_new["fork"], "our steady write", got_new["steady"])
    _line(
        "first write after a snapshot", got_new["snapshot"], "our steady write", got_new["steady"]
    )
    print(f"   (baseline: first write / steady = {got_old['fork'] / got_old['steady']:.0f}x)")

    print(f"4. delete at {n:,} records (a record from the middle, then put back; CPU µs)")

    def deletes(state: Any, count: int) -> float:
        times = []
        for i in range(count):
            key = f"r{n // 2 + i}"
            start = time.process_time()
            state.delete("items", key)
            times.append(time.process_time() - start)
            state.put("items", {"id": key, "n": i})
        return statistics.median(times) * 1e6

    new_delete = deletes(ours, samples)
    old_delete = deletes(theirs, max(3, samples // 20))
    _line("delete", new_delete, "before issue 12", old_delete)
    _line("delete", new_delete, "our steady write", got_new["steady"])


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def bench_load(old: Any, n: int, old_n: int) -> None:
    print(f"5. loading seed records with the 3-field schema (ours at {n:,}, baseline at {old_n:,})")
    rows = [{"id": f"r{i}", "text": f"text {i}", "stars": i % 5} for i in range(n)]
    spec = EnvironmentSpec.model_validate(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "big",
            "state": {"items": {"schema": SCHEMA}},
            "seed": {"items": rows},
        }
    )
    gc.collect()
    before = _rss()
    start, cpu = time.perf_counter(), time.process_time()
    env = Environment.from_spec(spec)
    took, took_cpu = time.perf_counter() - start, time.process_time() - cpu
    gc.collect()
    grown = _rss() - before
    assert env.seed.fork().count("items") == n
    cpu = time.process_time()
    old.State.from_records(
        {"items": rows[:old_n]}, {"items": old.CollectionInfo.create("id", SCHEMA)}
    )
    old_cpu = time.process_time() - cpu
    print(
        f"  Environment.from_spec, {n:,} records: {took_cpu:.2f} s CPU, {took:.2f} s wall"
        " (goal <= 5 s at 1,000,000)"
    )
    _line(
        "per record (CPU)",
        took_cpu / n * 1e6,
        "before issue 12 (from_records)",
        old_cpu / old_n * 1e6,
    )
    print(f"  memory held by the seeded state: {grown / n:,.0f} bytes per record (RSS growth)")
    del env


def bench_reads(old: Any, rounds: int) -> None:
    print("6. whole-collection reads at 10,000 records, on a fork with one write (ms)")
    rows = [{"id": f"r{i}", "status": "closed" if i % 50 == 0 else "open"} for i in range(10_000)]
    ours = State.from_records({"t": rows}).fork()
    theirs = old.State.from_records({"t": rows}).fork()
    for s in (ours, theirs):
        s.put("t", {"id": "x", "status": "open"})
    got = _rounds(
        {
            "old list": lambda: theirs.list("t"),
            "new list": lambda: ours.list("t"),
            "old find": lambda: theirs.find("t", status="closed"),
            "new find": lambda: ours.find("t", status="closed"),
        },
        3,
        rounds,
    )
    _line("list", got["new list"] / 1e3, "before issue 12", got["old list"] / 1e3, "ms")
    _line("find(status=...)", got["new find"] / 1e3, "before issue 12", got["old find"] / 1e3, "ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (< 2 minutes)")
    parser.add_argument("--n", type=int, default=1_000_000, help="records for sections 3-5")
    args = parser.parse_args()
    rounds = 5 if args.quick else 9
    old = _old_store()
    bench_validation(rounds)
    bench_write(old, rounds)
    bench_forks(old, args.n, 60 if args.quick else 200)
    bench_load(old, args.n, args.n // 10 if args.quick else args.n)
    bench_reads(old, rounds)


if __name__ == "__main__":
    main()
