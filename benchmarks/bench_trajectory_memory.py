"""Trajectory memory and reads, each printed beside the old-style trajectory in the same run.

    python benchmarks/bench_trajectory_memory.py            # 100,000 calls per server (minutes)
    python benchmarks/bench_trajectory_memory.py --quick    # 20,000

The baseline is the trajectory as it was before issue 11: every record kept in memory as an
object, no sanitising, and `GET /trajectory` rendered whole on the event loop. It is defined
below (`OldTrajectory`, `old_trajectory_route`) and swapped into the same app, so both
servers run the same gateway, routes and tool.

1. server memory: a real uvicorn server in its own process; its RSS (from /proc) before and
   after N `POST /step` calls, in KB per call, and its CPU per call meanwhile;
2. a full `GET /trajectory` of those N calls: seconds and MB, and the longest a `POST /step`
   waits while another client's full GET is answered (the old route renders on the event
   loop, so everything waits);
3. the cost of recording: in-process `Gateway.call` loops (CPU time, best of several),
   short trajectories (a fresh instance every 500 calls: never spills) and one long one.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import subprocess
import sys
import threading
import time
import tracemalloc
from bisect import bisect_right
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import httpx
import uvicorn
from _cpu import cpu_per_call_us, process_cpu_seconds
from bench_gateway import CALL_BODY, build_env, free_port
from starlette.requests import Request
from starlette.responses import Response

from agentenv import Gateway, Principal
from agentenv.gateway.events import render
from agentenv.gateway.trajectory import RECORD_ADAPTER, Trajectory, TrajectoryRecord
from agentenv.serve import create_app
from agentenv.state._canonical import copy_json

# -- the baseline: the trajectory before issue 11 -------------------------------------------


class OldTrajectory:
    """The pre-issue-11 trajectory: a list of record objects, nothing sanitised."""

    def __init__(self) -> None:
        self._records: list[TrajectoryRecord] = []
        self._first_event: list[int] = []
        self._events = 0

    def append(self, **fields: Any) -> TrajectoryRecord:
        """As it was: the record object, kept for ever."""
        fields.pop("result_text", None)
        record = TrajectoryRecord(seq=len(self._records), **fields)
        self._records.append(record)
        self._first_event.append(self._events)
        self._events += 2 if record.kind == "call" else 1
        return record

    def add_call(
        self,
        kind: str,
        wall_us: int,
        virtual_time: Any,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        result_json: str | None,
        error: Any,
        denied: bool,
        state_hash: str,
        changelog_id: int,
        before: int | None,
        duration_ms: float,
        session: str | None = None,
        trigger_id: str | None = None,
    ) -> int:
        """What the gateway did per call before issue 12: copies of the arguments and the
        result (the result's JSON parsed stands in for `copy_json` of the value, which this
        gateway no longer hands over), a datetime, the record object."""
        return self.append(
            kind=kind,
            wall_time=datetime.now(UTC),
            virtual_time=virtual_time,
            role=principal.role,
            principal=principal.name,
            session=session,
            tool=tool,
            args=copy_json(args),
            result=None if result_json is None else json.loads(result_json),
            error=error,
            denied=denied,
            state_hash=state_hash,
            changelog_id=changelog_id,
            changelog_id_before=before,
            duration_ms=duration_ms,
            trigger_id=trigger_id,
        ).seq

    @property
    def event_count(self) -> int:
        """How many wire events the records render to."""
        return self._events

    def first_event(self, seq: int) -> int:
        """How many wire events come before record `seq`'s first one."""
        return self._first_event[seq]

    def record_at_event(self, event: int) -> int:
        """The seq of the record that holds event `event`."""
        return bisect_right(self._first_event, event) - 1 if event < self._events else len(self)

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, index: int) -> TrajectoryRecord:
        return self._records[index]

    def __iter__(self) -> Iterator[TrajectoryRecord]:
        return iter(self._records)

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[TrajectoryRecord]:
        """Records `start` to `stop`."""
        return iter(self._records[start:stop])

    def write_jsonl(self, out: IO[bytes], start: int = 0, stop: int | None = None) -> int:
        """Records as JSON lines."""
        return out.write(
            b"".join(RECORD_ADAPTER.dump_json(r) + b"\n" for r in self.records(start, stop))
        )


