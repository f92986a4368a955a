"""`agent-env rollout`: many episodes into a resumable run folder; `agent-env export`:
a run's episodes as training data; `agent-env report`: pass rates, pass@k and pass^k."""

from __future__ import annotations

import contextlib
import json
import sys
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.text import Text

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
from agentenv.rollout.episode import DEFAULT_TIMEOUT
from agentenv.rollout.exporters import EXPORTERS, ExportError, ExportFilter, export_run
from agentenv.rollout.exporters.registry import get_exporter
from agentenv.rollout.jsonsafe import safe_text
from agentenv.rollout.local import DEFAULT_CONCURRENCY, LocalRunner, RolloutSummary
from agentenv.rollout.metrics import compute_metrics
from agentenv.rollout.plan import PlanError, RolloutPlan
from agentenv.rollout.processes import ProcessRunner, WorkerStartError
from agentenv.rollout.progress import RichProgress
from agentenv.rollout.ray_runner import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_WORKER_RETRIES,
    RayRunner,
    RayUnavailable,
)
from agentenv.rollout.store import RolloutStore, StoreError
from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import read_document

INTERRUPTED_EXIT = 130


@contextlib.contextmanager
def _warnings_to_console() -> Iterator[None]:
    """Show Python warnings (e.g. a partial record dropped on resume) as one clean line."""

    def show(message: Any, category: Any, *args: Any, **kwargs: Any) -> None:
        # Text, not markup: `episodes.jsonl:100:` is a path and a line, not an emoji code
        err_console.print(_warning(str(message)), highlight=False)

    with warnings.catch_warnings():  # restores showwarning and the filters after
        warnings.simplefilter("always")
        warnings.showwarning = show
        yield


def _warning(message: str) -> Text:
    """`warning: <message>`, the message shown as it is (no markup, no emoji codes)."""
    return Text.assemble(("warning:", "yellow"), " ", safe_text(message))


def _plain(message: str) -> None:
    """Print a line to stdout as it is: paths and names are not markup or emoji codes."""
    console.print(safe_text(message), markup=False, emoji=False, highlight=False)


def _seed_sets(seed: list[str], seeds_file: Path | None) -> list[dict[str, Any]]:
    base = parse_pairs(seed, "--seed")
    if seeds_file is None:
        return [base]
    try:
        data = read_document(seeds_file)
    except DocumentError as exc:
        fail(str(exc))
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data or not all(isinstance(s, dict) for s in data):
        fail(f"{seeds_file}: expected a list of objects (one set of seed values each)")
    return [{**base, **s} for s in data]


