"""`agent-env run`: run a bundle's tasks (or one task) with an agent, print timelines and
scores, write a run folder; `agent-env task list`: the local catalog of tasks."""

from __future__ import annotations

import asyncio
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from agentenv.agents import make_agent
from agentenv.agents.base import Agent
from agentenv.cli._common import console, fail
from agentenv.registry import RegistryError
from agentenv.spec.errors import DocumentError
from agentenv.tasks.bundle import Bundle, Task, TaskNotFound, iter_bundles
from agentenv.tasks.context import DeployedAgentRequest, TaskContext
from agentenv.tasks.harbor import harbor_task_spec, harbor_tasks
from agentenv.tasks.run_folder import run_to_folder, trajectory_rows
from agentenv.tasks.runner import TaskResult
from agentenv.tasks.verify_script import VERIFIER_PRINCIPAL

task_app = typer.Typer(help="The local catalog of tasks.", no_args_is_help=True)


def tasks_of(target: str) -> list[Task]:
    """A bundle folder, a task file, a Harbor task directory (or a folder of them), or a
    catalog name (`bundle` or `bundle/task`)."""
    path = Path(target)
    try:
        if path.is_file():
            return [Task.load(path)]
        if path.is_dir() and harbor_tasks(path):
            return [harbor_task(p) for p in harbor_tasks(path)]
        if path.is_dir():
            if not Bundle.is_bundle(path):
                fail(f"{path} is not a bundle (no tasks/ or envs/ folder)")
            bundle = Bundle(path)
            files = bundle.task_files()
            if not files:
                fail(f"bundle {path} has no tasks (tasks/*.json|yaml)")
            return [Task.load(f, bundle=bundle) for f in files]
        if "/" in target:
            try:
                return [Task.get(target)]
            except TaskNotFound:
                # A mistyped path looks like a catalog name: say both.
                fail(
                    f"no task file, bundle folder or catalog task {target!r} "
                    "(see `agent-env task list`)"
                )
        for bundle in iter_bundles():
            if bundle.name == target:
                return [Task.load(f, bundle=bundle) for f in bundle.task_files()]
    except (TaskNotFound, DocumentError) as exc:
        fail(str(exc))
    fail(f"no bundle, task file or catalog task {target!r} (see `agent-env task list`)")


def harbor_task(path: Path) -> Task:
    """A Harbor task directory as a Task (its environment built on this machine)."""
    spec = asyncio.run(harbor_task_spec(path))
    return Task(spec=spec, name=f"harbor/{spec.name}", file=path.resolve() / "task.toml")


def _parse_seed(items: list[str]) -> dict[str, Any]:
    import json

    seed: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            fail(f"--seed expects KEY=VALUE, got {item!r}")
        try:
            seed[key] = json.loads(raw)
        except json.JSONDecodeError:
            seed[key] = raw
    return seed


