"""`agent-env synth env --from-sqlite DB --out DIR`: an environment from a SQLite database.

Reads the database read-only and writes DIR/env.yaml, DIR/tools.py and DIR/seed/. Prints
what became of each table, the tools, and every note, warning and error. On an error
nothing is written, the report so far is still printed, and the exit code is 1. See
docs/env-from-database.md.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from agentenv.cli._common import console, err_console
from agentenv.synth.sqlite import ENUM_MAX, MAX_ROWS, SqliteReport, env_from_sqlite


def synth_env(
    from_sqlite: Annotated[
        Path,
        typer.Option("--from-sqlite", help="The SQLite database file (opened read-only)."),
    ],
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="The folder to write (env.yaml, tools.py, seed/)."),
    ] = None,
    name: Annotated[
        str | None, typer.Option("--name", help="The environment's name (default: the folder's).")
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", "-f", help="Replace the generated files of a folder.")
    ] = False,
    enum_max: Annotated[
        int,
        typer.Option(
            "--enum-max",
            min=1,
            help="A status-like TEXT column with at most this many values is an enum.",
        ),
    ] = ENUM_MAX,
    infer_enums: Annotated[
        bool,
        typer.Option(
            "--infer-enums/--no-infer-enums",
            help="Treat status/state/stage/phase columns with few values as enums.",
        ),
    ] = True,
    clock_start: Annotated[
        str | None,
        typer.Option(
            "--clock-start",
            help="The virtual clock's start, e.g. 2026-03-02T09:00:00Z "
            "(default: the day after the latest date in the data, 09:00 UTC).",
        ),
    ] = None,
    max_rows: Annotated[
        int, typer.Option("--max-rows", min=1, help="Refuse tables with more rows than this.")
    ] = MAX_ROWS,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Read and report, write nothing.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Make an environment from a SQLite database: a collection per table with its rows as
    seed, get/list/search/create/update/delete tools, foreign keys kept as tool errors and
    status columns as enums with their allowed transitions."""
    start = None
    if clock_start is not None:
        try:
            start = datetime.fromisoformat(clock_start)
        except ValueError:
            err_console.print(
                f"[bold red]error:[/] --clock-start {escape(clock_start)} is not an ISO date "
                "and time (e.g. 2026-03-02T09:00:00Z)",
                highlight=False,
            )
            raise typer.Exit(1) from None
    if out is None and not dry_run:
        err_console.print("[bold red]error:[/] give --out DIR (or --dry-run)", highlight=False)
        raise typer.Exit(1)
    report = env_from_sqlite(
        from_sqlite,
        None if dry_run else out,
        name=name if name is not None else (out.name if out is not None and dry_run else None),
        enum_max=enum_max,
        infer_enums=infer_enums,
        clock_start=start,
        max_rows=max_rows,
        overwrite=force,
    )
    if as_json:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(report, dry_run=dry_run)
    if not report.ok:
        raise typer.Exit(1)


def print_report(report: SqliteReport, *, dry_run: bool = False) -> None:
    """The report as a table of tables, then notes, warnings and errors."""
    if report.tables:
        table = Table(title=f"{escape(report.db_path.name)}: {report.records} records")
        table.add_column("table", style="bold", no_wrap=True)
        table.add_column("key")
        table.add_column("records", justify="right")
        table.add_column("foreign keys")
        table.add_column("enums")
        table.add_column("tools")
        for t in report.tables:
            name = t.table if t.table == t.collection else f"{t.table} -> {t.collection}"
            table.add_row(
                escape(name),
                escape(t.key),
                str(t.records),
                escape("\n".join(t.foreign_keys)),
                escape("\n".join(t.enums)),
                str(len(t.tools)),
            )
        console.print(table)
    for note in report.notes:
        console.print(f"[cyan]note:[/] {escape(note)}", highlight=False)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    for error in report.errors:
        err_console.print(f"[bold red]error:[/] {escape(error)}", highlight=False)
    if not report.ok:
        err_console.print("nothing was written", highlight=False)
        return
    tools = f"{len(report.tools)} tools"
    if dry_run or report.out_dir is None:
        console.print(
            f"[bold green]ok[/] (dry run): {len(report.tables)} tables, {tools}; nothing written",
            highlight=False,
        )
        return
    console.print(
        f"[bold green]wrote[/] {escape(str(report.out_dir))}: env.yaml, tools.py and "
        f"{len(report.tables)} seed files ({report.name}: {len(report.tables)} tables, {tools})",
        highlight=False,
    )
    console.print(f"try: agent-env validate {escape(str(report.out_dir))}", highlight=False)


__all__ = ["print_report", "synth_env"]
