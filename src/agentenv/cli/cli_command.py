"""`agent-env cli`: write a standalone command line for an environment's tools."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentenv.cli._common import console, fail, load_env
from agentenv.gateway import GatewayError
from agentenv.serve.cligen import (
    DEFAULT_URL,
    cli_spec,
    example_invocation,
    generate_cli,
    tool_infos,
)


def cli(
    path: Annotated[Path, typer.Argument(help="Environment document, or the folder holding it.")],
    out: Annotated[
        Path, typer.Option("--out", "-o", help="Folder to write the script into.")
    ] = Path("."),
    name: Annotated[
        str | None, typer.Option("--name", help="Script name (default: the environment's name).")
    ] = None,
    role: Annotated[
        str | None,
        typer.Option(
            "--role",
            "-r",
            help="Only the tools this role may call, and make it the script's default role "
            "(default: every tool, no default role).",
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option("--url", help=f"Default server URL baked into the script ({DEFAULT_URL})."),
    ] = None,
) -> None:
    """Generate a standalone CLI (Python standard library only) that calls the environment's
    tools on a running server over REST /step: one subcommand per tool."""
    env = load_env(path)
    if role is not None and role not in env.roles:
        console.print(
            f"[yellow]warning:[/] {env.name} declares no role {role!r} "
            f"(roles: {', '.join(env.roles)})",
            highlight=False,
        )
    try:
        tools = tool_infos(env, role)
        script = generate_cli(env, out, name=name, role=role, url=url)
    except GatewayError as exc:
        fail(f"{path}: {exc}")
    except (ValueError, OSError) as exc:
        fail(str(exc))
    spec = cli_spec(script.name, tools, role=role, url=url)
    who = f" for role {role!r}" if role else ""
    console.print(
        f"[bold green]wrote[/] {script} ({len(tools)} tools{who})", highlight=False, markup=True
    )
    shown_text = str(script) if len(script.parts) > 1 else f"./{script}"
    console.print("serve the environment, then call its tools:", highlight=False)
    console.print(f"  agent-env serve {path}", highlight=False, markup=False)
    console.print(f"  {shown_text} --help", highlight=False, markup=False)
    if spec["tools"]:
        console.print(
            f"  {example_invocation(shown_text, spec['tools'][0])}", highlight=False, markup=False
        )
    else:
        console.print("[yellow]warning:[/] the script has no tool commands", highlight=False)
