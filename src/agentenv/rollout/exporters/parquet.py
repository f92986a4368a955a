"""`parquet`: one row per episode in a Parquet file (needs pyarrow: the `parquet` extra).

Flat columns for what analyses filter and group on (ids, task, agent, status, scores,
timing, token counts); nested data (seed, scores, usage, steps, prompts, tools,
trajectory) as JSON text columns, so every record survives the trip whole:
`read_parquet_records(path)` gives back the same EpisodeRecords.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from agentenv.rollout.exporters.base import BinaryExporter, ExportError, skip_record
from agentenv.rollout.exporters.registry import EXPORTERS
from agentenv.rollout.jsonsafe import json_text, safe_text
from agentenv.rollout.store import EpisodeRecord

JSON_COLUMNS = (
    "seed",
    "scores",
    "usage",
    "usage_by_prompt",
    "steps",
    "prompts",
    "tools",
    "trajectory",
)
ROWS_PER_GROUP = 1000


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ExportError(
            "the parquet format needs pyarrow: pip install 'agentenv-kit[parquet]' "
            "(or 'pyarrow>=14')"
        ) from None
    return pa, pq


def schema() -> Any:
    """The Arrow schema of the episode table."""
    pa, _ = _pyarrow()
    ts = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            ("episode_id", pa.string()),
            ("task", pa.string()),
            ("agent", pa.string()),
            ("repeat", pa.int64()),
            ("status", pa.string()),
            ("passed", pa.bool_()),
            ("score", pa.float64()),
            ("reward", pa.float64()),
            ("error", pa.string()),
            ("started_at", ts),
            ("ended_at", ts),
            ("duration_s", pa.float64()),
            ("calls", pa.int64()),
            ("prompt_tokens", pa.float64()),
            ("completion_tokens", pa.float64()),
            ("worker", pa.string()),
            ("format", pa.int64()),
            *[(name, pa.string()) for name in JSON_COLUMNS],
        ]
    )


def _row(record: EpisodeRecord) -> dict[str, Any]:
    """The record as a table row; text columns are UTF-8-safe (a lone surrogate that an
    older version let in is written as its escape)."""
    data = record.model_dump(mode="json")
    row = {
        "episode_id": safe_text(record.episode_id),
        "task": safe_text(record.task),
        "agent": safe_text(record.agent),
        "repeat": record.repeat,
        "status": record.status,
        "passed": record.passed,
        "score": record.score,
        "reward": record.reward(),
        "error": safe_text(record.error) if record.error is not None else None,
        "started_at": record.started_at,
        "ended_at": record.ended_at,
        "duration_s": record.duration_s,
        "calls": record.calls,
        "prompt_tokens": record.usage.get("prompt_tokens"),
        "completion_tokens": record.usage.get("completion_tokens"),
        "worker": safe_text(record.worker) if record.worker is not None else None,
        "format": record.format,
    }
    for name in JSON_COLUMNS:
        row[name] = json_text(data[name])
    return row


@EXPORTERS.add_builtin
class ParquetExporter(BinaryExporter):
    """One row per episode, nested data as JSON columns."""

    name = "parquet"
    description = "one row per episode in a Parquet file (nested data as JSON columns)"
    suffix = ".parquet"

    def write(self, records: Iterable[EpisodeRecord], out: Any) -> int:
        pa, pq = _pyarrow()
        table_schema = schema()
        count = 0
        sink = str(out) if isinstance(out, Path) else out
        with pq.ParquetWriter(sink, table_schema) as writer:
            batch: list[dict[str, Any]] = []
            for record in records:
                try:
                    batch.append(_row(record))
                except Exception as exc:  # the episode is left out, with a warning
                    skip_record(self.name, record, exc)
                    continue
                if len(batch) >= ROWS_PER_GROUP:
                    writer.write_table(pa.Table.from_pylist(batch, schema=table_schema))
                    count += len(batch)
                    batch = []
            if batch or count == 0:
                writer.write_table(pa.Table.from_pylist(batch, schema=table_schema))
                count += len(batch)
        return count


def read_parquet_records(path: str | Path) -> list[EpisodeRecord]:
    """The EpisodeRecords of a file written by the parquet exporter."""
    _, pq = _pyarrow()
    out = []
    for row in pq.read_table(str(path)).to_pylist():
        data = {k: v for k, v in row.items() if k not in ("reward", "prompt_tokens")}
        data.pop("completion_tokens", None)
        for name in JSON_COLUMNS:
            data[name] = json.loads(data[name])
        out.append(EpisodeRecord.model_validate(data))
    return out
