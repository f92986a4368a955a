"""`agent-env trials`: verifier reliability trials over tasks, as one rollout (see
`rollout.trials`); `--out` keeps it as a run folder `report` and `export` read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from agentenv.cli._common import (
    EpisodeTimeoutOption,
    SeedValuesOption,
    console,
    err_console,
    fail,
    parse_pairs,
    print_wide,
)
from agentenv.cli.run_command import tasks_of
from agentenv.rollout.episode import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT
from agentenv.rollout.plan import PlanError
from agentenv.rollout.progress import RichProgress
from agentenv.rollout.store import RolloutStore, StoreError
from agentenv.rollout.trials import run_trials
from agentenv.tasks.trials import TaskTrials


def _cell(trials: TaskTrials, agent: str) -> str:
    run = trials.runs.get(agent)
    if run is None:
        return "-"
    score = "n/a" if run.score is None else f"{run.score:.2f}"
    mark = "pass" if run.passed else ("error" if run.status == "error" else "fail")
    return f"{mark} {score}"


def trials(
    target: Annotated[
        str,
        typer.Argument(help="A bundle, a task file, a Harbor task directory, or a catalog name."),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="Keep the trials here: a run folder, and report.json (the verdicts).",
        ),
    ] = None,
    seed: SeedValuesOption = None,
    timeout: EpisodeTimeoutOption = DEFAULT_TIMEOUT,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-j", "-c", min=1, help="Episodes at once.")
    ] = DEFAULT_CONCURRENCY,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")
    ] = True,
) -> None:
    """Check that each task's verifier tells done from not done: the oracle must pass, a
    no-op agent must fail, a partial agent (the oracle's first half) must fail.

    Exits 1 when any task's verifier is unreliable.
    """
    values = parse_pairs(seed or [], "--seed")
    tasks = tasks_of(target)
    if out is not None and RolloutStore(out).exists() and len(RolloutStore(out)):
        fail(f"{out} already holds episodes: choose another --out")
    bar = RichProgress(err_console, "trials") if progress and len(tasks) > 1 else None
    try:
        results = asyncio.run(
            run_trials(
                tasks,
                out,
                seed=values,
                timeout=timeout or None,
                concurrency=concurrency,
                progress=bar,
            )
        )
    except (PlanError, StoreError) as exc:
        fail(str(exc))
    table = Table(title=f"verifier trials: {target}")
    for column in (
        "task",
        "oracle (must pass)",
        "no-op (must fail)",
        "partial (must fail)",
        "verifier",
    ):
        table.add_column(column)
    for r in results:
        verdict = (
            "[green]reliable[/]" if r.reliable else "[red]UNRELIABLE[/]: " + "; ".join(r.problems)
        )
        table.add_row(r.task, _cell(r, "oracle"), _cell(r, "noop"), _cell(r, "partial"), verdict)
    print_wide(table)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        report = [r.model_dump(mode="json") for r in results]
        (out / "report.json").write_text(json.dumps(report, indent=1))
        console.print(
            f"report: {out / 'report.json'}   (the episodes: agent-env report {out})",
            highlight=False,
        )
    bad = [r.task for r in results if not r.reliable]
    if bad:
        fail(f"{len(bad)} of {len(results)} task(s) have unreliable verifiers: {', '.join(bad)}")
    console.print(f"{len(results)} task(s), every verifier reliable", highlight=False)
