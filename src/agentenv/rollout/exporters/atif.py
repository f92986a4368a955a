"""`atif`: Harbor's Agent Trajectory Interchange Format (ATIF), so Harbor-based tooling
can read our runs.

Written against the published specification, Harbor's RFC 0001 "Agent Trajectory
Interchange Format (ATIF) Specification" (docs/rfcs/0001-trajectory-format.md in the
Harbor repository), schema version ATIF-v1.4. Later versions (up to v1.7) only add
optional fields, so v1.4 documents stay valid. `ATIF_SCHEMA` below is that RFC's field
tables written as a JSON Schema, and `validate_atif` adds the RFC validators' rules
(sequential step ids from 1, observation results that point at a tool call of their
step, agent-only fields only on agent steps, ISO 8601 timestamps).

One trajectory per agent per episode: a `system` step (when the task gives a system
prompt), then per prompt a `user` step, one `agent` step per tool call (the call in
`tool_calls`, what the agent read in `observation`) and an `agent` step with the final
answer. `session_id` is the episode id (plus `-<agent>` when several agents spoke).
Scores go in `final_metrics.extra`, the episode's ids in the root `extra.agentenv`.

To stdout or a `.jsonl` file: one trajectory per line. To a folder: one
`<session_id>.json` file per trajectory (Harbor's own runs keep one `trajectory.json`),
its name made safe by `safe_file_name` (an id such as `../../x` cannot leave the folder).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from agentenv.rollout.exporters.base import (
    Conversation,
    Exporter,
    ExportError,
    ExportWarning,
    MessageView,
    conversations,
    safe_file_name,
    skip_record,
)
from agentenv.rollout.exporters.registry import EXPORTERS
from agentenv.rollout.jsonsafe import json_text, safe_text
from agentenv.rollout.store import EpisodeRecord

ATIF_VERSION = "ATIF-v1.4"

_OBJECT: dict[str, Any] = {"type": "object"}
_INT = {"type": "integer", "minimum": 0}

ATIF_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "ATIF trajectory (RFC 0001, v1.4)",
    "type": "object",
    "required": ["schema_version", "session_id", "agent", "steps"],
    "additionalProperties": False,
    "properties": {
        "schema_version": {"type": "string", "pattern": r"^ATIF-v1\.[0-9]+$"},
        "session_id": {"type": "string", "minLength": 1},
        "agent": {"$ref": "#/$defs/agent"},
        "steps": {"type": "array", "items": {"$ref": "#/$defs/step"}},
        "notes": {"type": "string"},
        "final_metrics": {"$ref": "#/$defs/final_metrics"},
        "extra": _OBJECT,
    },
    "$defs": {
        "agent": {
            "type": "object",
            "required": ["name", "version"],
            "additionalProperties": False,
            "properties": {
                "name": {"type": "string"},
                "version": {"type": "string"},
                "model_name": {"type": "string"},
                "extra": _OBJECT,
            },
        },
        "final_metrics": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "total_prompt_tokens": _INT,
                "total_completion_tokens": _INT,
                "total_cached_tokens": _INT,
                "total_cost_usd": {"type": "number"},
                "total_steps": _INT,
                "extra": _OBJECT,
            },
        },
        "step": {
            "type": "object",
            "required": ["step_id", "source", "message"],
            "additionalProperties": False,
            "properties": {
                "step_id": {"type": "integer", "minimum": 1},
                "timestamp": {"type": "string"},
                "source": {"enum": ["system", "user", "agent"]},
                "model_name": {"type": "string"},
                "reasoning_effort": {"type": ["string", "number"]},
                "message": {"type": "string"},
                "reasoning_content": {"type": "string"},
                "tool_calls": {"type": "array", "items": {"$ref": "#/$defs/tool_call"}},
                "observation": {"$ref": "#/$defs/observation"},
                "metrics": {"$ref": "#/$defs/metrics"},
                "extra": _OBJECT,
            },
        },
        "tool_call": {
            "type": "object",
            "required": ["tool_call_id", "function_name", "arguments"],
            "additionalProperties": False,
            "properties": {
                "tool_call_id": {"type": "string"},
                "function_name": {"type": "string"},
                "arguments": _OBJECT,
            },
        },
        "metrics": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "prompt_tokens": _INT,
                "completion_tokens": _INT,
                "cached_tokens": _INT,
                "cost_usd": {"type": "number"},
                "prompt_token_ids": {"type": "array", "items": {"type": "integer"}},
                "completion_token_ids": {"type": "array", "items": {"type": "integer"}},
                "logprobs": {"type": "array", "items": {"type": "number"}},
                "extra": _OBJECT,
            },
        },
        "observation": {
            "type": "object",
            "required": ["results"],
            "additionalProperties": False,
            "properties": {
                "results": {"type": "array", "items": {"$ref": "#/$defs/observation_result"}}
            },
        },
        "observation_result": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "source_call_id": {"type": ["string", "null"]},
                "content": {"type": ["string", "null"]},
                "subagent_trajectory_ref": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["session_id"],
                        "additionalProperties": False,
                        "properties": {
                            "session_id": {"type": "string"},
                            "trajectory_path": {"type": ["string", "null"]},
                            "extra": _OBJECT,
                        },
                    },
                },
            },
        },
    },
}

_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


def validate_atif(document: dict[str, Any]) -> list[str]:
    """Every way `document` breaks the ATIF schema or the RFC's rules ([] if none)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(ATIF_SCHEMA)
    problems = [
        f"{'/'.join(str(p) for p in e.absolute_path) or '<root>'}: {e.message}"
        for e in validator.iter_errors(document)
    ]
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list):
        return problems
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            continue
        if step.get("step_id") != i + 1:
            problems.append(f"steps/{i}/step_id: expected {i + 1} (sequential from 1)")
        if step.get("source") != "agent":
            for name in _AGENT_ONLY:
                if name in step:
                    problems.append(f"steps/{i}/{name}: only agent steps may have it")
        stamp = step.get("timestamp")
        if isinstance(stamp, str):
            try:
                datetime.fromisoformat(stamp.replace("Z", "+00:00"))
            except ValueError:
                problems.append(f"steps/{i}/timestamp: {stamp!r} is not ISO 8601")
        ids = {c.get("tool_call_id") for c in step.get("tool_calls") or [] if isinstance(c, dict)}
        for j, result in enumerate((step.get("observation") or {}).get("results") or []):
            ref = result.get("source_call_id") if isinstance(result, dict) else None
            if ref is not None and ref not in ids:
                problems.append(
                    f"steps/{i}/observation/results/{j}/source_call_id: {ref!r} is not a "
                    "tool_call_id of this step"
                )
    return problems


