"""The results store: a run folder with one append-only JSONL file of episode records.

    runs/r1/
      plan.json        the plan the folder was last run with (tasks, agents, seeds, repeats)
      episodes.jsonl   one line per finished episode (an EpisodeRecord)

Crash safety: a record is written with one `write()` of one whole line on a file opened
for appending, only once its episode has finished, so a SIGKILL at any point leaves every
finished record intact and loses at most the episodes in flight. A kill in the middle of a
write can leave a partial last line: readers skip it with a warning, and opening the store
for writing cuts it off (also with a warning) before anything is appended, so it never
corrupts the next record. One writer at a time holds an exclusive lock on the file; the
lock dies with its process. `fsync=True` also survives power loss, at a cost per record.

Reading keeps the last record of each episode id, so a retried episode (`retry_errors`)
replaces its earlier error record.
"""

from __future__ import annotations

import json
import os
import re
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentenv.grading.score import Score

try:  # POSIX: one writer at a time
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

FORMAT = 1
EPISODES_FILE = "episodes.jsonl"
PLAN_FILE = "plan.json"

EpisodeStatus = Literal["passed", "failed", "error", "timeout"]
FINISHED_OK: tuple[str, ...] = ("passed", "failed")
"""Statuses of episodes that ran to the end (the others are errors and timeouts)."""

_PREFIX = re.compile(rb'^\{"episode_id":"([^"]+)","status":"([a-z]+)"')


class StoreError(Exception):
    """A run folder that cannot be used."""


class StoreLocked(StoreError):
    """Another process is writing to this run folder."""


class CorruptRecordWarning(UserWarning):
    """A line of episodes.jsonl that is not a whole record (skipped)."""


class PromptEntry(BaseModel):
    """One prompt an agent answered during the episode."""

    prompt_id: str
    agent_name: str
    role: str | None = None
    env_ids: list[str] = Field(default_factory=list)
    system_prompt: str | None = None
    prompt: str
    response: str | None = None
    error: str | None = None
    model: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    start_seq: dict[str, int] = Field(default_factory=dict)
    end_seq: dict[str, int] = Field(default_factory=dict)
    messages: list[dict[str, Any]] = Field(
        default_factory=list, description="A conversation with a simulated user: both sides."
    )


class EpisodeRecord(BaseModel):
    """Everything kept about one episode; one line of episodes.jsonl.

    `trajectory` holds every deployed environment's trajectory records (as `GET
    /trajectory?format=records` gives them) with the `env_id` added; `prompts` says which slice of it
    belongs to which prompt (`start_seq`/`end_seq` per env, and the record's `session`
    is the prompt id); `tools` lists, per agent, the tools it was offered (name,
    description, input schema). `usage` sums the token counters of the episode
    (`prompt_tokens`, `completion_tokens`, ...): what `prompt_agent` recorded per agent
    turn (kept whole in `usage_by_prompt`), else what each agent reports in its own
    `usage`; it is empty for agents that report none.
    """

    model_config = ConfigDict(extra="allow")

    episode_id: str
    status: EpisodeStatus
    task: str
    agent: str
    seed: dict[str, Any] = Field(default_factory=dict)
    repeat: int = 0
    passed: bool = False
    score: float | None = None
    scores: dict[str, Score] = Field(default_factory=dict)
    error: str | None = None
    started_at: datetime
    ended_at: datetime
    duration_s: float
    calls: int = 0
    usage: dict[str, int | float] = Field(default_factory=dict)
    usage_by_prompt: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    steps: list[dict[str, Any]] = Field(default_factory=list)
    prompts: list[PromptEntry] = Field(default_factory=list)
    tools: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    trajectory: list[dict[str, Any]] = Field(default_factory=list)
    worker: str | None = None
    format: int = FORMAT

    @property
    def finished(self) -> bool:
        """Whether the episode ran to the end (passed or failed, not error or timeout)."""
        return self.status in FINISHED_OK

    def reward(self) -> float:
        """The episode's final reward: its score; 1.0/0.0 by `passed` when no verifier
        scored it; 0.0 for errors and timeouts."""
        if self.status not in FINISHED_OK:
            return 0.0
        if self.score is None:
            return 1.0 if self.passed else 0.0
        return float(self.score)