def _first_arg(args: dict[str, Any] | None) -> str:
    if not args:
        return ""
    value = next(iter(args.values()))
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _timeline(agent_label: str, task: Task, ctx: TaskContext, result: TaskResult) -> None:
    # A verifier script's own calls (env_outcome_verifier with verify.py) are shown, marked,
    # but they are not the agent's turns.
    calls = [
        r
        for r in trajectory_rows(ctx)
        if r["kind"] == "call" and r["principal"] != VERIFIER_PRINCIPAL
    ]
    denied = sum(1 for r in calls if r["denied"])
    times = [r["virtual_time"] for r in calls if r["virtual_time"]]
    span = ""
    if times:
        start, end = (datetime.fromisoformat(t) for t in (times[0], times[-1]))
        span = f"   {start:%H:%M:%S}-{end:%H:%M:%S}"
    console.print(
        f"[bold]{escape(agent_label)}[/] on [bold]{escape(task.name)}[/]   "
        f"{len(calls)} turns   {denied} denied{span}",
        highlight=False,
    )
    i = 0
    for row in trajectory_rows(ctx):
        if row["kind"] not in ("call", "message"):
            continue
        when = _clock(row["virtual_time"])
        if row["kind"] == "message":  # a conversation: who said what, between the calls
            text = row["detail"] or ""
            text = text if len(text) <= 70 else text[:67] + "..."
            who = row["principal"] or row["role"] or ""
            console.print(f"    {when} [dim]{escape(who)}: {escape(text)}[/]", highlight=False)
            continue
        mark = " [red]denied[/]" if row["denied"] else (" [yellow]error[/]" if row["error"] else "")
        if row["principal"] == VERIFIER_PRINCIPAL:
            number = "  v"
        else:
            i += 1
            number = f"{i:>3}"
        console.print(
            f"{number} {when} {escape(row['tool'] or '')} {escape(_first_arg(row['args']))}{mark}",
            highlight=False,
        )
    for step in result.steps:
        if step.status not in ("succeeded", "pending"):
            console.print(
                f"    step {escape(step.id)} [red]{step.status}[/]: {escape(step.error or '')}",
                highlight=False,
            )
    if result.score is None:
        why = "its verifiers did not run" if result.status == "error" else "no verifier"
        console.print(f"status {result.status} ({why})", highlight=False)
    else:
        parts = ", ".join(
            f"{escape(_step_type(result, sid))} {s.score:.2f}" for sid, s in result.scores.items()
        )
        console.print(f"score {result.score:.2f}  ({parts})", highlight=False)
    if result.error and not any(s.error == result.error for s in result.steps):
        console.print(f"[red]error:[/] {escape(result.error)}", highlight=False)
    console.print()


def _clock(value: str | None) -> str:
    return datetime.fromisoformat(value).strftime("%H:%M:%S") if value else "--:--:--"


def _step_type(result: TaskResult, step_id: str) -> str:
    for step in result.steps:
        if step.id == step_id:
            return step.type
    return step_id


def run(
    target: Annotated[str, typer.Argument(help="A bundle folder, a task file, or a catalog name.")],
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="Who plays the task's agents (e.g. oracle).")
    ] = "oracle",
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Run folder (default runs/<time>).")
    ] = None,
    fail_under: Annotated[
        float | None,
        typer.Option("--fail-under", help="Exit 1 when the mean score is below this."),
    ] = None,
    seed: Annotated[
        list[str] | None, typer.Option("--seed", help="KEY=VALUE for <key> placeholders.")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="OpenAI-compatible endpoint for openai:MODEL agents (e.g. http://localhost:8000/v1).",
        ),
    ] = None,
) -> None:
    """Run tasks with an agent: a timeline per task, scores, and a run folder.

    Exits 1 when a task errors (a step failed) or the mean score is below --fail-under.
    """
    if base_url:  # read by openai:MODEL agents (see docs/agents.md)
        os.environ["AGENTENV_OPENAI_BASE_URL"] = base_url
    tasks = tasks_of(target)
    values = _parse_seed(seed or [])
    try:
        make_agent(agent)  # fail before anything runs
    except RegistryError as exc:
        fail(str(exc))
    folder = out or Path("runs") / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")

    def factory(request: DeployedAgentRequest) -> Agent:
        return make_agent(agent)

    results = []
    for task in tasks:
        task_dir = folder / task.name.replace("/", "__")
        ctx, result = asyncio.run(run_to_folder(task, factory, task_dir, seed=values))
        _timeline(agent, task, ctx, result)
        results.append(result)
    scored = [r.score for r in results if r.score is not None]
    mean = sum(scored) / len(scored) if scored else 0.0
    passed = sum(1 for r in results if r.passed)
    console.print(f"run folder: {folder}", highlight=False)
    shown = f"{mean:.2f}" if scored else "n/a"
    console.print(f"{len(results)} tasks, {passed} passed, mean score {shown}", highlight=False)
    errored = [r.task for r in results if r.status == "error"]
    if errored:
        fail(f"{len(errored)} task(s) errored: {', '.join(errored)}")
    if fail_under is not None and mean < fail_under:
        fail(f"mean score {mean:.2f} is below --fail-under {fail_under:g}")


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
