"""The entry point, `env_from_sqlite`: read, analyse, render, load to verify, then write.

It never raises for bad input: every stage adds to one `SqliteReport` and stops with
`_Stop` after an error, and a bug of ours becomes an error in the report too. The files
are loaded as an `Environment` from a scratch folder before anything is written.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

from agentenv.synth.sqlite.analyse import _analyse
from agentenv.synth.sqlite.model import _Column, _ForeignKey, _Table
from agentenv.synth.sqlite.reader import _Reader
from agentenv.synth.sqlite.render_env import (
    _document,
    _seed_records,
    _seed_text,
    _tool_names,
    _yaml,
)
from agentenv.synth.sqlite.render_tools import _ToolsWriter
from agentenv.synth.sqlite.report import SqliteReport, TableReport, _Stop

ENUM_MAX = 12
"""A status-like TEXT column with at most this many distinct values is treated as an enum."""

MAX_ROWS = 100_000
"""A table with more rows than this is refused (the seed would be too large to be useful)."""


def env_from_sqlite(
    db_path: str | Path,
    out_dir: str | Path | None,
    *,
    name: str | None = None,
    enum_max: int = ENUM_MAX,
    infer_enums: bool = True,
    clock_start: datetime | None = None,
    max_rows: int = MAX_ROWS,
    overwrite: bool = False,
) -> SqliteReport:
    """Make an environment folder from a SQLite database; never raises for bad input.

    Args:
        db_path: The SQLite file, opened read-only.
        out_dir: The folder to write (env.yaml, tools.py, seed/); None for a dry run that
            only fills the report.
        name: The environment's name; default: the folder's name (or the file's stem).
        enum_max: A TEXT column named like status/state/stage/phase with at most this many
            distinct values (some repeated) becomes an enum.
        infer_enums: Whether to infer such enums at all (CHECK ... IN enums always count).
        clock_start: The virtual clock's start; default: 09:00 UTC on the day after the
            latest date in DATE/DATETIME/TIMESTAMP columns (2026-01-01 without any).
        max_rows: A table with more rows than this is refused.
        overwrite: Replace the generated files of a folder that is not empty.

    Returns:
        The report: tables, tools, notes, warnings, errors and the files written. With
        errors, nothing is written.
    """
    db = Path(db_path)
    out = None if out_dir is None else Path(out_dir)
    report = SqliteReport(db_path=db, out_dir=out)
    try:
        _generate(report, db, out, name, enum_max, infer_enums, clock_start, max_rows, overwrite)
    except _Stop:
        pass
    except Exception as exc:  # a bug of ours: keep the promise of a report, not a traceback
        report.errors.append(
            f"internal error while reading {db.name}: {type(exc).__name__}: {exc} "
            "(please report this with the database's schema)"
        )
    return report


def _env_name(name: str | None, db: Path, out: Path | None, report: SqliteReport) -> str:
    if name is not None:
        if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", name):
            report.errors.append(
                f"name {name!r}: use letters, digits, '.', '_' and '-', starting with a letter or digit"
            )
            raise _Stop()
        return name
    source = out.name if out is not None and out.name not in ("", ".", "..") else db.stem
    return re.sub(r"[^A-Za-z0-9._-]+", "-", source).strip("-._") or "database"


def _generate(
    report: SqliteReport,
    db: Path,
    out: Path | None,
    name: str | None,
    enum_max: int,
    infer_enums: bool,
    clock_start: datetime | None,
    max_rows: int,
    overwrite: bool,
) -> None:
    env_name = _env_name(name, db, out, report)
    report.name = env_name
    if out is not None:
        _check_out_dir(report, out, overwrite)
    reader = _Reader(report, enum_max=enum_max, infer_enums=infer_enums, max_rows=max_rows)
    try:
        reader.read(db)
        _analyse(reader)
    except _Stop:
        # The partial report: what was read before the error.
        report.tables = [_table_report(t, tools=False) for t in reader.tables]
        raise
    tables = [t for t in reader.tables if t.kept]
    if not tables:
        report.errors.append(f"{db} has no tables left to make collections of")
        raise _Stop()
    skipped = 0
    for table in tables:
        before = len(table.rows)
        _seed_records(table)
        skipped += before - len(table.rows)
        report.tables.append(_table_report(table))
    if skipped:
        report.warnings.append(f"seed: {skipped} rows with a null primary key are left out")
    start = clock_start or _default_start(reader.date_values)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    start = start.astimezone(UTC)
    files = _render(tables, env_name, db.name, start)
    report.tools = _verify(report, files)
    if out is not None:
        _write(report, out, files)


def _table_report(table: _Table, *, tools: bool = True) -> TableReport:
    def fk_text(fk: _ForeignKey) -> str:
        target = f"{fk.parent}.{', '.join(fk.to)}" if fk.parent else fk.parent_sql
        cascade = fk.on_delete in ("cascade", "set null")
        return f"{', '.join(fk.fields)} -> {target}" + (
            f" (on delete {fk.on_delete})" if cascade else ""
        )

    def enum_text(col: _Column) -> str:
        extra = (", transitions" if col.transitions else "") + (
            ", inferred" if col.enum_source == "inferred" else ""
        )
        return f"{col.name} ({len(col.rules['enum'])} values{extra})"

    key = table.key if not table.composite else f"{table.key} ({', '.join(table.key_fields)})"
    return TableReport(
        table=table.sql,
        collection=table.name,
        key=key,
        records=len(table.rows),
        columns=len(table.columns),
        foreign_keys=[fk_text(fk) for fk in table.foreign_keys],
        enums=[enum_text(c) for c in table.columns if "enum" in c.rules],
        tools=list(_tool_names(table).values()) if tools else [],
    )


def _default_start(dates: list[date]) -> datetime:
    if not dates:
        return datetime(2026, 1, 1, 9, tzinfo=UTC)
    return datetime.combine(max(dates) + timedelta(days=1), time(9), tzinfo=UTC)


def _render(tables: list[_Table], env_name: str, db_name: str, start: datetime) -> dict[str, str]:
    doc = _document(tables, env_name, db_name, start)
    files = {
        "env.yaml": _yaml(doc, db_name),
        "tools.py": _ToolsWriter(tables, db_name, env_name).render(),
    }
    for table in tables:
        files[f"seed/{table.name}.json"] = _seed_text(table.rows)
    return files


def _verify(report: SqliteReport, files: dict[str, str]) -> list[str]:
    """Load the generated environment from a scratch folder: it must load before it is written."""
    from agentenv.env import Environment
    from agentenv.spec import DocumentError

    with tempfile.TemporaryDirectory(prefix="agentenv-sqlite-") as scratch:
        root = Path(scratch)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        try:
            env = Environment.load(root / "env.yaml")
        except DocumentError as exc:
            report.errors.append(
                f"the generated environment does not load (please report this): {exc}"
            )
            raise _Stop() from None
    return list(env.tools)


def _check_out_dir(report: SqliteReport, out: Path, overwrite: bool) -> None:
    if out.exists() and not out.is_dir():
        report.errors.append(f"{out} is a file; --out needs a folder")
        raise _Stop()
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        report.errors.append(
            f"{out} exists and is not empty; pass --force to replace its env.yaml, tools.py and seed/"
        )
        raise _Stop()


def _write(report: SqliteReport, out: Path, files: dict[str, str]) -> None:
    try:
        seed = out / "seed"
        if seed.is_dir():
            for old in seed.glob("*.json"):
                if f"seed/{old.name}" not in files:
                    old.unlink()
        for rel, text in files.items():
            path = out / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            report.files.append(path)
        cache = out / "__pycache__"
        if cache.is_dir():
            shutil.rmtree(cache, ignore_errors=True)
    except OSError as exc:
        report.errors.append(f"cannot write {out}: {exc}")
        raise _Stop() from None
