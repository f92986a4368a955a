"""`agent-env validate` for tasks: a task file, every task of a bundle folder, or a Harbor
task directory; each document checked, then each reference solution run by the oracle."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from agentenv.cli._common import console
from agentenv.grading.score import Score
from agentenv.rollout.episode import EnvironmentCache, run_episode
from agentenv.rollout.plan import PlanAgent, PlannedEpisode, harbor_task
from agentenv.rollout.store import EpisodeRecord
from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import ENV_FILE_NAMES, read_document
from agentenv.tasks.bundle import TASK_SUFFIXES, Bundle, Task
from agentenv.tasks.checking import Problem, solution_problems
from agentenv.tasks.harbor import harbor_tasks
from agentenv.tasks.validation import (
    FileReport,
    looks_like_task,
    validate_bundle,
    validate_task_file,
)

DEFAULT_SOLUTION_TIMEOUT = 120.0
"""Seconds a reference solution may take (per task) before validate calls it a failure."""

NO_SOLUTION = "no reference solution (`solution:` in the task, or solutions/<task>.yaml)"


def is_task_target(path: Path) -> bool:
    """Whether `validate` should treat the path as tasks: a task file, a bundle folder that
    is not itself an environment folder, or a Harbor task directory (or a folder of them)."""
    if path.is_file():
        return (
            path.suffix in TASK_SUFFIXES
            and path.name not in ENV_FILE_NAMES
            and (looks_like_task(path))
        )
    if path.is_dir() and any((path / name).is_file() for name in ENV_FILE_NAMES):
        return False
    return path.is_dir() and (Bundle.is_bundle(path) or bool(harbor_tasks(path)))


@dataclass
class Checked:
    """One task as validate saw it: its document's report, and what its solution did."""

    report: FileReport
    task: Task | None = None
    solution: EpisodeRecord | None = None
    no_solution: bool = False

    @property
    def solution_failed(self) -> bool:
        """The solution ran and did not pass (failed, error or timeout)."""
        return self.solution is not None and not (
            self.solution.status == "passed" and self.solution.passed
        )

    @property
    def ok(self) -> bool:
        """A valid document whose solution, if it ran, passed."""
        return self.report.ok and not self.solution_failed


@dataclass
class Summary:
    """Counts over every task validate checked."""

    checked: list[Checked] = field(default_factory=list)

    def line(self, solutions: bool) -> str:
        """`N task files, V valid; solutions: P pass, F fail, W without one`."""
        total = len(self.checked)
        valid = sum(c.report.ok for c in self.checked)
        text = f"{total} task file{'s' if total != 1 else ''}, {valid} valid"
        if not solutions:
            return text + "; solutions not run (--no-solutions)"
        ran = [c for c in self.checked if c.solution is not None]
        failed = sum(c.solution_failed for c in ran)
        parts = [f"{len(ran) - failed} pass", f"{failed} fail"]
        missing = sum(c.no_solution for c in self.checked)
        if missing:
            parts.append(f"{missing} without one")
        return f"{text}; solutions: {', '.join(parts)}"


# -- loading ------------------------------------------------------------------------------


def _harbor(path: Path) -> Checked:
    """A Harbor task directory: building its environment is its document check."""
    report = FileReport(path)
    try:
        task = harbor_task(path)  # as rollout and run resolve it: the same name and file
    except DocumentError as exc:
        report.problems.append(Problem(exc.path, exc.problem))
        return Checked(report)
    report.steps = len(task.spec.steps)
    return Checked(report, task)


def _loaded(report: FileReport, bundle: Bundle | None) -> Checked:
    if not report.ok:
        return Checked(report)
    try:
        task = Task.load(report.path.resolve(), bundle=bundle)
    except DocumentError as exc:
        report.problems.append(Problem(exc.path, exc.problem))
        return Checked(report)
    report.problems += _solution_file_problems(task)
    if not report.ok:
        return Checked(report)
    return Checked(report, task)


def _solution_file_problems(task: Task) -> list[Problem]:
    """The reference solution a task took from its bundle's `solutions/<task>` file (its
    document has none), checked as the document's own is: keys that match no prompt id."""
    found = task.bundle.solution_file(task.file.stem) if task.bundle and task.file else None
    if found is None or not task.spec.solution:
        return []
    own = read_document(task.file)
    if isinstance(own, dict) and own.get("solution"):
        return []  # the document's own solution wins (and was checked with the document)
    return [
        Problem(f"{found}: {key}", message) for (_, key), message in solution_problems(task.spec)
    ]


def _collect(path: Path) -> list[Checked]:
    if path.is_dir() and not Bundle.is_bundle(path):
        return [_harbor(p) for p in harbor_tasks(path)]
    if path.is_dir():
        bundle = Bundle(path.resolve())
        return [_loaded(r, bundle) for r in validate_bundle(path)]
    return [_loaded(validate_task_file(path), None)]