class RolloutStore:
    """A run folder: write records as episodes finish, read them back."""

    def __init__(self, folder: str | Path, *, fsync: bool = False) -> None:
        self.folder = Path(folder)
        self.path = self.folder / EPISODES_FILE
        self.fsync = fsync
        self._fd: int | None = None

    # -- writing ---------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        """Whether this store is open for writing."""
        return self._fd is not None

    def open(self) -> RolloutStore:
        """Open for appending: create the folder, take the lock, cut a partial last line."""
        if self._fd is not None:
            return self
        if self.folder.exists() and not self.folder.is_dir():
            raise StoreError(f"{self.folder} is not a folder")
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise StoreLocked(
                    f"another process is writing to {self.folder} (wait for it, or use "
                    "another --out)"
                ) from None
        try:
            self._repair(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return self

    def _repair(self, fd: int) -> None:
        size = os.fstat(fd).st_size
        if size == 0:
            return
        if os.pread(fd, 1, size - 1) == b"\n":
            return
        end = size
        keep = 0
        while end > 0:  # find the last newline, reading backwards
            start = max(0, end - 65536)
            chunk = os.pread(fd, end - start, start)
            at = chunk.rfind(b"\n")
            if at >= 0:
                keep = start + at + 1
                break
            end = start
        os.ftruncate(fd, keep)
        warnings.warn(
            f"{self.path}: dropped a partial record at the end ({size - keep} bytes), left "
            "by a run that was killed while writing; that episode will run again",
            CorruptRecordWarning,
            stacklevel=3,
        )

    def append(self, record: EpisodeRecord) -> None:
        """Write one record (a whole line, one write)."""
        self.append_line(record.model_dump_json())

    def append_line(self, line: str) -> None:
        """Write one record already serialised as JSON (no newline inside)."""
        if self._fd is None:
            raise StoreError("the store is not open for writing (call open())")
        data = (line.rstrip("\n") + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        if self.fsync:
            os.fsync(self._fd)

    def close(self) -> None:
        """Release the lock and the file."""
        if self._fd is not None:
            if self.fsync:
                os.fsync(self._fd)
            os.close(self._fd)  # closing drops the flock
            self._fd = None

    def __enter__(self) -> RolloutStore:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def write_plan(self, plan: dict[str, Any]) -> None:
        """Write plan.json (atomically: a temporary file renamed over it)."""
        from agentenv import __version__

        self.folder.mkdir(parents=True, exist_ok=True)
        data = {**plan, "written_at": datetime.now(UTC).isoformat(), "agentenv": __version__}
        tmp = self.folder / f".{PLAN_FILE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        os.replace(tmp, self.folder / PLAN_FILE)

    def read_plan(self) -> dict[str, Any] | None:
        """plan.json, or None."""
        path = self.folder / PLAN_FILE
        if not path.is_file():
            return None
        return json.loads(path.read_text(encoding="utf-8"))

    # -- reading ---------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the folder holds an episodes file."""
        return self.path.is_file()

    def _lines(self) -> Iterator[tuple[int, bytes]]:
        """(line number, line) for every whole line; a partial last line is skipped with
        a warning."""
        if not self.path.is_file():
            return
        with self.path.open("rb") as f:
            number = 0
            for number, line in enumerate(f, 1):
                if not line.endswith(b"\n"):
                    warnings.warn(
                        f"{self.path}:{number}: skipped a partial record at the end "
                        "(a run killed while writing, or one still writing)",
                        CorruptRecordWarning,
                        stacklevel=3,
                    )
                    return
                if line.strip():
                    yield number, line

    def raw_records(self, *, latest: bool = True) -> Iterator[dict[str, Any]]:
        """Every record as JSON data, in file order; with `latest`, only the last record
        of each episode id. Lines that are not records are skipped with a warning."""
        wanted: set[int] | None = None
        if latest:
            last: dict[str, int] = {}
            duplicates = False
            with warnings.catch_warnings():  # the second pass warns
                warnings.simplefilter("ignore", CorruptRecordWarning)
                for number, line in self._lines():
                    key = _id_of(line)
                    if key is None:
                        continue
                    duplicates = duplicates or key in last
                    last[key] = number
            wanted = set(last.values()) if duplicates else None
        for number, line in self._lines():
            if wanted is not None and number not in wanted:
                continue
            data = self._parse(number, line)
            if data is not None:
                yield data

    def _parse(self, number: int, line: bytes) -> dict[str, Any] | None:
        try:
            data = json.loads(line)
        except ValueError as exc:
            warnings.warn(
                f"{self.path}:{number}: skipped a line that is not JSON ({exc})",
                CorruptRecordWarning,
                stacklevel=4,
            )
            return None
        if not isinstance(data, dict) or "episode_id" not in data or "status" not in data:
            warnings.warn(
                f"{self.path}:{number}: skipped a line that is not an episode record",
                CorruptRecordWarning,
                stacklevel=4,
            )
            return None
        return data

    def records(self, *, latest: bool = True) -> Iterator[EpisodeRecord]:
        """Every record (see `raw_records`), as EpisodeRecords."""
        for data in self.raw_records(latest=latest):
            yield EpisodeRecord.model_validate(data)

    def statuses(self) -> dict[str, str]:
        """Episode id -> status of its last record (every line checked to be whole JSON)."""
        out: dict[str, str] = {}
        for number, line in self._lines():
            data = self._parse(number, line)
            if data is not None:
                out[str(data["episode_id"])] = str(data["status"])
        return out

    def done_ids(self, *, retry_errors: bool = False) -> set[str]:
        """Ids of episodes that need not run again (with `retry_errors`, errors and
        timeouts are not done)."""
        return {
            key
            for key, status in self.statuses().items()
            if not retry_errors or status in FINISHED_OK
        }

    def __len__(self) -> int:
        return len(self.statuses())


def _id_of(line: bytes) -> str | None:
    match = _PREFIX.match(line)
    if match is not None:
        return match.group(1).decode()
    try:
        data = json.loads(line)
    except ValueError:
        return None
    return str(data.get("episode_id")) if isinstance(data, dict) else None
