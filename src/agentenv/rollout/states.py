"""A run folder's `states.jsonl`: each finished episode's final state, one line each
(`{"episode_id": ..., "state": {env id: {collection: [records]}}}`), the last line of an id
winning.

Reading one state must not scan the whole file (a caller asking for every episode's state
in turn would read it once per episode). `StatesFile` keeps an index of where each id's
last line lies, built once and extended by the lines appended since (it is rebuilt when the
file was replaced or cut), so a lookup is a stat, at most a read of the new lines, and one
read of the line itself.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic_core import to_json

# What `write` puts first on a line; a line that does not start so is parsed whole.
_PREFIX = re.compile(rb'^\{"episode_id":("(?:[^"\\]|\\.)*")')


def _id_of(line: bytes) -> str | None:
    match = _PREFIX.match(line)
    if match is not None:
        try:
            return str(json.loads(match.group(1)))
        except ValueError:
            return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if isinstance(data, dict) and isinstance(data.get("episode_id"), str):
        return data["episode_id"]
    return None


def _parse(line: bytes) -> dict[str, Any] | None:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):  # a line cut short by a kill
        return None
    return data if isinstance(data, dict) and isinstance(data.get("episode_id"), str) else None


class StatesFile:
    """One `states.jsonl`: append states (`write`), read one by episode id (`read`), or
    walk them all (`states`). One writer at a time (the run folder's lock holder)."""

    def __init__(self, path: Path, *, fsync: bool = False) -> None:
        self.path = path
        self.fsync = fsync
        self._fd: int | None = None
        self._index: dict[str, tuple[int, int]] = {}  # id -> (offset, length) of its last line
        self._indexed = 0  # bytes of whole lines read into the index
        self._identity: tuple[int, int] | None = None  # (device, inode) of the file indexed

    # -- writing ---------------------------------------------------------------------------

    def write(self, episode_id: str, state: dict[str, Any]) -> None:
        """Append one line; with `fsync`, flushed to the disk before returning."""
        if self._fd is None:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                _cut_partial_line(fd)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
        line = to_json({"episode_id": episode_id, "state": state}, fallback=str) + b"\n"
        view = memoryview(line)  # compact JSON made in Rust, one write: this is per episode
        while view:
            view = view[os.write(self._fd, view) :]
        if self.fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        """Close the file written to (reading needs no closing)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- reading ---------------------------------------------------------------------------

    def read(self, episode_id: str) -> dict[str, Any] | None:
        """The last state kept for `episode_id`, or None."""
        self._refresh()
        at = self._index.get(episode_id)
        if at is None:
            return None
        with self.path.open("rb") as f:
            data = _line_at(f, *at)
        if data is not None and data["episode_id"] == episode_id:
            return data.get("state")
        return self._scan(episode_id)  # its last line is broken: an earlier one may do

    def states(self, *, latest: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
        """(episode id, state) for every state kept, in file order; with `latest`, only the
        last line of each id (where that line stands). Broken lines are skipped."""
        if not latest:
            for line in self._whole_lines():
                data = _parse(line)
                if data is not None:
                    yield data["episode_id"], data.get("state") or {}
            return
        self._refresh()
        places = sorted(self._index.items(), key=lambda item: item[1][0])
        if not places:
            return
        with self.path.open("rb") as f:
            for episode_id, (offset, length) in places:
                data = _line_at(f, offset, length)
                if data is not None and data["episode_id"] == episode_id:
                    yield episode_id, data.get("state") or {}
                else:
                    state = self._scan(episode_id)
                    if state is not None:
                        yield episode_id, state

    def _refresh(self) -> None:
        """Bring the index up to the file's whole lines (from scratch if it was replaced
        or is shorter than what was indexed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            self._index, self._indexed, self._identity = {}, 0, None
            return
        identity = (st.st_dev, st.st_ino)
        if identity != self._identity or st.st_size < self._indexed:
            self._index, self._indexed, self._identity = {}, 0, identity
        if st.st_size == self._indexed:
            return
        with self.path.open("rb") as f:
            f.seek(self._indexed)
            offset = self._indexed
            for line in f:
                if not line.endswith(b"\n"):
                    break  # a line being written, or cut short by a kill: not yet
                episode_id = _id_of(line)
                if episode_id is not None:
                    self._index[episode_id] = (offset, len(line))
                offset += len(line)
        self._indexed = offset

    def _whole_lines(self) -> Iterator[bytes]:
        if not self.path.is_file():
            return
        with self.path.open("rb") as f:
            for line in f:
                if line.endswith(b"\n"):
                    yield line

    def _scan(self, episode_id: str) -> dict[str, Any] | None:
        found = None
        for line in self._whole_lines():
            data = _parse(line)
            if data is not None and data["episode_id"] == episode_id:
                found = data.get("state")
        return found


def _line_at(f: Any, offset: int, length: int) -> dict[str, Any] | None:
    f.seek(offset)
    return _parse(f.read(length))


def _cut_partial_line(fd: int) -> None:
    """Cut a last line without its newline (left by a run killed while writing it: its
    episode has no record and runs again), so the next line does not join it."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    end = size
    keep = 0
    while end > 0:  # the last newline, reading backwards
        start = max(0, end - 65536)
        at = os.pread(fd, end - start, start).rfind(b"\n")
        if at >= 0:
            keep = start + at + 1
            break
        end = start
    os.ftruncate(fd, keep)
