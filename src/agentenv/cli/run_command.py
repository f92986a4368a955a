"""`agent-env run`: run tasks with agents on the rollout machinery (a plan, the local
runner, a run folder `report` and `export` read), print timelines or a summary table;
`agent-env task list`: the local catalog of tasks."""

from __future__ import annotations

import asyncio
import warnings
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from agentenv.cli._common import (
    BaseUrlOption,
    EpisodeTimeoutOption,
    SeedValuesOption,
    console,
    err_console,
    fail,
    parse_pairs,
    plural,
    print_wide,
)
from agentenv.cli.run_output import error_lines, print_timeline, summary_table
from agentenv.rollout.episode import DEFAULT_CONCURRENCY, DEFAULT_TIMEOUT
from agentenv.rollout.local import LocalRunner
from agentenv.rollout.plan import PlanError, RolloutPlan, resolve_targets
from agentenv.rollout.progress import RichProgress
from agentenv.rollout.store import FINISHED_OK, EpisodeRecord, RolloutStore, StoreError
from agentenv.spec.errors import DocumentError
from agentenv.tasks.bundle import Task, iter_bundles
from agentenv.tasks.harbor import harbor_tasks

INTERRUPTED_EXIT = 130

task_app = typer.Typer(help="The local catalog of tasks.", no_args_is_help=True)


def tasks_of(target: str) -> list[Task]:
    """A bundle folder, a task file, a Harbor task directory (or a folder of them), or a
    catalog name (`bundle` or `bundle/task`), as `rollout` resolves them; exits with the
    reason when it names nothing."""
    try:
        return resolve_targets([target])
    except PlanError as exc:
        fail(str(exc))


EVERY_FAILED = "every episode failed or errored"


def run(
    targets: Annotated[
        list[str],
        typer.Argument(
            help="Bundle folders, task files, Harbor task directories, or catalog names."
        ),
    ],
    agent: Annotated[
        list[str] | None,
        typer.Option(
            "--agent",
            "-a",
            help="Who plays the task's agents (default oracle); repeat for several.",
        ),
    ] = None,
    repeats: Annotated[
        int, typer.Option("--repeats", "-n", min=1, help="Episodes per task and agent.")
    ] = 1,
    seed: SeedValuesOption = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-j", "-c", min=1, help="Episodes at once.")
    ] = DEFAULT_CONCURRENCY,
    timeout: EpisodeTimeoutOption = DEFAULT_TIMEOUT,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run folder (default runs/<time>).")
    ] = None,
    fail_under: Annotated[
        float | None,
        typer.Option(
            "--fail-under",
            help="Exit 1 when the mean score is below this (default: none; exit 1 only when "
            "every episode fails or errors).",
        ),
    ] = None,
    base_url: BaseUrlOption = None,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", "-v", help="Every episode's timeline, with tracebacks of tool crashes."
        ),
    ] = False,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar (many episodes).")
    ] = True,
    states: Annotated[
        bool,
        typer.Option(
            "--states/--no-states",
            help="Keep each episode's final state (states.jsonl; slower by about 0.3 ms an episode).",
        ),
    ] = True,
) -> None:
    """Run tasks with agents into a run folder (plan.json, episodes.jsonl, states.jsonl), as
    `agent-env rollout` does: `agent-env report` and `export` read it.

    One episode prints its timeline (so does every episode with --verbose); many print a
    progress bar and a summary table. Exits 1 when every episode failed or errored, or
    when the mean score is below --fail-under.
    """
    values = parse_pairs(seed or [], "--seed")
    try:
        plan = RolloutPlan.build(
            targets, agent or ["oracle"], repeats=repeats, seeds=[values], base_url=base_url
        )
    except PlanError as exc:
        fail(str(exc))
    folder = out or Path("runs") / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    store = RolloutStore(folder)
    if store.exists() and len(store):
        fail(
            f"{folder} already holds {plural(len(store), 'episode')}: choose another --out (or finish "
            "its plan with `agent-env rollout ... --resume`)"
        )
    many = len(plan) > 1
    bar = RichProgress(err_console, "run") if progress and many and not verbose else None
    try:
        summary = LocalRunner(
            plan,
            store,
            concurrency=concurrency,
            timeout=timeout or None,
            progress=bar,
            keep_states=states,
        ).run_sync()
    except (StoreError, ValueError) as exc:
        fail(str(exc))
    order = {e.id: i for i, e in enumerate(plan.episodes())}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a fresh folder this run wrote: nothing to warn of
        records = sorted(
            (r for r in store.raw_records() if r["episode_id"] in order),
            key=lambda r: order[r["episode_id"]],
        )
    if verbose or not many:
        for data in records:
            print_timeline(console, EpisodeRecord.model_validate(data), verbose=verbose)
    table, total = summary_table(records)
    if many:
        print_wide(table)
    mean, passed = total.mean, total.passed
    console.print(_totals(plan, records, passed, mean), highlight=False)
    console.print(
        f"{summary.failed} failed, {plural(summary.errors, 'error')}, "
        f"{plural(summary.timeouts, 'timeout')}; {plural(summary.ran, 'episode')} in "
        f"{summary.elapsed_s:.1f} s ({summary.episodes_per_s:.1f}/s)",
        highlight=False,
    )
    console.print(
        f"run folder: {escape(str(folder))}   (agent-env report {escape(str(folder))})",
        highlight=False,
    )
    if summary.interrupted:
        err_console.print(
            f"interrupted: {plural(summary.remaining, 'episode')} left; finish with "
            f"`agent-env rollout ... --out {folder} --resume`",
            markup=False,
            highlight=False,
        )
        raise typer.Exit(INTERRUPTED_EXIT)
    errored = sorted({str(r["task"]) for r in records if r["status"] not in FINISHED_OK})
    if errored and passed:
        err_console.print(
            f"{len(errored)} errored: {', '.join(errored)}", markup=False, highlight=False
        )
    if errored and many and not verbose:  # no timeline said why: the first error of each
        for line in error_lines(records):
            err_console.print(line, markup=False, highlight=False)
    if records and passed == 0:
        also = f" ({len(errored)} task(s) errored: {', '.join(errored)})" if errored else ""
        fail(f"{EVERY_FAILED}{also}")
    if fail_under is not None and mean < fail_under:
        fail(f"mean score {mean:.2f} is below --fail-under {fail_under:g}")


