"""CPU time of a server process, so a wire benchmark can say what each call cost the server.

Throughput alone can hide a client-bound run: when the client burns more CPU per call than
the server, both servers look alike. CPU seconds per call of the server process, read from
/proc, are beside every calls/s figure. Linux only; elsewhere the figure is left out.
"""

from __future__ import annotations

import os
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def process_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds the process has used so far (None where /proc is absent)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICK


def cpu_per_call_us(pid: int, before: float | None, calls: int) -> float | None:
    """Microseconds of server CPU per call since `before`."""
    after = process_cpu_seconds(pid)
    if before is None or after is None:
        return None
    return (after - before) / calls * 1e6


def describe(cpu_us: list[float | None]) -> str:
    """`, server CPU 123 µs/call` (the median), or nothing where it was not measured."""
    known = sorted(v for v in cpu_us if v is not None)
    return f", server CPU {known[len(known) // 2]:.0f} µs/call" if known else ""