def rollout(
    targets: Annotated[
        list[str],
        typer.Argument(help="Bundle folders, task files, or catalog names (bundle, bundle/task)."),
    ],
    agent: Annotated[
        list[str] | None,
        typer.Option("--agent", "-a", help="An agent spec (e.g. oracle); repeat for several."),
    ] = None,
    repeats: Annotated[
        int, typer.Option("--repeats", "-n", min=1, help="Episodes per task, agent and seed.")
    ] = 1,
    seed: SeedValuesOption = None,
    seeds_file: Annotated[
        Path | None,
        typer.Option(
            "--seeds", help="A JSON/YAML list (or JSONL) of seed sets: one plan row each."
        ),
    ] = None,
    concurrency: Annotated[
        int,
        typer.Option(
            "--concurrency",
            "-j",
            "-c",
            min=1,
            help="Episodes at once (per worker: Ray, processes).",
        ),
    ] = DEFAULT_CONCURRENCY,
    timeout: EpisodeTimeoutOption = DEFAULT_TIMEOUT,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run folder (default runs/<time>).")
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Finish a run folder: run only what is not done.")
    ] = False,
    retry_errors: Annotated[
        bool, typer.Option("--retry-errors", help="With --resume, run errors and timeouts again.")
    ] = False,
    backend: Annotated[
        str,
        typer.Option(
            "--backend",
            help="local (one process), processes (one worker process per core) or ray.",
        ),
    ] = "local",
    address: Annotated[
        str | None, typer.Option("--address", help="Ray cluster address (e.g. auto).")
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            help="Workers: processes (default: this machine's cores) or Ray (cluster CPUs).",
        ),
    ] = None,
    batch_size: Annotated[
        int, typer.Option("--batch-size", min=1, help="Episodes per Ray batch.")
    ] = DEFAULT_BATCH_SIZE,
    worker_retries: Annotated[
        int,
        typer.Option(
            "--worker-retries",
            min=0,
            help="Ray, processes: how often an episode may run again after its worker died.",
        ),
    ] = DEFAULT_WORKER_RETRIES,
    progress: Annotated[
        bool, typer.Option("--progress/--no-progress", help="Show a progress bar.")
    ] = True,
    fsync: Annotated[
        bool, typer.Option("--fsync", help="fsync every record (survives power loss; slower).")
    ] = False,
    base_url: BaseUrlOption = None,
) -> None:
    """Run tasks x agents x seeds x repeats into a run folder; Ctrl-C keeps what finished.

    Every episode has a stable id, so `--resume` with the same arguments runs only the
    episodes the folder does not hold yet. Exits 130 when interrupted.
    """
    if backend not in ("local", "processes", "ray"):
        fail(f"--backend must be local, processes or ray, got {backend!r}")
    if workers is not None and backend == "local":
        fail("--workers is for --backend processes or ray")
    if address is not None and backend != "ray":
        fail("--address is for --backend ray")
    seeds = _seed_sets(seed or [], seeds_file)
    with _warnings_to_console():
        try:
            plan = RolloutPlan.build(
                targets, agent or ["oracle"], repeats=repeats, seeds=seeds, base_url=base_url
            )
        except PlanError as exc:
            fail(str(exc))
        folder = out or Path("runs") / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
        store = RolloutStore(folder, fsync=fsync)
        if store.exists() and not resume:
            held = len(store)
            if held:
                fail(
                    f"{folder} already holds {plural(held, 'episode')}: add --resume to finish its plan, "
                    "or choose another --out"
                )
        if retry_errors and not resume:
            fail("--retry-errors goes with --resume")
        previous = store.read_plan() if resume else None
        if previous is not None and previous.get("tasks") != plan.describe()["tasks"]:
            err_console.print(
                _warning(
                    "the tasks differ from the run folder's plan.json; episodes already done "
                    "are kept"
                ),
                highlight=False,
            )
        bar = RichProgress(err_console) if progress else None
        options: dict[str, Any] = {
            "timeout": timeout or None,
            "retry_errors": retry_errors,
            "progress": bar,
        }
        try:
            if backend == "ray":
                summary = RayRunner(
                    plan,
                    store,
                    address=address,
                    num_workers=workers,
                    batch_size=batch_size,
                    worker_retries=worker_retries,
                    concurrency=concurrency,
                    **options,
                ).run()
            elif backend == "processes":
                summary = ProcessRunner(
                    plan,
                    store,
                    workers=workers,
                    concurrency=concurrency,
                    worker_retries=worker_retries,
                    **options,
                ).run()
            else:
                summary = LocalRunner(plan, store, concurrency=concurrency, **options).run_sync()
        except (StoreError, RayUnavailable, WorkerStartError, ValueError) as exc:
            fail(str(exc))
    _print_summary(summary, folder)
    if summary.interrupted:
        err_console.print(
            f"interrupted: {plural(summary.remaining, 'episode')} left; run the same command with "
            "--resume to finish",
            markup=False,
            emoji=False,
            highlight=False,
        )
        raise typer.Exit(INTERRUPTED_EXIT)


def _print_summary(summary: RolloutSummary, folder: Path) -> None:
    _plain(
        f"{plural(summary.ran, 'episode')} in {summary.elapsed_s:.1f} s "
        f"({summary.episodes_per_s:.1f}/s): {summary.passed} passed, {summary.failed} failed, "
        f"{plural(summary.errors, 'error')}, {plural(summary.timeouts, 'timeout')}"
        + (f"; {summary.skipped} were already done" if summary.skipped else "")
    )
    _plain(f"run folder: {folder}   (agent-env report {folder})")


