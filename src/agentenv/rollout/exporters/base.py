"""What every exporter shares: the Exporter base class, record filters, and the view of an
episode as conversations (one per agent: its prompts, its tool calls with their results,
its answers), which the chat, RL and ATIF formats are all written from."""

from __future__ import annotations

import hashlib
import json
import warnings
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar
from urllib.parse import quote

from agentenv.rollout.jsonsafe import error_text, json_text, safe_text
from agentenv.rollout.store import EpisodeRecord, PromptEntry
from agentenv.state import SEPARATOR


class ExportError(Exception):
    """An export that cannot be done (a missing optional library, a bad destination)."""


class ExportWarning(UserWarning):
    """What an export left out or changed: an episode whose documents cannot be made, a
    file renamed because another trajectory had its name."""


def skip_record(exporter: str, record: EpisodeRecord, exc: BaseException) -> None:
    """Warn that `record` is left out of an export, and why (the export goes on)."""
    warnings.warn(
        f"skipped episode {safe_text(str(record.episode_id))!r} ({safe_text(record.task)}): "
        f"its {exporter} documents cannot be made ({error_text(exc)})",
        ExportWarning,
        stacklevel=3,
    )


FILE_NAME_MAX = 200
"""The longest file name `safe_file_name` makes (before its suffix)."""


def safe_file_name(key: str, suffix: str = "") -> str:
    """A file name for an id that stays inside its folder whatever the id holds.

    Every character but ASCII letters, digits and `_ - . ~` is percent-encoded (its UTF-8
    bytes; a lone surrogate's too), and so is a leading `.` (no hidden files, never `.` or
    `..`): `../../x` becomes `%2E.%2F..%2Fx`, `a/b` becomes `a%2Fb`. `%` itself is encoded,
    so distinct ids get distinct names, and an id of safe characters only (every id
    agentenv makes) keeps its own name. The empty id is `%`; a name past
    `FILE_NAME_MAX` characters is cut and ends with a digest of the whole id.
    """
    name = quote(key, safe="", errors="surrogatepass")
    if name.startswith("."):
        name = "%2E" + name[1:]
    if not name:
        name = "%"
    if len(name) > FILE_NAME_MAX:
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = f"{name[: FILE_NAME_MAX - 17]}~{digest}"
    return name + suffix


@dataclass
class ExportFilter:
    """Which records to export. Scores are the episode's final reward (see
    `EpisodeRecord.reward`: the score; 1/0 by `passed` with no verifier; 0 for errors)."""

    min_score: float | None = None
    passed_only: bool = False
    statuses: set[str] | None = None
    tasks: set[str] | None = None
    agents: set[str] | None = None

    def __call__(self, record: EpisodeRecord) -> bool:
        if self.passed_only and not record.passed:
            return False
        if self.min_score is not None and record.reward() < self.min_score:
            return False
        if self.statuses is not None and record.status not in self.statuses:
            return False
        if self.tasks is not None and record.task not in self.tasks:
            return False
        return self.agents is None or record.agent in self.agents


class Exporter(ABC):
    """Turns episode records into one training or interchange format.

    Line formats write one JSON document per line to a text stream (`write`); a binary
    format (`binary = True`) writes to a file path. Plugins subclass this and register
    under the `agentenv.exporters` entry-point group (or `plugins.exporters` in
    agentenv.toml); `name` is what `agent-env export --format` takes.
    """

    name: ClassVar[str]
    description: ClassVar[str] = ""
    binary: ClassVar[bool] = False
    suffix: ClassVar[str] = ".jsonl"

    def __init__(self, **options: Any) -> None:
        unknown = set(options) - set(self.options())
        if unknown:
            known = ", ".join(sorted(self.options())) or "none"
            raise ExportError(
                f"exporter {self.name!r} has no option {', '.join(sorted(unknown))} "
                f"(options: {known})"
            )
        self.config = {**self.options(), **options}

    @classmethod
    def options(cls) -> dict[str, Any]:
        """The options this exporter takes, with their defaults."""
        return {}

    def documents(self, record: EpisodeRecord) -> Iterator[dict[str, Any]]:
        """The JSON documents (lines) for one record (line formats override this; binary
        formats override `write` instead)."""
        raise ExportError(f"{self.name}: a binary format has no JSON lines; use write()")

    def write(self, records: Iterable[EpisodeRecord], out: IO[str] | Path) -> int:
        """Write every record's documents; the number written."""
        if isinstance(out, Path):
            with out.open("w", encoding="utf-8") as f:
                return self.write(records, f)
        count = 0
        for record in records:
            for line in self.lines(record):
                out.write(line + "\n")
                count += 1
        return count

    def lines(self, record: EpisodeRecord, *, indent: int | None = None) -> list[str]:
        """The record's documents as JSON text, all or none: a record whose documents
        cannot be made or encoded (data an older version let in, say) is skipped with a
        `ExportWarning` naming it, and the export goes on. Text is UTF-8-safe
        (a lone surrogate is written as its `\\u` escape)."""
        try:
            return [json_text(doc, indent=indent) for doc in self.documents(record)]
        except ExportError:
            raise
        except Exception as exc:  # RecursionError too: a value nested past what JSON takes
            skip_record(self.name, record, exc)
            return []


