"""The results store: a run folder with one append-only JSONL file of episode records.

    runs/r1/
      plan.json        the plan the folder was last run with (tasks, agents, seeds, repeats)
      episodes.jsonl   one line per finished episode (an EpisodeRecord)
      states.jsonl     per finished episode, what each environment ended as (a line of
                       `episode_id` and `state`: env id -> records by collection), when
                       the runner was asked to keep states (`agent-env run` does)

Crash safety: a record is written with one `write()` of one whole line on a file opened
for appending, only once its episode has finished, so a SIGKILL at any point leaves every
finished record intact and loses at most the episodes in flight. A kill in the middle of a
write can leave a partial last line: readers skip it with a warning, and opening the store
for writing cuts it off (also with a warning) before anything is appended, so it never
corrupts the next record. One writer at a time holds an exclusive lock on the file; the
lock dies with its process. `fsync=True` also survives power loss, at a cost per record.

Reading keeps the last record of each episode id, so a retried episode (`retry_errors`)
replaces its earlier error record.

A record that cannot be serialised (a lone surrogate, nesting past what the serialiser
follows, a value that is not JSON, anywhere in it) is never written half: it is
serialised whole before anything is appended, and when that fails a small stand-in is
written instead, the episode as an `error` whose reason names what failed and where
(`record not serialisable: a lone surrogate U+D800 at prompts[0].response ...`). Reading
skips, with a warning, lines that are not JSON, nest too deep to parse, or are not records
of this version, so no line of a store can stop a resume, a report or an export.
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
from agentenv.rollout.jsonsafe import describe_problem, error_text, safe_text
from agentenv.rollout.states import StatesFile

try:  # POSIX: one writer at a time
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

FORMAT = 1
EPISODES_FILE = "episodes.jsonl"
PLAN_FILE = "plan.json"
STATES_FILE = "states.jsonl"

EpisodeStatus = Literal["passed", "failed", "error", "timeout"]
FINISHED_OK: tuple[str, ...] = ("passed", "failed")
"""Statuses of episodes that ran to the end (the others are errors and timeouts)."""


def episode_reward(status: str, score: float | None, passed: bool | None) -> float:
    """An episode's final reward from its record's fields: its score; 1.0/0.0 by `passed`
    when no verifier scored it; 0.0 for errors and timeouts (`EpisodeRecord.reward`, and
    readers of the records' JSON that skip validating them)."""
    if status not in FINISHED_OK:
        return 0.0
    if score is None:
        return 1.0 if passed else 0.0
    return float(score)


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
    warnings: list[str] = Field(
        default_factory=list,
        description="What the task run accepted but did not act on (the TaskResult's).",
    )
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
        return episode_reward(self.status, self.score, self.passed)


class RolloutStore:
    """A run folder: write records as episodes finish, read them back."""

    def __init__(self, folder: str | Path, *, fsync: bool = False) -> None:
        self.folder = Path(folder)
        self.path = self.folder / EPISODES_FILE
        self.fsync = fsync
        self._fd: int | None = None
        self._states = StatesFile(self.folder / STATES_FILE, fsync=fsync)

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

    def append(self, record: EpisodeRecord) -> EpisodeRecord:
        """Write one record (a whole line, one write); the record written, which is its
        error stand-in when the record cannot be serialised (see `record_json`)."""
        if self._fd is None:
            raise StoreError("the store is not open for writing (call open())")
        line, written = record_json(record)
        self.append_line(line)
        return written

    def append_line(self, line: str) -> None:
        """Write one record already serialised as JSON (no newline inside). The line is
        checked and encoded whole before anything is written."""
        if self._fd is None:
            raise StoreError("the store is not open for writing (call open())")
        line = line.rstrip("\n")
        if "\n" in line:
            raise StoreError("a record line holds a newline (it would be two lines)")
        data = (line + "\n").encode()
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
        self._states.close()

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

    def write_state(self, episode_id: str, state: dict[str, Any]) -> None:
        """Append an episode's final state to `states.jsonl` (one line: `episode_id` and
        `state`; flushed to the disk with `fsync=True`, as records are). Runners write it
        before the episode's record, so every record has its state; a line cut short by a
        kill belongs to an episode without a record, which runs (and writes its state)
        again: readers skip it, and the next writer cuts it off before appending."""
        if self._fd is None:
            raise StoreError("the store is not open for writing (call open())")
        self._states.fsync = self.fsync
        self._states.write(episode_id, state)

    def read_state(self, episode_id: str) -> dict[str, Any] | None:
        """An episode's final state (`write_state`; the last one kept for that id), or
        None when none was kept. An index of the file is built on the first call and
        extended by what was appended since, so reading every episode's state in turn
        reads the file once, not once per episode."""
        return self._states.read(episode_id)

    def states(self, *, latest: bool = True) -> Iterator[tuple[str, dict[str, Any]]]:
        """(episode id, final state) for every state kept, in file order; with `latest`
        (the default), only the last of each id, as `read_state` gives it."""
        return self._states.states(latest=latest)

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
        for _, data in self._numbered(latest=latest):
            yield data

    def _numbered(self, *, latest: bool) -> Iterator[tuple[int, dict[str, Any]]]:
        wanted: set[int] | None = None
        if latest:
            last: dict[str, int] = {}
            unread: list[int] = []  # parsed in the second pass, which says what they are
            duplicates = False
            with warnings.catch_warnings():  # the second pass warns
                warnings.simplefilter("ignore", CorruptRecordWarning)
                for number, line in self._lines():
                    key = _id_of(line)
                    if key is None:
                        unread.append(number)
                        continue
                    duplicates = duplicates or key in last
                    last[key] = number
            wanted = {*last.values(), *unread} if duplicates else None
        for number, line in self._lines():
            if wanted is not None and number not in wanted:
                continue
            data = self._parse(number, line)
            if data is not None:
                yield number, data

    def _parse(self, number: int, line: bytes) -> dict[str, Any] | None:
        try:
            data = json.loads(line)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
            reason = "nested too deep to read" if isinstance(exc, RecursionError) else exc
            warnings.warn(
                f"{self.path}:{number}: skipped a line that is not JSON ({reason})",
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
        """Every record (see `raw_records`), as EpisodeRecords; a record this version
        cannot read (a field of the wrong type, say) is skipped with a warning."""
        for number, data in self._numbered(latest=latest):
            try:
                record = EpisodeRecord.model_validate(data)
            except (ValueError, TypeError, RecursionError) as exc:  # ValidationError too
                key = safe_text(str(data["episode_id"]))
                warnings.warn(
                    f"{self.path}:{number}: skipped episode {key!r}: its record cannot be "
                    f"read ({error_text(exc)})",
                    CorruptRecordWarning,
                    stacklevel=2,
                )
                continue
            yield record

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
    if match is not None and b"\\" not in match.group(1):  # no escapes: the id as written
        return match.group(1).decode("utf-8", "surrogateescape")
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return str(data.get("episode_id")) if isinstance(data, dict) else None


# -- records that cannot be written -------------------------------------------------------

NOT_SERIALISABLE = "record not serialisable"
"""How the reason of a stand-in record begins."""


def record_json(record: EpisodeRecord) -> tuple[str, EpisodeRecord]:
    """The record as one JSON line, and the record that line holds: the record itself, or,
    when it cannot be serialised, its stand-in (`stand_in_record`). Never raises for what
    the record holds."""
    try:
        return record.model_dump_json(), record
    except Exception as exc:  # a lone surrogate, nesting too deep, a value that is not JSON
        stand_in = stand_in_record(record, f"{NOT_SERIALISABLE}: {describe_problem(record, exc)}")
        return _stand_in_json(stand_in), stand_in


def stand_in_record(record: EpisodeRecord, reason: str) -> EpisodeRecord:
    """The small record that replaces one that cannot be written: the episode (id, task,
    agent, seed, repeat, times, worker) as an `error` with `reason`, and the status it
    ended with. Made only of values that can always be serialised."""
    now = datetime.now(UTC)

    def text(value: Any, default: str = "") -> str:
        return safe_text(value if isinstance(value, str) else default)

    def when(value: Any) -> datetime:
        return value if isinstance(value, datetime) else now

    status = getattr(record, "status", None)
    ended = f" (the episode ended {status}; its record was dropped)" if status else ""
    repeat = getattr(record, "repeat", 0)
    duration = getattr(record, "duration_s", 0.0)
    seed = getattr(record, "seed", None)
    return EpisodeRecord(
        episode_id=text(getattr(record, "episode_id", None), "?"),
        status="error",
        task=text(getattr(record, "task", None), "?"),
        agent=text(getattr(record, "agent", None), "?"),
        seed=seed if isinstance(seed, dict) else {},
        repeat=repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else 0,
        error=safe_text(reason + ended),
        started_at=when(getattr(record, "started_at", None)),
        ended_at=when(getattr(record, "ended_at", None)),
        duration_s=duration if isinstance(duration, float) and duration == duration else 0.0,
        worker=text(getattr(record, "worker", None)) or None,
    )


def _stand_in_json(stand_in: EpisodeRecord) -> str:
    try:
        return stand_in.model_dump_json()
    except Exception:  # the seed itself is what cannot be written: drop it
        pass
    try:
        return stand_in.model_copy(update={"seed": {}}).model_dump_json()
    except Exception:  # cannot happen (plain strings, numbers, times): plain JSON anyway
        data = stand_in.model_dump(mode="python", exclude={"seed"})
        return json.dumps(data, ensure_ascii=True, default=str, separators=(",", ":"))
