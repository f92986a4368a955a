"""The report of `env_from_sqlite`: what became of each table, the notes, warnings, errors.

`SqliteReport` is what the generator returns instead of raising; `_Stop` is how every
stage of it stops once an error is in the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class TableReport:
    """What became of one table."""

    table: str
    collection: str
    key: str
    records: int
    columns: int
    foreign_keys: list[str] = field(default_factory=list)
    enums: list[str] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)


@dataclass
class SqliteReport:
    """The outcome of `env_from_sqlite`: what was read, what was written, what went wrong.

    `errors` stop the generation (nothing is written); `warnings` are rules of the
    database the environment does not keep, or data it had to adapt; `notes` are
    decisions worth knowing (an inferred enum, a renamed column, a left-out view).
    """

    db_path: Path
    out_dir: Path | None
    name: str | None = None
    tables: list[TableReport] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No errors (for a dry run: the folder could be written)."""
        return not self.errors

    @property
    def records(self) -> int:
        """Seed records over all tables."""
        return sum(t.records for t in self.tables)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON data."""
        return {
            "ok": self.ok,
            "db": str(self.db_path),
            "out": None if self.out_dir is None else str(self.out_dir),
            "name": self.name,
            "tables": [vars(t) for t in self.tables],
            "records": self.records,
            "tools": self.tools,
            "files": [str(f) for f in self.files],
            "notes": self.notes,
            "warnings": self.warnings,
            "errors": self.errors,
        }


class _Stop(Exception):
    """Raised after an error has been added to the report: stop here."""