def old_events_body(trajectory: OldTrajectory) -> bytes:
    """What the old route answered: every event rendered into one body."""
    events: list[dict[str, Any]] = []
    for seq in range(len(trajectory)):
        events.extend(render(trajectory[seq], trajectory.first_event(seq)))
    return "".join(json.dumps(e, ensure_ascii=False, default=str) + "\n" for e in events).encode()


def serve(which: str, port: int) -> None:
    """Serve the bench environment with the old or the new trajectory."""
    gateway = Gateway(build_env(100))
    app = create_app(gateway)
    if which == "old":
        gateway.instance().trajectory = OldTrajectory()  # type: ignore[assignment]

        @app.middleware("http")
        async def old_trajectory_route(request: Request, call_next: Any) -> Response:
            if request.url.path != "/trajectory":
                return await call_next(request)
            body = old_events_body(gateway.instance().trajectory)  # on the loop, as it was
            return Response(
                body,
                media_type="application/jsonl",
                headers={"X-Trajectory-Total-Bytes": str(len(body))},
            )

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error", access_log=False)


# -- 1 and 2: a served app ------------------------------------------------------------------


def rss_kb(pid: int) -> int | None:
    """The resident set size of a process in KB (None where /proc is absent)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return None


class Served:
    """One server process (old or new trajectory) on a free loopback port."""

    def __init__(self, which: str) -> None:
        self.which = which
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Served:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", self.which, "--port", str(self.port)]
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{self.url}/trajectory?limit=1", timeout=1)
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    raise RuntimeError(f"the {self.which} server did not start") from None
                time.sleep(0.05)

    @property
    def url(self) -> str:
        """The base URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        """The server process's id."""
        assert self.process is not None
        return self.process.pid

    def __exit__(self, *exc: object) -> None:
        assert self.process is not None
        self.process.terminate()
        self.process.wait(timeout=10)


def served_figures(which: str, calls: int) -> dict[str, float]:
    """RSS growth per call, full GET time and size, and a /step's wait during that GET."""
    with Served(which) as server, httpx.Client(base_url=server.url, timeout=600) as client:
        for _ in range(200):  # warm the code paths before the first reading
            client.post("/step", json=CALL_BODY)
        before = rss_kb(server.pid)
        cpu = process_cpu_seconds(server.pid)
        for _ in range(calls):
            client.post("/step", json=CALL_BODY)
        cpu_us = cpu_per_call_us(server.pid, cpu, calls)
        after = rss_kb(server.pid)
        start = time.perf_counter()
        full = client.get("/trajectory")
        get_s = time.perf_counter() - start
        assert int(full.headers["X-Trajectory-Total-Bytes"]) == len(full.content)

        # /step calls sent, one after another, for as long as another client's full GET
        # is being answered: the longest wait among them.
        waits: list[float] = []
        getter = threading.Thread(target=lambda: httpx.get(f"{server.url}/trajectory", timeout=600))
        with httpx.Client(base_url=server.url, timeout=600) as other:
            other.post("/step", json=CALL_BODY)
            getter.start()
            while getter.is_alive():
                t0 = time.perf_counter()
                other.post("/step", json=CALL_BODY)
                waits.append(time.perf_counter() - t0)
            getter.join()
    kb = (after - before) / calls if before is not None and after is not None else float("nan")
    return {
        "kb_per_call": kb,
        "cpu_us": float("nan") if cpu_us is None else cpu_us,
        "rss_mb": (after or 0) / 1024,
        "get_s": get_s,
        "get_mb": len(full.content) / 1e6,
        "step_wait_ms": max(waits) * 1e3,
    }


# -- 3: recording cost in-process -------------------------------------------------------------


