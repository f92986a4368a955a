"""The trajectory: one append-only record per tool call, denial and trigger event.

These records are our own model (grading, exporters, rollouts and run folders read them).
`GET /trajectory` serves them rendered as upstream's events (`gateway.events`): a call
record becomes two events, every other record one. The trajectory numbers the events as
records are appended, so an event's id never depends on what a reader asked for.

Every record is readable: `append` makes its values JSON every reader can carry
(`gateway.sanitize`) and lists what it replaced in the record's `sanitized`.

Records are kept compactly, as rows (`gateway.rows`): one tuple of strings, numbers and
None per record, the arguments and result as their JSON text, times as integer
microseconds; the GC stops tracking a row at its first collection. Readers get
`TrajectoryRecord`s, built from the row on every read (equal, not the same object).

Memory is bounded: the newest rows stay in memory (at most `HOT_RECORDS`, and about
`HOT_BYTES` of values); older ones are written to an unnamed temporary file created the
first time a trajectory outgrows that (`gateway.spill`), and read back, a chunk at a time,
when asked for. Short trajectories (every rollout episode of ordinary length) never make a
file. docs/trajectory.md has the figures.
"""

from __future__ import annotations

import io
import json
import logging
import marshal
import pickle
import threading
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from datetime import UTC, datetime
from itertools import accumulate
from math import isfinite
from typing import IO, Any, overload

from agentenv.env.tool import Principal
from agentenv.gateway.record import (
    RECORD_ADAPTER,
    TrajectoryRecord,
    record,
    record_line,
)
from agentenv.gateway.rows import (
    _US,
    DETAIL,
    EPOCH,
    KIND,
    SEQ,
    Dirty,
    Row,
    clean_text,
    portable,
    row_line,
    row_of,
    time_of,
)
from agentenv.gateway.sanitize import ENCODE as _ENCODE
from agentenv.gateway.spill import SpillFile
from agentenv.spec.limits import raw_too_deep
from agentenv.spec.wire import CallError

HOT_RECORDS = 1024
"""A trajectory keeps at most this many of its newest records in memory."""
HOT_BYTES = 8 * 1024 * 1024
"""... and spills its oldest ones sooner when their values add up to about this much."""
_RECORD_BYTES = 400
"""About what a record costs in memory beyond its values' JSON size."""
_ARG_BYTES = 32
"""About what one flat argument costs in memory (a row keeps those as a dict)."""
_log = logging.getLogger(__name__)
_CACHED_CHUNKS = 2
"""Spilled chunks kept decoded, for readers that index back and forth (`GET /changes`)."""


_loads = json.loads
_UNSET: Any = object()


