"""`agent-env trials`: verifier reliability trials over tasks (see `tasks.trials`)."""

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
    fail,
    parse_pairs,
)
from agentenv.cli.run_command import tasks_of
from agentenv.rollout.episode import DEFAULT_TIMEOUT
from agentenv.tasks.trials import TaskTrials, run_trials


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
        Path | None, typer.Option("--out", "-o", help="Keep the run folders and report.json here.")
    ] = None,
    seed: SeedValuesOption = None,
    timeout: EpisodeTimeoutOption = DEFAULT_TIMEOUT,
) -> None:
    """Check that each task's verifier tells done from not done: the oracle must pass, a
    no-op agent must fail, a partial agent (the oracle's first half) must fail.

    Exits 1 when any task's verifier is unreliable.
    """
    values = parse_pairs(seed or [], "--seed")
    tasks = tasks_of(target)
    results: list[TaskTrials] = []
    for task in tasks:
        results.append(asyncio.run(run_trials(task, out, seed=values, timeout=timeout or None)))
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
    console.print(table)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        report = [r.model_dump(mode="json") for r in results]
        (out / "report.json").write_text(json.dumps(report, indent=1))
        console.print(f"report: {out / 'report.json'}", highlight=False)
    bad = [r.task for r in results if not r.reliable]
    if bad:
        fail(f"{len(bad)} of {len(results)} task(s) have unreliable verifiers: {', '.join(bad)}")
    console.print(f"{len(results)} task(s), every verifier reliable", highlight=False)