class BinaryExporter(Exporter):
    """An exporter that writes a file (e.g. parquet) rather than lines."""

    binary: ClassVar[bool] = True

    @abstractmethod
    def write(self, records: Iterable[EpisodeRecord], out: Any) -> int:  # type: ignore[override]
        """Write the records to `out` (a path or a binary stream); the number written."""


# -- episodes as conversations ------------------------------------------------------------


@dataclass
class ToolCallView:
    """One tool call of an agent, as the agent saw it."""

    call_id: str
    name: str
    """The tool's name as offered to the agent (`<env_id>__<tool>` with several envs)."""
    arguments: dict[str, Any]
    content: str
    """What the agent got back: the result as text, or `Error: <message>`."""
    is_error: bool
    env_id: str
    tool: str
    seq: int
    result: Any = None
    error: dict[str, Any] | None = None
    denied: bool = False
    wall_time: str | None = None
    virtual_time: str | None = None
    state_hash: str | None = None


@dataclass
class MessageView:
    """One message of a prompt: `user` (the prompt, or a simulated user's reply) or
    `assistant` (the agent's answer)."""

    role: str
    content: str
    wall_time: str | None = None


Event = ToolCallView | MessageView


@dataclass
class PromptView:
    """One prompt and what happened in it, in order: the prompt, the agent's tool calls,
    its answer (and, in a conversation with a simulated user, every further message)."""

    prompt: PromptEntry
    events: list[Event] = field(default_factory=list)

    @property
    def calls(self) -> list[ToolCallView]:
        """The agent's tool calls, in order."""
        return [e for e in self.events if isinstance(e, ToolCallView)]

    @property
    def response(self) -> str | None:
        """The agent's final answer (None if its turn failed)."""
        return self.prompt.response


@dataclass
class Conversation:
    """Everything one agent of one episode did, in order."""

    record: EpisodeRecord
    agent_name: str
    turns: list[PromptView]

    @property
    def system_prompt(self) -> str | None:
        """The first prompt's system prompt."""
        return self.turns[0].prompt.system_prompt if self.turns else None

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools offered to this agent (name, description, inputSchema)."""
        return self.record.tools.get(self.agent_name, [])

    @property
    def session_id(self) -> str:
        """The episode id, plus the agent's name when the episode has several agents."""
        names = {p.agent_name for p in self.record.prompts}
        if len(names) > 1:
            return f"{self.record.episode_id}-{self.agent_name}"
        return self.record.episode_id

    def calls(self) -> Iterator[ToolCallView]:
        """Every tool call, in order."""
        for turn in self.turns:
            yield from turn.calls


def result_text(row: dict[str, Any]) -> str:
    """What the agent read for a trajectory record (the gateway's text of a result)."""
    error = row.get("error")
    if error:
        return f"Error: {error.get('message', '')}"
    result = row.get("result")
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def _slice(
    by_env: dict[str, list[dict[str, Any]]], prompt: PromptEntry, env_id: str
) -> Iterator[dict[str, Any]]:
    start = prompt.start_seq.get(env_id, 0)
    end = prompt.end_seq.get(env_id)
    for row in by_env.get(env_id, []):
        seq = row.get("seq", 0)
        if start <= seq and (end is None or seq < end) and row.get("session") == prompt.prompt_id:
            yield row


