"""`agent-env validate` for tasks: a task file, or every task of a bundle folder."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape

from agentenv.cli._common import console
from agentenv.spec.loader import ENV_FILE_NAMES
from agentenv.tasks.bundle import TASK_SUFFIXES, Bundle
from agentenv.tasks.validation import (
    FileReport,
    looks_like_task,
    validate_bundle,
    validate_task_file,
)


def is_task_target(path: Path) -> bool:
    """Whether `validate` should treat the path as tasks: a task file, or a bundle folder
    that is not itself an environment folder."""
    if path.is_file():
        return (
            path.suffix in TASK_SUFFIXES
            and path.name not in ENV_FILE_NAMES
            and (looks_like_task(path))
        )
    if path.is_dir() and Bundle.is_bundle(path):
        return not any((path / name).is_file() for name in ENV_FILE_NAMES)
    return False


def _print(report: FileReport) -> None:
    shown = escape(str(report.path))
    if report.ok:
        console.print(f"[bold green]ok[/] {shown} ({report.steps} steps)", highlight=False)
    else:
        count = len(report.problems)
        console.print(
            f"[bold red]invalid[/] {shown}: {count} problem{'s' if count > 1 else ''}",
            highlight=False,
        )
        for problem in report.problems:
            console.print(f"  {escape(str(problem))}", highlight=False)
    for warning in report.warnings:
        console.print(f"  [yellow]warning:[/] {escape(str(warning))}", highlight=False)


def validate_tasks(path: Path) -> None:
    """Check task files and say every problem of each; exit 1 if any has one."""
    if path.is_dir():
        reports = validate_bundle(path)
        if not reports:
            console.print(f"{escape(str(path))}: no task files in tasks/", highlight=False)
    else:
        reports = [validate_task_file(path)]
    for report in reports:
        _print(report)
    bad = [r for r in reports if not r.ok]
    if len(reports) > 1:
        console.print(
            f"{len(reports)} task files, {len(reports) - len(bad)} valid", highlight=False
        )
    if bad:
        raise typer.Exit(1)