def export(
    run: Annotated[Path, typer.Argument(help="A run folder written by agent-env run or rollout.")],
    format: Annotated[
        str, typer.Option("--format", "-f", help="sft-chat, rl, parquet, atif, or a plugin.")
    ] = "sft-chat",
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="File (default stdout); for atif, a folder: one file each."
        ),
    ] = None,
    min_score: Annotated[
        float | None, typer.Option("--min-score", help="Only episodes scoring at least this.")
    ] = None,
    passed_only: Annotated[
        bool, typer.Option("--passed-only", help="Only episodes that passed.")
    ] = False,
    status: Annotated[
        list[str] | None,
        typer.Option("--status", help="Only these statuses (passed, failed, error, timeout)."),
    ] = None,
    task: Annotated[list[str] | None, typer.Option("--task", help="Only these tasks.")] = None,
    agent: Annotated[list[str] | None, typer.Option("--agent", help="Only these agents.")] = None,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-O", help="KEY=VALUE for the exporter (e.g. metadata=false)."),
    ] = None,
) -> None:
    """Write a run's episodes in a training or interchange format (one episode per agent)."""
    _run_folder(run)
    if format not in EXPORTERS.names():
        fail(f"unknown format {format!r} (formats: {', '.join(EXPORTERS.names())})")
    try:
        exporter = get_exporter(format, **parse_pairs(option or [], "--option"))
    except ExportError as exc:
        fail(str(exc))
    if exporter.binary and out is None and sys.stdout.isatty():
        fail(f"{format} is a binary format: give --out FILE{exporter.suffix}")
    where = ExportFilter(
        min_score=min_score,
        passed_only=passed_only,
        statuses=set(status) if status else None,
        tasks=set(task) if task else None,
        agents=set(agent) if agent else None,
    )
    with _warnings_to_console():
        try:
            if out is not None:
                if out.suffix:
                    out.parent.mkdir(parents=True, exist_ok=True)
                count = export_run(run, exporter, out, where=where)
            elif exporter.binary:
                count = export_run(run, exporter, sys.stdout.buffer, where=where)
            else:
                count = export_run(run, exporter, sys.stdout, where=where)
                sys.stdout.flush()
        except (ExportError, StoreError) as exc:
            fail(str(exc))
        except OSError as exc:  # the destination: a file where a folder goes, no permission
            fail(f"cannot write {exc.filename or out}: {exc.strerror or exc}")
    err_console.print(
        safe_text(f"exported {count} {format} document(s)" + (f" to {out}" if out else "")),
        markup=False,
        emoji=False,
        highlight=False,
    )


def _run_folder(run: Path) -> RolloutStore:
    """The store of a run folder `run` or `rollout` wrote; exits saying what `run` is
    otherwise (an older `agent-env run` folder, one subfolder per task, is named as such)."""
    store = RolloutStore(run)
    if store.exists():
        return store
    if run.is_dir() and any(run.glob("*/scores.json")):
        fail(
            f"{run} is a run folder in the older format (one folder per task, with "
            "scores.json and trajectory.jsonl), which report and export do not read: run the "
            "tasks again with `agent-env run` or `agent-env rollout`, which write "
            f"{store.path.name}"
        )
    fail(
        f"{run} is not a run folder (no {store.path.name}); report and export read what "
        "`agent-env run` and `agent-env rollout` write"
    )


def report(
    run: Annotated[Path, typer.Argument(help="A run folder written by agent-env run or rollout.")],
    k: Annotated[
        list[int] | None,
        typer.Option("--k", "-k", min=1, help="k for pass@k and pass^k (default 1, 2, 4, ...)."),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print JSON instead.")] = False,
) -> None:
    """Pass rate, mean score, pass@k and pass^k per agent and per task (docs/metrics.md)."""
    store = _run_folder(run)
    with _warnings_to_console():
        metrics = compute_metrics(store.raw_records(), ks=k)
        plan = store.read_plan()
    planned = plan.get("episodes") if plan else None
    if json_output:
        data = metrics.to_json()
        data["planned"] = planned
        typer.echo(json.dumps(data, indent=2))
        return
    for table in metrics.tables():
        print_wide(table)
    line = plural(metrics.episodes, "episode")
    if isinstance(planned, int) and planned > metrics.episodes:
        line += f" of {planned} planned ({planned - metrics.episodes} not done: --resume)"
    _plain(line)
