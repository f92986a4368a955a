"""`agent-env graph`: an environment's tool dependency graph (JSON or DOT);
`agent-env synth tasks`: verified tasks synthesized by graph walks, written as a bundle.

`synth_app` is the `synth` command group; other synthesis commands join it here.
"""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from time import perf_counter
from typing import Annotated, Any

import typer
from rich.markup import escape

from agentenv.cli._common import console, err_console, fail, load_env
from agentenv.cli.random_seed import OldSeed, RandomSeed, refuse_old_seed
from agentenv.synth.dataset import (
    SynthError,
    parse_ratios,
    prepare_output,
    write_bundle,
    write_report,
)
from agentenv.synth.diagnosis import reason_lines, suggestions
from agentenv.synth.graph import build_graph
from agentenv.synth.knobs import KnobError, Knobs
from agentenv.synth.tasks import SynthConfig, SynthResult, TaskSynthesizer

INTERRUPTED_EXIT = 130
USAGE_EXIT = 2

synth_app = typer.Typer(help="Synthesize environments and verifiable tasks.", no_args_is_help=True)


@synth_app.callback()
def _synth() -> None:
    """Synthesize environments and verifiable tasks."""  # a group even with one command


def graph(
    env: Annotated[Path, typer.Argument(help="An environment document or its folder.")],
    format: Annotated[
        str, typer.Option("--format", "-f", help="json, dot, svg, png or html.")
    ] = "json",
    role: Annotated[
        str | None, typer.Option("--role", help="Whose tools (default: the env's default role).")
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Write here, not stdout.")] = None,
    probes: Annotated[
        int, typer.Option("--probes", help="Calls per tool to observe outputs (0: none).")
    ] = 3,
    seed: Annotated[int, typer.Option("--random-seed", help="Seed of the probes.")] = 0,
) -> None:
    """The tool dependency graph: an edge A -> B when an output field of A can feed an
    input parameter of B (strong: same normalised identifier; weak: otherwise)."""
    formats = ("json", "dot", "svg", "png", "html")
    if format not in formats:
        fail(f"--format must be one of {', '.join(formats)}, got {format!r}", USAGE_EXIT)
    picture = format in ("svg", "png", "html")
    if picture:
        # Imported here: the drawing libraries are an extra (`graph`), the rest is not.
        from agentenv.synth.graph_draw import DrawingUnavailable, require

        try:
            require(format)  # type: ignore[arg-type]
        except DrawingUnavailable as exc:
            fail(str(exc))
    if not 0 <= probes <= 100:
        fail(f"--probes must be between 0 and 100, got {probes}", USAGE_EXIT)
    environment = load_env(env)
    try:
        found = asyncio.run(build_graph(environment, role=role, probes=probes, seed=seed))
    except ValueError as exc:
        fail(str(exc), USAGE_EXIT)
    if picture:
        from agentenv.synth.graph_draw import draw

        data = draw(found, format)  # type: ignore[arg-type]
        if out is None:
            stdout = typer.get_binary_stream("stdout")
            if format == "png" and stdout.isatty():
                fail("a PNG is binary: pass --out FILE.png (or redirect stdout)", USAGE_EXIT)
            stdout.write(data)
            stdout.flush()
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        stats = found.to_json()["stats"]
        console.print(
            f"{stats['nodes']} tools, {stats['edges']} edges ({stats['strong']} strong) "
            f"drawn as {format} -> {out}",
            highlight=False,
        )
        return
    if format == "dot":
        text = found.to_dot()
    else:
        import json

        text = json.dumps(found.to_json(), indent=2, ensure_ascii=False) + "\n"
    if out is None:
        typer.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    stats = found.to_json()["stats"]
    console.print(
        f"{stats['nodes']} tools, {stats['edges']} edges ({stats['strong']} strong) -> {out}",
        highlight=False,
    )


@synth_app.command("tasks")
def synth_tasks(
    env: Annotated[Path, typer.Argument(help="An environment document or its folder.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="The bundle folder to write.")],
    n: Annotated[int, typer.Option("-n", "--count", help="How many tasks to make.")] = 100,
    depth: Annotated[str, typer.Option("--depth", help="Calls per walk: 3 or 2..6.")] = "2..4",
    topology: Annotated[
        str, typer.Option("--topology", help="mixed, or a list of chain, fan-in, fan-out.")
    ] = "mixed",
    obfuscation: Annotated[
        float, typer.Option("--obfuscation", help="Chance to name a record by an attribute (0-1).")
    ] = 0.0,
    distractors: Annotated[
        int, typer.Option("--distractors", help="Near-duplicate records added per task.")
    ] = 0,
    seed: RandomSeed = 0,
    role: Annotated[str | None, typer.Option("--role", help="The agent's role.")] = None,
    split: Annotated[
        str, typer.Option("--split", help="train,dev,test shares, e.g. 0.8,0.1,0.1.")
    ] = "0.8,0.1,0.1",
    trials: Annotated[
        str, typer.Option("--trials", help="full (through the task runner) or direct.")
    ] = "full",
    max_candidates: Annotated[
        int | None, typer.Option("--max-candidates", help="Stop after this many candidates.")
    ] = None,
    gold_replay: Annotated[
        bool, typer.Option("--gold-replay/--no-gold-replay", help="Add the gold-replay check.")
    ] = True,
    force: Annotated[bool, typer.Option("--force", help="Write into a non-empty folder.")] = False,
    probes: Annotated[
        int, typer.Option("--probes", help="Calls per tool to observe outputs for the graph.")
    ] = 3,
    old_seed: OldSeed = None,
) -> None:
    """Synthesize verified tasks by walks on the tool graph; write them as a bundle."""
    refuse_old_seed(old_seed, "synth tasks")
    if not 0 <= probes <= 100:
        fail(f"--probes must be between 0 and 100, got {probes}", USAGE_EXIT)
    try:
        knobs = Knobs.parse(depth, topology, obfuscation, distractors)
        ratios = parse_ratios(split)
        config = SynthConfig(
            n=n,
            knobs=knobs,
            seed=seed,
            role=role,
            trials=trials,  # type: ignore[arg-type]
            max_candidates=max_candidates,
            ratios=ratios,
            gold_replay=gold_replay,
            probes=probes,
        )
    except (KnobError, SynthError, ValueError) as exc:
        fail(str(exc), USAGE_EXIT)
    environment = load_env(env)
    try:
        synthesizer = TaskSynthesizer(environment, config)
        prepare_output(out, environment, force=force)
    except (SynthError, ValueError) as exc:
        fail(str(exc), USAGE_EXIT)
    started = perf_counter()
    result = _run(synthesizer, n)
    elapsed = perf_counter() - started
    report = result.report
    if result.tasks:
        splits = {
            s: [t.name for t in result.tasks if t.split == s] for s in ("train", "dev", "test")
        }
        try:
            write_bundle(
                out,
                environment,
                [(t.name, t.text) for t in result.tasks],
                report,
                splits,
                result.graph.to_json(),
            )
        except (SynthError, OSError) as exc:
            write_report(out, report)
            fail(f"{exc} (the report is in {out / 'report.json'})")
    else:
        write_report(out, report)
    _summary(
        report, elapsed, out, _command(env, out, n, depth, topology, obfuscation, distractors, seed)
    )
    if report["stopped"] == "interrupted":
        err_console.print(f"interrupted: wrote the {report['accepted']} tasks made so far")
        raise typer.Exit(INTERRUPTED_EXIT)
    if not result.tasks:
        tips = suggestions(report)
        if tips:
            err_console.print("what to try:", highlight=False)
            for tip in tips:
                err_console.print(f"  {escape(tip)}", highlight=False, soft_wrap=True)
        fail(
            f"no task survived: 0 of {report['candidates']} candidates accepted; "
            f"the report is in {out / 'report.json'}"
        )


def _run(synthesizer: TaskSynthesizer, n: int) -> SynthResult:
    if not err_console.is_terminal:
        return asyncio.run(synthesizer.run())
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("synthesizing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[candidates]} candidates"),
        console=err_console,
        transient=True,
    ) as bar:
        job = bar.add_task("tasks", total=n, candidates=0)

        def progress(accepted: int, candidates: int) -> None:
            bar.update(job, completed=accepted, candidates=candidates)

        return asyncio.run(synthesizer.run(progress))


def _command(
    env: Path, out: Path, n: int, depth: str, topology: str, obf: float, dis: int, seed: int
) -> str:
    parts = ["agent-env", "synth", "tasks", str(env), "-n", str(n), "--depth", depth]
    parts += ["--topology", topology, "--obfuscation", f"{obf:g}", "--distractors", str(dis)]
    parts += ["--random-seed", str(seed), "--out", str(out)]
    return " ".join(shlex.quote(p) for p in parts)


def _summary(report: dict[str, Any], elapsed: float, out: Path, command: str) -> None:
    rate = report["acceptance_rate"] * 100
    console.print(
        f"{report['accepted']} tasks from {report['candidates']} candidates "
        f"(acceptance rate {rate:.1f}%) -> {escape(str(out))}",
        highlight=False,
    )
    if report["dropped"]:
        dropped = sum(report["dropped"].values())
        console.print(
            f"dropped {dropped} of {report['candidates']} candidates, by reason:", highlight=False
        )
        for line in reason_lines(report):
            console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)
    if report["accepted"]:
        splits = ", ".join(f"{k} {v}" for k, v in report["splits"].items())
        console.print(f"splits: {splits}", highlight=False)
        mode = "through the task runner" if report["trials"] == "full" else "on replayed states"
        console.print(
            f"trials ({mode}): every task's reference scores 1.0, doing nothing 0, "
            "every strict prefix below 1.0",
            highlight=False,
        )
        per_minute = report["accepted"] / elapsed * 60 if elapsed > 0 else 0.0
        console.print(
            f"speed: {per_minute:.0f} verified tasks/min on 1 core ({elapsed:.1f} s)",
            highlight=False,
        )
    console.print(f"command: {escape(command)}", highlight=False)
    if report["stopped"] and report["stopped"] != "interrupted" and report["accepted"]:
        err_console.print(
            f"[yellow]warning:[/] made {report['accepted']} of {report['requested']} tasks: "
            f"{escape(report['stopped'])}",
            highlight=False,
        )