# -- solutions ----------------------------------------------------------------------------


async def run_solution(task: Task, envs: EnvironmentCache, timeout: float | None) -> EpisodeRecord:
    """One episode of `task` with the oracle agent (it replays the reference solution), run
    as `rollout` runs episodes; its record."""
    agent = PlanAgent.from_spec("oracle")
    episode = PlannedEpisode(id="validate", task=task.name, agent=agent.name)
    return await run_episode(task, agent, episode, envs=envs, timeout=timeout, record_tools=False)


def failed_rows(scores: dict[str, Score]) -> list[str]:
    """`verifier[/part]: check: why` for each failed check row of the failed verifiers; a
    failed verifier that names no rows gets one line with what it said."""
    rows: list[str] = []
    for verifier, score in scores.items():
        if score.passed:
            continue
        found = list(_failed_checks(score.details, verifier))
        if not found:
            said = json.dumps(score.details, default=str)
            found = [f"{verifier}: score {score.score:.2f}: {said[:300]}"]
        rows += found
    return rows


def _failed_checks(details: Any, where: str) -> Iterator[str]:
    if not isinstance(details, dict):
        return
    checks = details.get("checks")
    if isinstance(checks, list):
        for check in checks:
            if isinstance(check, dict) and check.get("passed") is False:
                detail = check.get("detail") or check.get("description") or ""
                name = check.get("name", "?")
                yield f"{where}: {name}" + (f": {detail}" if detail else "")
        return
    parts = details.get("parts")
    if isinstance(parts, dict):
        for part, value in parts.items():
            if isinstance(value, dict) and value.get("passed") is False:
                yield from _failed_checks(value.get("details"), f"{where}/{part}")
        return
    results = details.get("results")
    if isinstance(results, list):
        for row in results:
            if isinstance(row, dict) and row.get("result") is False:
                why = row.get("description") or row.get("reason") or ""
                yield f"{where}: {row.get('id', '?')}" + (f": {why}" if why else "")


def _run_solutions(checked: list[Checked], timeout: float | None) -> None:
    envs = EnvironmentCache()

    async def run_all() -> None:
        for item in checked:
            if item.task is None:
                continue
            prompts = any(step.type == "prompt_agent" for step in item.task.spec.steps)
            if prompts and not item.task.spec.solution:
                item.no_solution = True
                continue
            # a task that prompts no agent runs as it is: its verifiers must pass on their own
            item.solution = await run_solution(item.task, envs, timeout)

    asyncio.run(run_all())


# -- printing -----------------------------------------------------------------------------


def _print(item: Checked) -> None:
    report = item.report
    shown = escape(str(report.path))
    if not report.ok:
        count = len(report.problems)
        console.print(
            f"[bold red]invalid[/] {shown}: {count} problem{'s' if count > 1 else ''}",
            highlight=False,
        )
        for problem in report.problems:
            console.print(f"  {escape(str(problem))}", highlight=False)
    elif item.solution_failed:
        console.print(
            f"[bold red]solution fails[/] {shown} ({report.steps} steps)", highlight=False
        )
    else:
        console.print(f"[bold green]ok[/] {shown} ({report.steps} steps)", highlight=False)
    for warning in report.warnings:
        console.print(f"  [yellow]warning:[/] {escape(str(warning))}", highlight=False)
    if item.no_solution:
        console.print(f"  [yellow]warning:[/] {NO_SOLUTION}", highlight=False)
    if item.solution is not None:
        _print_solution(item)


def _print_solution(item: Checked) -> None:
    record = item.solution
    assert record is not None and item.task is not None
    score = "n/a" if record.score is None else f"{record.score:.2f}"
    took = f"{record.duration_s:.1f} s"
    if not item.solution_failed:
        console.print(f"  solution: the oracle passes (score {score}, {took})", highlight=False)
        return
    console.print(
        f"  [red]solution:[/] the oracle does not pass task {escape(item.task.name)}: "
        f"{record.status}, score {score} ({took})",
        highlight=False,
    )
    if record.error:
        console.print(f"    {escape(record.error)}", highlight=False)
    for row in failed_rows(record.scores):
        console.print(f"    failed: {escape(row)}", highlight=False)


def validate_tasks(
    path: Path, *, solutions: bool = True, timeout: float | None = DEFAULT_SOLUTION_TIMEOUT
) -> None:
    """Check task documents, then run each reference solution with the oracle (unless
    `solutions` is False); say every problem of each; exit 1 if any has one."""
    checked = _collect(path)
    if not checked:
        console.print(f"{escape(str(path))}: no task files in tasks/", highlight=False)
    if solutions:
        _run_solutions(checked, timeout)
    for item in checked:
        _print(item)
    summary = Summary(checked)
    if len(checked) > 1 or solutions:
        console.print(summary.line(solutions), highlight=False)
    if any(not item.ok for item in checked):
        raise typer.Exit(1)