def _pack(rows: list[Row]) -> bytes:
    """Rows as a spill chunk: the list marshalled (rows hold only strings, numbers, None
    and tuples of them, which marshal writes several times faster than JSON, and faster
    than pickle; the file lives no longer than this process, so marshal's format, which
    may change between Python versions, is never read by another). A row marshal refuses
    (a time in some zone, a str subclass) makes the chunk a pickle; a time in a zone
    pickle refuses is written as its ISO text."""
    try:
        return marshal.dumps(rows)
    except ValueError:
        pass
    try:
        return pickle.dumps(rows, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return pickle.dumps(portable(rows), protocol=pickle.HIGHEST_PROTOCOL)


_PICKLE = pickle.PROTO[0]
"""The first byte of a pickle (protocol 2 and up); marshal's list begins otherwise."""


def _unpack(data: bytes) -> list[Row]:
    # Our own spill file, written by _pack.
    if data[0] == _PICKLE:
        return pickle.loads(data)  # type: ignore[no-any-return]
    return marshal.loads(data)  # type: ignore[no-any-return]


class Trajectory:
    """The records of one instance, in order. Append-only; safe to read from other threads
    (`GET /trajectory` renders in a worker thread) while the gateway appends."""

    __slots__ = (
        "__weakref__",
        "_cache",
        "_count",
        "_events",
        "_hot",
        "_hot_bytes",
        "_hot_events",
        "_hot_sizes",
        "_hot_start",
        "_lock",
        "_spill",
        "_spill_after",
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hot: list[Row] = []  # rows of records _hot_start.. (new lists on a spill)
        self._hot_events = array("q")  # the first event number of each
        self._hot_sizes = array("q")  # about what each costs in memory
        self._hot_start = 0
        self._hot_bytes = 0
        self._count = 0
        self._events = 0
        self._spill: SpillFile | None = None
        self._spill_after = 0  # after a failed spill: the window length of the next try
        self._cache: dict[int, tuple[list[Row], list[int]]] = {}

    def append(self, *, result_text: str | None = None, **fields: Any) -> TrajectoryRecord:
        """Add a record; the record as a reader will read it back. The gateway built the
        fields (no validation), but their values came from callers and tools: whatever JSON
        cannot carry is replaced and noted in `sanitized` (`gateway.sanitize`).

        `result_text` is accepted for callers that have the result's text at hand; the row
        keeps the result's JSON either way."""
        row, size = row_of(0, fields)
        return record(self._add(row, size))

    def add_call(
        self,
        kind: str,
        wall_us: int,
        virtual_time: datetime | None,
        principal: Principal,
        tool: str,
        args: dict[str, Any],
        result_json: str | None,
        error: CallError | None,
        denied: bool,
        state_hash: str,
        changelog_id: int,
        before: int | None,
        duration_ms: float,
        session: str | None = None,
        trigger_id: str | None = None,
        virtual_slot: Any = _UNSET,
        flat: bool = False,
        detail: str | None = None,
    ) -> int:
        """Add a call record, the gateway's hot path; its seq. `wall_us` is the wall time in
        microseconds since the epoch; `result_json` the result's JSON text, already proven
        clean (`gateway.results.encode_result`), or None for none; `virtual_slot`, when
        given, `virtual_time` as a row keeps it (`rows.micros`; the clock has it at hand).
        `flat` says the arguments passed the fast argument check whole (`env.fast_args`:
        string keys, values exactly str, int, float, bool or None): the row then keeps a
        one-level copy, history no one can edit, instead of their JSON text (a reader gets
        a copy of it, equal to what the JSON would give).
        `detail` is the record's `detail`: for a call whose tool crashed, its traceback.
        Anything else that needs cleaning takes `append`'s way."""
        role, name = principal.role, principal.name
        try:
            text: Any
            if flat:
                text = dict(args)
                size = _RECORD_BYTES + _ARG_BYTES * len(text)
                for key, value in text.items():
                    if type(value) is str:
                        if not value.isascii():
                            clean_text(value)
                    elif type(value) is float and not isfinite(value):
                        raise Dirty
                    if not key.isascii():
                        clean_text(key)
                if not (tool.isascii() and role.isascii()):
                    clean_text(tool)
                    clean_text(role)
            else:
                chunks = _ENCODE(args, 0)
                text = chunks[0] if len(chunks) == 1 else "".join(chunks)
                size = len(text) + _RECORD_BYTES
                if not (text.isascii() and tool.isascii() and role.isascii()):
                    for value in (text, tool, role):
                        clean_text(value)
                if raw_too_deep(text):
                    raise Dirty
            if name is not None and not name.isascii():
                clean_text(name)
            if session is not None and not session.isascii():
                clean_text(session)
            if error is not None and not error.message.isascii():
                clean_text(error.message)
            if detail is not None and not detail.isascii():
                clean_text(detail)
        except (Dirty, ValueError, TypeError, RecursionError, AttributeError):
            fields = {
                "kind": kind,
                "wall_time": time_of(wall_us),
                "virtual_time": virtual_time,
                "role": role,
                "principal": name,
                "session": session,
                "tool": tool,
                "args": args,
                "result": None if result_json is None else _loads(result_json),
                "error": error,
                "denied": denied,
                "state_hash": state_hash,
                "changelog_id": changelog_id,
                "changelog_id_before": before,
                "duration_ms": duration_ms,
                "trigger_id": trigger_id,
                "detail": detail,
            }
            row, size = row_of(0, fields)
            return self._add(row, size)[SEQ]  # type: ignore[no-any-return]
        slot: Any = virtual_slot
        if slot is _UNSET:
            slot = virtual_time
            if virtual_time is not None and virtual_time.tzinfo is UTC:
                slot = (virtual_time - EPOCH) // _US  # as `rows.micros`, inline
        if result_json:
            size += len(result_json)
        if detail:
            size += len(detail)
        error_kind = error_message = None
        if error is not None:
            error_kind, error_message = error.kind, error.message
        with self._lock:  # `_keep`, inline
            seq = self._count
            hot = self._hot
            hot.append(
                (
                    seq, kind, wall_us, state_hash, changelog_id, before, slot, role, name,
                    session, tool, text, result_json, error_kind, error_message, denied,
                    duration_ms, trigger_id, None, detail, None,
                )
            )  # fmt: skip
            self._hot_events.append(self._events)
            self._hot_sizes.append(size)
            self._hot_bytes += size
            self._events += 2 if kind == "call" else 1
            self._count = seq + 1
            if (len(hot) >= HOT_RECORDS or self._hot_bytes >= HOT_BYTES) and len(
                hot
            ) >= self._spill_after:
                self._spill_oldest()
        return seq

    def _add(self, row: Row, size: int) -> Row:
        """Number a row (its seq slot) and keep it; the numbered row."""
        with self._lock:
            row = (self._count, *row[1:])
            self._keep(row, size + _RECORD_BYTES)
        return row

    def _keep(self, row: Row, size: int) -> None:
        """Keep the next row (numbered `self._count`). Called with the lock held."""
        self._hot.append(row)
        self._hot_events.append(self._events)
        self._hot_sizes.append(size)
        self._hot_bytes += size
        self._events += 2 if row[KIND] == "call" else 1
        self._count += 1
        if (len(self._hot) >= HOT_RECORDS or self._hot_bytes >= HOT_BYTES) and len(
            self._hot
        ) >= self._spill_after:
            self._spill_oldest()

    def _spill_oldest(self) -> None:
        """Move the oldest in-memory records to the spill file, until at most half of each
        bound is held (at least one record moves). Called with the lock held."""
        hot, sizes = self._hot, self._hot_sizes
        # The fewest oldest records (at least one) whose moving leaves at most half of
        # each bound, found with sums and a bisection made in C, not a loop per record.
        sums = list(accumulate(sizes))
        by_bytes = bisect_left(sums, self._hot_bytes - HOT_BYTES // 2) + 1
        count = min(len(hot), max(1, len(hot) - HOT_RECORDS // 2, by_bytes))
        held = self._hot_bytes - sums[count - 1]
        try:
            if self._spill is None:
                self._spill = SpillFile()
            self._spill.add(
                _pack(hot[:count]),
                count=count,
                first_seq=self._hot_start,
                first_event=self._hot_events[0],
            )
        except OSError as exc:
            # No room on disk, say: the records stay in memory, the call goes on, and the
            # next try waits until the window has doubled.
            self._spill_after = 2 * len(hot)
            _log.warning("trajectory records stay in memory: cannot spill them (%s)", exc)
            return
        # New lists, not in-place deletes: a reader holding the old ones still reads them whole.
        self._hot = hot[count:]
        self._hot_events = self._hot_events[count:]
        self._hot_sizes = sizes[count:]
        self._hot_bytes = held
        self._hot_start += count
        self._spill_after = 0

    # -- reading ------------------------------------------------------------------------------

    @property
    def event_count(self) -> int:
        """How many wire events the records render to (see `events_of`)."""
        return self._events

    @property
    def spilled(self) -> int:
        """How many of the oldest records are held on disk, not in memory."""
        return self._hot_start

    def _view(self) -> tuple[int, list[Row], array[int]]:
        with self._lock:
            return self._hot_start, self._hot, self._hot_events

    def _chunk(self, index: int, *, keep: bool = True) -> tuple[list[Row], list[int]]:
        """The rows of spilled chunk `index`, decoded, and each one's first event."""
        cached = self._cache.get(index)
        if cached is not None:
            return cached
        assert self._spill is not None
        spill = self._spill
        rows = _unpack(spill.read(index))
        firsts: list[int] = []
        number = spill.first_event[index]
        for row in rows:
            firsts.append(number)
            number += 2 if row[KIND] == "call" else 1
        if keep:
            with self._lock:
                while len(self._cache) >= _CACHED_CHUNKS:
                    del self._cache[next(iter(self._cache))]
                self._cache[index] = (rows, firsts)
        return rows, firsts

    def _locate(self, seq: int) -> tuple[Row, int]:
        """Record `seq`'s row (0 <= seq < len) and its first event number."""
        start, hot, hot_events = self._view()
        if seq >= start:
            return hot[seq - start], hot_events[seq - start]
        assert self._spill is not None
        index = self._spill.chunk_of(seq)
        records, firsts = self._chunk(index)
        offset = seq - self._spill.first_seq[index]
        return records[offset], firsts[offset]

    def _index(self, index: int) -> int:
        count = self._count
        seq = index + count if index < 0 else index
        if not 0 <= seq < count:
            raise IndexError(f"trajectory index {index} out of range ({count} records)")
        return seq

    def first_event(self, seq: int) -> int:
        """How many wire events come before record `seq`'s first one."""
        return self._locate(self._index(seq))[1]

    def record_at_event(self, event: int) -> int:
        """The seq of the record whose events hold event number `event` (0-based); the
        record count when `event` is past the end."""
        if event >= self._events:
            return len(self)
        if event < 0:
            return -1
        start, hot, hot_events = self._view()
        if hot and event >= hot_events[0]:
            return start + bisect_right(hot_events, event) - 1
        assert self._spill is not None
        index = self._spill.chunk_of_event(event)
        _, firsts = self._chunk(index)
        return self._spill.first_seq[index] + bisect_right(firsts, event) - 1

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[TrajectoryRecord]:
        return self.records()

    @overload
    def __getitem__(self, index: int) -> TrajectoryRecord: ...
    @overload
    def __getitem__(self, index: slice) -> list[TrajectoryRecord]: ...
    def __getitem__(self, index: int | slice) -> TrajectoryRecord | list[TrajectoryRecord]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return list(self.records(start, stop))
            return [self[i] for i in range(start, stop, step)]
        return record(self._locate(self._index(index))[0])

    def records(self, start: int = 0, stop: int | None = None) -> Iterator[TrajectoryRecord]:
        """The records `start` to `stop` (the end as it is when iteration begins), in order,
        read back a chunk at a time where they were spilled."""
        return map(record, self._rows(start, stop))

    def _rows(self, start: int = 0, stop: int | None = None) -> Iterator[Row]:
        stop = len(self) if stop is None else min(stop, len(self))
        seq = max(start, 0)
        while seq < stop:
            hot_start, hot, _ = self._view()
            if seq >= hot_start:
                yield from hot[seq - hot_start : stop - hot_start]
                return
            assert self._spill is not None
            index = self._spill.chunk_of(seq)
            first = self._spill.first_seq[index]
            rows, _ = self._chunk(index, keep=False)
            yield from rows[seq - first : stop - first]
            seq = first + len(rows)

    def since(self, seq: int = 0) -> list[TrajectoryRecord]:
        """The records from `seq` on."""
        return list(self.records(seq if seq >= 0 else max(len(self) + seq, 0)))

    def calls(self) -> list[TrajectoryRecord]:
        """Only the tool-call records (denied ones included)."""
        return [r for r in self.records() if r.kind == "call"]

    def write_jsonl(
        self, out: IO[bytes], start: int = 0, stop: int | None = None, *, traces: bool = True
    ) -> int:
        """Write records `start` to `stop` as JSON lines to `out`; the bytes written.
        `traces=False` leaves out the tracebacks of crashed tools (a call record's
        `detail`): what a server answers its clients, agents among them."""
        written = 0
        batch: list[bytes] = []
        for row in self._rows(start, stop):
            if not traces and row[DETAIL] is not None and row[KIND] == "call":
                row = (*row[:DETAIL], None, *row[DETAIL + 1 :])
            # Straight from the row where that is byte-exact (nearly always), else the record.
            batch.append(row_line(row) or record_line(record(row)))
            if len(batch) >= 256:
                written += out.write(b"".join(batch))
                batch.clear()
        return written + out.write(b"".join(batch))

    def to_jsonl(self, since: int = 0) -> str:
        """The records as JSON lines."""
        out = io.BytesIO()
        self.write_jsonl(out, since)
        return out.getvalue().decode()

    def close(self) -> None:
        """Drop the spill file now (it goes anyway when the trajectory is collected);
        spilled records cannot be read afterwards."""
        if self._spill is not None:
            self._spill.close()

    @staticmethod
    def read_jsonl(text: str) -> list[TrajectoryRecord]:
        """Parse JSONL written by `to_jsonl`."""
        # "\n" only: str.splitlines also splits at U+2028 and kin, which JSON text keeps raw.
        return [RECORD_ADAPTER.validate_json(x) for x in text.split("\n") if x.strip()]
