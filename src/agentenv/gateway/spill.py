"""Where a long trajectory keeps its older records: a temporary file of chunks.

The trajectory packs each chunk (pickled columns: a spill happens on the call path every
few hundred calls, and pickling costs several times less than JSON; reading, rare, pays the
JSON). The file is ours alone (created 0600 by `tempfile`, never named to anyone), so
loading it back is loading what this process wrote.

The file is unnamed (`tempfile.TemporaryFile`: unlinked at once on POSIX), so it goes when
the trajectory is collected or the process ends, even by SIGKILL, and nothing is left on
disk. It is written in chunks (one per spill, a few hundred records); the index keeps, per
chunk, its first record's seq, its first event's number, and where its bytes lie: a few
dozen bytes per chunk, so a trajectory of millions of records holds kilobytes of index.
Reads and writes are serialised by one lock (a chunk is read whole, a few hundred KB), and
name their offsets (`os.pread`/`os.pwrite` where the OS has them), so a forked child that
inherited the file cannot move a shared file position under the parent. A child's first
spill copies the file into one of its own, so parent and child never write at the same
offsets of one shared file.
"""

from __future__ import annotations

import os
import tempfile
import threading
from array import array
from bisect import bisect_right
from typing import IO

SPILL_PREFIX = "agentenv-trajectory-"


class SpillFile:
    """The spilled chunks of one trajectory, in order; append-only."""

    __slots__ = (
        "_file",
        "_io",
        "_pid",
        "end",
        "first_event",
        "first_seq",
        "offset",
        "size",
        "stop_seq",
    )

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix=SPILL_PREFIX)  # noqa: SIM115 - held for life
        self._io = threading.Lock()
        self._pid = os.getpid()
        self.size = 0
        self.first_seq = array("q")
        """Per chunk: the seq of its first record."""
        self.stop_seq = array("q")
        """Per chunk: the seq after its last record."""
        self.first_event = array("q")
        """Per chunk: the number of its first record's first event."""
        self.offset = array("q")
        """Per chunk: where its bytes start in the file."""
        self.end = array("q")
        """Per chunk: where its bytes end."""

    def add(self, lines: bytes, *, count: int, first_seq: int, first_event: int) -> None:
        """Append one chunk: the `count` records from `first_seq` on, as the trajectory
        packed them."""
        if self._pid != os.getpid():
            self._own_copy()
        with self._io:
            _write_at(self._file, lines, self.size)
        self.offset.append(self.size)
        self.end.append(self.size + len(lines))
        self.first_event.append(first_event)
        self.stop_seq.append(first_seq + count)
        self.first_seq.append(first_seq)  # last: a chunk is visible once it is whole
        self.size += len(lines)

    def chunk_of(self, seq: int) -> int:
        """The chunk that holds record `seq` (which must be spilled)."""
        return bisect_right(self.first_seq, seq) - 1

    def chunk_of_event(self, event: int) -> int:
        """The chunk whose records render event number `event` (which must be spilled)."""
        return bisect_right(self.first_event, event, hi=len(self.first_seq)) - 1

    def end_seq(self, index: int) -> int:
        """The seq after chunk `index`'s last record."""
        return self.stop_seq[index]

    def read(self, index: int) -> bytes:
        """Chunk `index`'s bytes, as `add` got them."""
        start, end = self.offset[index], self.end[index]
        with self._io:
            data = _read_at(self._file, start, end - start)
        return data

    def _own_copy(self) -> None:
        # In a forked child: the inherited file is the parent's too, and both would append
        # at the same offsets. Copy what the child knows of into a file of its own. The
        # lock is new as well: another thread of the parent may have held it at the fork.
        copy = tempfile.TemporaryFile(prefix=SPILL_PREFIX)  # noqa: SIM115 - held for life
        done = 0
        while done < self.size:
            part = _read_at(self._file, done, min(self.size - done, 1 << 20))
            _write_at(copy, part, done)
            done += len(part)
        self._file, self._io, self._pid = copy, threading.Lock(), os.getpid()

    def close(self) -> None:
        """Remove the file now."""
        with self._io:
            self._file.close()


def _write_at(file: IO[bytes], data: bytes, offset: int) -> None:
    if hasattr(os, "pwrite"):
        view = memoryview(data)
        while view:
            done = os.pwrite(file.fileno(), view, offset)
            view, offset = view[done:], offset + done
        return
    file.seek(offset)
    file.write(data)
    file.flush()


def _read_at(file: IO[bytes], offset: int, size: int) -> bytes:
    if hasattr(os, "pread"):
        parts = []
        while size > 0:
            part = os.pread(file.fileno(), size, offset)
            if not part:
                raise OSError(f"the trajectory spill file ends before byte {offset + size}")
            parts.append(part)
            offset, size = offset + len(part), size - len(part)
        return b"".join(parts)
    file.seek(offset)
    return file.read(size)
