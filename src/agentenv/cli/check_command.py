"""`agent-env check ENV`: call every tool with generated arguments and check the invariants
(no crash, schemas hold, reads do not write, determinism, roles). See docs/checks.md."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from agentenv.cli._common import console, err_console, fail, load_env
from agentenv.cli.random_seed import OldSeed, refuse_old_seed
from agentenv.synth.check import DEFAULT_CALLS, CheckError, CheckReport, check_environment

_SHOWN_PER_TOOL = 5
PROCESS_ENV_CALLS = 5
"""Generated calls per tool on a process environment unless --calls says otherwise: each
call that reaches the server needs a fresh server process (about a second each here)."""
_HEADERS = {"invalid_arguments": "invalid args", "tool_error": "tool error"}


def check(
    path: Annotated[Path, typer.Argument(help="Environment document, or the folder holding it.")],
    seed: Annotated[
        int,
        typer.Option("--random-seed", help="Seed of the generated calls: same seed, same calls."),
    ] = 0,
    calls: Annotated[
        int | None,
        typer.Option(
            "--calls",
            "-n",
            help=f"Generated calls per tool (1-10000; default {DEFAULT_CALLS}, "
            f"{PROCESS_ENV_CALLS} on a process environment).",
            show_default=False,
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    role: Annotated[
        list[str] | None,
        typer.Option("--role", "-r", help="Check as this role (repeatable; default: every role)."),
    ] = None,
    tool: Annotated[
        list[str] | None,
        typer.Option("--tool", "-t", help="Check only this tool (repeatable; default: all)."),
    ] = None,
    old_seed: OldSeed = None,
) -> None:
    """Call every tool with generated arguments and check the invariants every environment
    should keep. Exits 1 on a violation; each comes with an `agent-env call` line that
    reproduces it."""
    refuse_old_seed(old_seed, "check")
    env = load_env(path)
    if calls is None:
        calls = PROCESS_ENV_CALLS if env.runtimes() else DEFAULT_CALLS
    status = None
    if not as_json and err_console.is_terminal:
        status = err_console.status("checking…")
        status.start()

    def progress(name: str, index: int, total: int) -> None:
        if status is not None:
            status.update(f"checking {escape(name)} ({index + 1}/{total})")

    try:
        report = check_environment(
            env, seed=seed, calls_per_tool=calls, roles=role, tools=tool, on_tool=progress
        )
    except CheckError as exc:
        fail(str(exc))
    finally:
        if status is not None:
            status.stop()
    if as_json:
        typer.echo(report.model_dump_json(indent=2))
    else:
        _print(report, path)
    if not report.passed:
        raise typer.Exit(1)


def _print(report: CheckReport, path: Path) -> None:
    table = Table(title=f"{report.env}: {report.summary.calls} calls (seed {report.seed})")
    kinds = list(report.summary.errors_by_kind)
    table.add_column("tool", style="bold", no_wrap=True)
    table.add_column("kind")
    table.add_column("calls", justify="right")
    table.add_column("ok", justify="right")
    for kind in kinds:  # one column per error kind seen: denied, invalid_arguments, ...
        table.add_column(_HEADERS.get(kind, kind), justify="right")
    table.add_column("violations", justify="right", no_wrap=True)
    for tool in report.tools:
        count = len(tool.violations)
        table.add_row(
            escape(tool.tool),
            tool.kind,
            str(tool.calls),
            str(tool.ok),
            *(str(tool.errors_by_kind.get(kind, 0)) for kind in kinds),
            f"[bold red]{count}[/]" if count else "0",
        )
    console.print(table)
    for tool in report.tools:
        for violation in tool.violations[:_SHOWN_PER_TOOL]:
            times = f" (x{violation.count})" if violation.count > 1 else ""
            console.print(
                f"[bold red]{violation.kind}[/] {escape(tool.tool)}{times}: "
                f"{escape(violation.message)}",
                highlight=False,
            )
            console.print(f"  {escape(violation.call.command(path))}", highlight=False)
        hidden = len(tool.violations) - _SHOWN_PER_TOOL
        if hidden > 0:
            console.print(f"  … and {hidden} more for {escape(tool.tool)} (see --json)")
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    s = report.summary
    verdict = "[bold green]passed[/]" if report.passed else "[bold red]failed[/]"
    console.print(
        f"{verdict}: {s.tools} tools, {s.calls} calls, {s.ok} ok, "
        f"{s.violations} violations"
        + (
            f" ({', '.join(f'{k} {n}' for k, n in s.violations_by_kind.items())})"
            if s.violations
            else ""
        ),
        highlight=False,
    )