def _stamp(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return str(value)


def _drop_none(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


def trajectory(conversation: Conversation) -> dict[str, Any]:
    """One conversation as an ATIF trajectory document."""
    from agentenv import __version__

    record = conversation.record
    steps: list[dict[str, Any]] = []

    def add(**fields: Any) -> None:
        steps.append(_drop_none({"step_id": len(steps) + 1, **fields}))

    if conversation.system_prompt:
        first = conversation.turns[0].prompt
        add(timestamp=_stamp(first.started_at), source="system", message=first.system_prompt)
    model = None
    for turn in conversation.turns:
        prompt = turn.prompt
        model = model or prompt.model
        answered = False
        for event in turn.events:
            if isinstance(event, MessageView):
                if event.role == "user":
                    add(
                        timestamp=_stamp(event.wall_time),
                        source="user",
                        message=event.content,
                        extra={"prompt_id": prompt.prompt_id},
                    )
                else:
                    answered = True
                    add(
                        timestamp=_stamp(event.wall_time),
                        source="agent",
                        model_name=prompt.model,
                        message=event.content,
                    )
                continue
            add(
                timestamp=_stamp(event.wall_time),
                source="agent",
                model_name=prompt.model,
                message="",
                tool_calls=[
                    {
                        "tool_call_id": event.call_id,
                        "function_name": event.name,
                        "arguments": event.arguments,
                    }
                ],
                observation={
                    "results": [{"source_call_id": event.call_id, "content": event.content}]
                },
                extra=_drop_none(
                    {
                        "env_id": event.env_id,
                        "seq": event.seq,
                        "is_error": event.is_error,
                        "denied": event.denied or None,
                        "virtual_time": event.virtual_time,
                        "state_hash": event.state_hash,
                    }
                ),
            )
        if prompt.error is not None and not answered:
            add(
                timestamp=_stamp(prompt.ended_at),
                source="agent",
                model_name=prompt.model,
                message="",
                extra={"error": prompt.error},
            )
    usage = record.usage
    final = _drop_none(
        {
            "total_prompt_tokens": _int(usage.get("prompt_tokens")),
            "total_completion_tokens": _int(usage.get("completion_tokens")),
            "total_cached_tokens": _int(usage.get("cached_tokens")),
            "total_cost_usd": usage.get("cost_usd"),
            "total_steps": len(steps),
            "extra": {
                "score": record.score,
                "reward": record.reward(),
                "passed": record.passed,
                "status": record.status,
                "scores": {k: s.score for k, s in record.scores.items()},
            },
        }
    )
    agent = _drop_none(
        {
            "name": record.agent,
            "version": __version__,
            "model_name": model,
            "extra": {"agent_name": conversation.agent_name, "framework": "agentenv"},
        }
    )
    return {
        "schema_version": ATIF_VERSION,
        "session_id": conversation.session_id,
        "agent": agent,
        "steps": steps,
        "notes": f"agentenv rollout episode {record.episode_id} of task {record.task}",
        "final_metrics": final,
        "extra": {
            "agentenv": {
                "episode_id": record.episode_id,
                "task": record.task,
                "agent": record.agent,
                "seed": record.seed,
                "repeat": record.repeat,
                "error": record.error,
                "duration_s": record.duration_s,
            }
        },
    }


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


@EXPORTERS.add_builtin
class AtifExporter(Exporter):
    """Harbor's ATIF (v1.4): one trajectory per agent per episode."""

    name = "atif"
    description = "Harbor's Agent Trajectory Interchange Format (ATIF v1.4), one per episode"

    def documents(self, record: EpisodeRecord) -> Iterator[dict[str, Any]]:
        for conversation in conversations(record):
            yield trajectory(conversation)

    def write(self, records: Iterable[EpisodeRecord], out: IO[str] | Path) -> int:
        if isinstance(out, Path) and (out.is_dir() or not out.suffix):
            return self._write_folder(records, out)
        return super().write(records, out)

    def _write_folder(self, records: Iterable[EpisodeRecord], out: Path) -> int:
        """One `<session_id>.json` per trajectory, named by `safe_file_name` so no id
        writes outside `out`; an existing symbolic link is never followed."""
        out.mkdir(parents=True, exist_ok=True)
        written: set[str] = set()
        count = 0
        for record in records:
            docs = list(self.documents_or_skip(record))
            for doc, text in docs:
                session = str(doc["session_id"])
                name = safe_file_name(session, ".json")
                n = 1
                while name.lower() in written:  # two ids, one name (case-folding file systems)
                    n += 1
                    name = safe_file_name(f"{session}~{n}", ".json")
                if n > 1:
                    warnings.warn(
                        f"session {safe_text(session)!r} is written to {name}: "
                        "another trajectory of this export has its file name",
                        ExportWarning,
                        stacklevel=2,
                    )
                written.add(name.lower())
                _write_new(out / name, text)
                count += 1
        return count

    def documents_or_skip(self, record: EpisodeRecord) -> list[tuple[dict[str, Any], str]]:
        """(document, its JSON text) for each trajectory of the record; none, with a
        warning, when they cannot be made (see `Exporter.lines`)."""
        try:
            docs = list(self.documents(record))
            return [(doc, json_text(doc, indent=2)) for doc in docs]
        except Exception as exc:
            skip_record(self.name, record, exc)
            return []


def _write_new(path: Path, text: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        raise ExportError(f"cannot write {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