def _totals(plan: RolloutPlan, records: list[dict[str, Any]], passed: int, mean: float) -> str:
    """`2 tasks, 2 passed, mean score 1.00`; with several agents or repeats, the episodes
    first: `100 episodes (2 tasks x 1 agent x 50 repeats), 100 passed, ...`."""
    tasks = plural(len(plan.tasks), "task")
    if len(plan.agents) == 1 and plan.repeats == 1 and len(records) == len(plan.tasks):
        head = tasks
    else:
        agents = plural(len(plan.agents), "agent")
        repeats = f" x {plural(plan.repeats, 'repeat')}" if plan.repeats > 1 else ""
        head = f"{plural(len(records), 'episode')} ({tasks} x {agents}{repeats})"
    return f"{head}, {passed} passed, mean score {mean:.2f}"


@task_app.command("list")
def task_list(
    path: Annotated[
        list[Path] | None, typer.Option("--path", help="Search these folders instead.")
    ] = None,
) -> None:
    """One task a line, its catalog name first, then its description."""
    found = False
    for bundle in iter_bundles([p.resolve() for p in path] if path else None):
        for file in bundle.task_files():
            found = True
            try:
                description = Task.load(file, bundle=bundle).spec.description
            except DocumentError as exc:
                description = f"[invalid: {exc.problem}]"
            first = description.strip().splitlines()[0] if description.strip() else ""
            typer.echo(f"{bundle.name}/{file.stem}\t{first}")
    if not found:
        console.print("no tasks found (set AGENTENV_PATH or run from a folder with bundles)")


@task_app.command("import-harbor")
def import_harbor(
    source: Annotated[Path, typer.Argument(help="A Harbor task directory, or a folder of them.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The bundle folder to write into.")],
) -> None:
    """Write Harbor tasks into a bundle: each one's built environment under envs/, its
    tests under artifacts/, its task (with solve.sh as the solution) under tasks/."""
    from agentenv.tasks.harbor import import_harbor_task

    found = harbor_tasks(source) if source.is_dir() else []
    if not found:
        fail(
            f"{source} is not a Harbor task directory (instruction.md and task.toml) nor holds one"
        )
    for task in found:
        try:
            written = asyncio.run(import_harbor_task(task, out))
        except DocumentError as exc:
            fail(str(exc))
        console.print(f"{task.name} -> {written}", highlight=False)
    console.print(f"run them: agent-env run {out} --agent oracle", highlight=False)
