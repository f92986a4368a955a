"""The `agent-env` command. One module per command group; this file wires them up."""

from __future__ import annotations

from importlib import metadata

import typer

from agentenv import __version__
from agentenv.cli import env_commands
from agentenv.cli.agent_command import agent_app
from agentenv.cli.check_command import check
from agentenv.cli.cli_command import cli
from agentenv.cli.rollout_command import export, report, rollout
from agentenv.cli.run_command import run, task_app
from agentenv.cli.sandbox_command import sandbox_app
from agentenv.cli.serve_command import serve
from agentenv.cli.synth_command import graph, synth_app
from agentenv.cli.synth_sqlite_command import synth_env
from agentenv.cli.trials_command import trials

app = typer.Typer(
    name="agent-env",
    help="Declare, serve and run environments for LLM agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


DISTRIBUTION = "agentenv-kit"
"""Our distribution's name on PyPI: upstream AgentEnv's is `agentenv-framework`, and both
install an `agent-env` command, so `--version` names ours."""


def version_line() -> str:
    """What `agent-env --version` prints: the command, our distribution, its version."""
    try:
        version = metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        # Run from a source tree that was never installed: the package's own version.
        version = __version__
    return f"agent-env ({DISTRIBUTION}) {version}"


def _version(value: bool) -> None:
    if value:
        typer.echo(version_line())
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version."
    ),
) -> None:
    """Declare, serve and run environments for LLM agents."""


app.command()(env_commands.validate)
app.command()(env_commands.card)
app.command()(env_commands.tools)
app.command()(env_commands.call)
app.command()(serve)
app.command()(cli)
app.command()(check)
app.command()(rollout)
app.command()(export)
app.command()(report)
app.command()(graph)
synth_app.command("env")(synth_env)
app.add_typer(synth_app, name="synth")
app.command()(run)
app.command()(trials)
app.add_typer(task_app, name="task")
app.add_typer(agent_app, name="agent")
app.add_typer(sandbox_app, name="sandbox")


def main() -> None:
    """Entry point of the console script."""
    app()


__all__ = ["DISTRIBUTION", "app", "main", "version_line"]
