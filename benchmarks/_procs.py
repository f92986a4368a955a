"""Process-tree and memory figures from /proc, for benchmarks that start server processes.

The SDK's stdio client does not say which process it started, so a benchmark finds a
server by difference: the descendants of a process after a start, less those before.
Memory is read two ways: RSS (what `ps` shows; pages shared between Python processes, the
interpreter and libraries, are counted in each) and PSS (shared pages split between their
sharers: what one more process really costs). Linux only; elsewhere the figures are None.
"""

from __future__ import annotations

import os
from pathlib import Path


def _parent(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2 :].split()[1])  # the name may hold spaces


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, grandchildren, ...)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if entry.isdigit():
            parent = _parent(int(entry))
            if parent is not None:
                parents.setdefault(parent, []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        below = parents.get(todo.pop(), [])
        found.extend(below)
        todo.extend(below)
    return found


def _field_kb(path: str, name: str) -> int | None:
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def rss_kb(pid: int) -> int | None:
    """The process's resident set, kB."""
    return _field_kb(f"/proc/{pid}/status", "VmRSS:")


def pss_kb(pid: int) -> int | None:
    """The process's proportional set (shared pages split between sharers), kB."""
    return _field_kb(f"/proc/{pid}/smaps_rollup", "Pss:")


def total_kb(pids: list[int], measure: object = rss_kb) -> int:
    """The sum of `measure` (rss_kb or pss_kb) over the processes still alive."""
    return sum(v for v in (measure(p) for p in pids) if v is not None)  # type: ignore[operator]


def load_average() -> str:
    """`load 0.12 / 0.30 / 0.25 (1/5/15 min), 2 cores`, for the line beside the figures."""
    try:
        one, five, fifteen = os.getloadavg()
    except OSError:
        return "load unknown"
    return f"load {one:.2f} / {five:.2f} / {fifteen:.2f} (1/5/15 min), {os.cpu_count()} cores"