def call_loop_us(cls: type, calls: int, per_instance: int, repeats: int) -> float:
    """CPU µs per `Gateway.call` with trajectories of class `cls` (best of `repeats`)."""
    gateway = Gateway(build_env(100))
    principal = Principal("agent")

    async def one() -> float:
        spent = 0.0
        done = 0
        while done < calls:
            inst = gateway.create_instance()
            inst.trajectory = cls()
            start = time.process_time()
            for _ in range(min(per_instance, calls - done)):
                await gateway.call(principal, "read_note", {"note_id": "n7"}, instance=inst.id)
            spent += time.process_time() - start
            done += per_instance
            gateway.drop_instance(inst.id)
        return spent / calls * 1e6

    return min(asyncio.run(one()) for _ in range(repeats))


def held_per_record(cls: type, calls: int) -> tuple[float, float]:
    """Bytes of memory and GC-tracked objects one record holds, in process: `calls` calls
    (fewer than the window, so nothing spills) on an instance with a trajectory of `cls`."""
    gateway = Gateway(build_env(100))
    principal = Principal("agent")
    inst = gateway.create_instance()
    inst.trajectory = cls()

    async def run(n: int) -> None:
        for _ in range(n):
            await gateway.call(principal, "read_note", {"note_id": "n7"}, instance=inst.id)

    asyncio.run(run(10))  # warm
    gc.collect()
    objects = len(gc.get_objects())
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    asyncio.run(run(calls))
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    tracked = len(gc.get_objects()) - objects
    return (after - before) / calls, tracked / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20,000 calls instead of 100,000")
    parser.add_argument("--serve", choices=["old", "new"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.serve:
        serve(opts.serve, opts.port)
        return
    calls = opts.calls or (20_000 if opts.quick else 100_000)
    loop_calls, repeats = (10_000, 3) if opts.quick else (50_000, 5)

    old = served_figures("old", calls)
    new = served_figures("new", calls)
    print(f"server RSS over {calls:,} POST /step calls:")
    print(f"  new trajectory: {new['kb_per_call']:6.3f} KB/call (RSS {new['rss_mb']:.0f} MB)")
    print(
        f"  baseline, old-style trajectory: {old['kb_per_call']:6.3f} KB/call (RSS {old['rss_mb']:.0f} MB)"
    )
    print(
        f"  server CPU per call: new {new['cpu_us']:.0f} µs; "
        f"baseline, old-style {old['cpu_us']:.0f} µs"
    )
    if new["kb_per_call"] > 0:
        print(f"  ratio old/new: {old['kb_per_call'] / new['kb_per_call']:.0f}x")
    print(f"full GET /trajectory ({new['get_mb']:.1f} MB):")
    print(
        f"  new: {new['get_s']:.2f} s; a /step meanwhile waited at most {new['step_wait_ms']:.0f} ms"
    )
    print(
        f"  baseline, old route: {old['get_s']:.2f} s; a /step meanwhile waited at most {old['step_wait_ms']:.0f} ms"
    )

    window = 1000  # below HOT_RECORDS: every record is in memory
    new_bytes, new_objects = held_per_record(Trajectory, window)
    old_bytes, old_objects = held_per_record(OldTrajectory, window)
    print(f"in process, what one record holds in memory ({window} read calls, none spilled):")
    print(
        f"  new trajectory: {new_bytes / 1024:.2f} KB, {new_objects:.2f} GC-tracked objects; "
        f"baseline, old-style: {old_bytes / 1024:.2f} KB, {old_objects:.2f} GC-tracked objects"
    )
    print("recording cost, in-process Gateway.call (read tool), CPU µs/call, best of", repeats)
    for label, per_instance in (
        ("short trajectories (500 calls)", 500),
        ("one long trajectory", loop_calls),
    ):
        pair = []
        for _ in range(2):  # interleave, so drift in machine load hits both alike
            pair.append(
                (
                    call_loop_us(OldTrajectory, loop_calls, per_instance, repeats),
                    call_loop_us(Trajectory, loop_calls, per_instance, repeats),
                )
            )
        base, ours = min(p[0] for p in pair), min(p[1] for p in pair)
        print(
            f"  {label}: {ours:6.2f} µs/call; baseline, old-style: {base:6.2f} µs/call; "
            f"ratio {ours / base:.2f} ({ours - base:+.2f} µs)"
        )


if __name__ == "__main__":
    main()
