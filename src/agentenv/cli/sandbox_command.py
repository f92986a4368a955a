"""`agent-env sandbox`: run a command in a sandbox by hand, and list the providers."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from agentenv.cli._common import console, fail
from agentenv.sandbox import SANDBOXES, SandboxError, SandboxLimits, sandbox_provider

sandbox_app = typer.Typer(help="Sandboxes: run commands in one by hand.", no_args_is_help=True)


@sandbox_app.command("run", context_settings={"allow_interspersed_args": False})
def run(
    command: Annotated[list[str], typer.Argument(help="The command and its arguments (after --).")],
    provider: Annotated[
        str, typer.Option("--provider", "-p", help="local or bwrap (or a plugin's name).")
    ] = "local",
    workspace: Annotated[
        Path | None,
        typer.Option("--workspace", "-w", help="A folder copied in as the workspace."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds before the command is killed.")] = 60.0,
    memory_mb: Annotated[int, typer.Option(help="Address space per process, MiB.")] = 2048,
    network: Annotated[bool, typer.Option(help="Let the command reach the network.")] = False,
    keep: Annotated[
        Path | None, typer.Option("--keep", help="Copy the workspace here when it ends.")
    ] = None,
) -> None:
    """Run COMMAND in a fresh sandbox; its output is printed and its exit code returned
    (124 when it was killed at its timeout)."""
    try:
        limits = SandboxLimits(timeout=timeout, memory_mb=memory_mb)
        sandbox = sandbox_provider(provider).create(limits, workspace=workspace, network=network)
    except (SandboxError, ValueError) as exc:
        fail(str(exc))
    with sandbox:
        try:
            result = asyncio.run(sandbox.exec(command))
        except SandboxError as exc:  # e.g. no such program: the shell's 127
            sys.stderr.write(f"error: {exc}\n")
            raise typer.Exit(127) from None
        if keep is not None:
            sandbox.snapshot(keep)
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    if result.truncated:
        sys.stderr.write(f"\n[output cut at {limits.output_bytes} bytes]\n")
    if result.timed_out:
        sys.stderr.write(f"[killed at its {timeout:g} s timeout]\n")
        raise typer.Exit(124)
    raise typer.Exit(result.exit_code or 0)


@sandbox_app.command("providers")
def providers() -> None:
    """The sandbox providers, and whether each can run on this machine."""
    table = Table()
    table.add_column("provider", style="bold")
    table.add_column("here")
    for name in SANDBOXES.names():
        reason = SANDBOXES.get(name).unavailable()
        table.add_row(escape(name), "ready" if reason is None else escape(reason))
    console.print(table)