def conversations(record: EpisodeRecord) -> list[Conversation]:
    """The episode as one conversation per prompted agent, in the order they first spoke.

    A prompt's tool calls are the trajectory records of its session made by its agent (a
    simulated user's own calls are not the agent's). When the prompt was a conversation
    with a simulated user, its messages come from the trajectory too, in order with the
    calls; otherwise the prompt opens the turn and the response closes it.
    """
    by_env: dict[str, list[dict[str, Any]]] = {}
    for row in record.trajectory:
        if row.get("kind") in ("call", "message"):
            by_env.setdefault(row.get("env_id", ""), []).append(row)
    grouped: dict[str, list[PromptView]] = {}
    counters: dict[str, int] = {}
    for prompt in record.prompts:
        agent = prompt.agent_name
        several = len(prompt.env_ids) > 1
        rows: list[dict[str, Any]] = []
        for i, env_id in enumerate(prompt.env_ids):
            for row in _slice(by_env, prompt, env_id):
                mine = row["kind"] == "call" and row.get("principal") == agent
                said = row["kind"] == "message" and i == 0  # recorded in every env: once
                if mine or said:
                    rows.append(row)
        rows.sort(key=lambda r: (r.get("wall_time") or "", r.get("seq", 0)))
        events: list[Event] = []
        for row in rows:
            if row["kind"] == "message":
                role = "assistant" if row.get("principal") == agent else "user"
                events.append(MessageView(role, row.get("detail") or "", row.get("wall_time")))
                continue
            n = counters.get(agent, 0) + 1
            counters[agent] = n
            env_id, tool = row.get("env_id", ""), row.get("tool") or ""
            args = row.get("args") or {}
            events.append(
                ToolCallView(
                    call_id=f"call_{n}",
                    name=f"{env_id}{SEPARATOR}{tool}" if several else tool,
                    arguments=args if isinstance(args, dict) else {"_invalid": args},
                    content=result_text(row),
                    is_error=bool(row.get("error")),
                    env_id=env_id,
                    tool=tool,
                    seq=row.get("seq", 0),
                    result=row.get("result"),
                    error=row.get("error"),
                    denied=bool(row.get("denied")),
                    wall_time=row.get("wall_time"),
                    virtual_time=row.get("virtual_time"),
                    state_hash=row.get("state_hash"),
                )
            )
        if not any(isinstance(e, MessageView) for e in events):
            start = _stamp(prompt.started_at)
            events.insert(0, MessageView("user", prompt.prompt, start))
            if prompt.response is not None:
                events.append(MessageView("assistant", prompt.response, _stamp(prompt.ended_at)))
        grouped.setdefault(agent, []).append(PromptView(prompt, events))
    return [Conversation(record, name, turns) for name, turns in grouped.items()]


def _stamp(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def chat_messages(conversation: Conversation) -> list[dict[str, Any]]:
    """The conversation as OpenAI chat messages: system, user, assistant tool calls (one
    call per assistant message, in the order made), tool results, the answers."""
    messages: list[dict[str, Any]] = []
    if conversation.system_prompt:
        messages.append({"role": "system", "content": conversation.system_prompt})
    for turn in conversation.turns:
        for event in turn.events:
            if isinstance(event, MessageView):
                messages.append({"role": event.role, "content": event.content})
                continue
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": event.call_id,
                            "type": "function",
                            "function": {
                                "name": event.name,
                                "arguments": json.dumps(event.arguments, ensure_ascii=False),
                            },
                        }
                    ],
                }
            )
            messages.append(
                {"role": "tool", "tool_call_id": event.call_id, "content": event.content}
            )
    return messages


def chat_tools(conversation: Conversation) -> list[dict[str, Any]]:
    """The agent's tools as OpenAI function tools."""
    out = []
    for info in conversation.tools:
        schema = info.get("inputSchema", info.get("input_schema")) or {
            "type": "object",
            "properties": {},
        }
        out.append(
            {
                "type": "function",
                "function": {
                    "name": info.get("name", ""),
                    "description": info.get("description", ""),
                    "parameters": schema,
                },
            }
        )
    return out


def episode_metadata(record: EpisodeRecord, agent_name: str | None = None) -> dict[str, Any]:
    """The fields every format carries to say where a document came from."""
    out: dict[str, Any] = {
        "episode_id": record.episode_id,
        "task": record.task,
        "agent": record.agent,
        "seed": record.seed,
        "repeat": record.repeat,
        "status": record.status,
        "passed": record.passed,
        "score": record.score,
        "reward": record.reward(),
    }
    if agent_name is not None:
        out["agent_name"] = agent_name
    return out
