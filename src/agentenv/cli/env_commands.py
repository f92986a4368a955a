"""Commands that work on an environment document in this process: validate, card, tools, call."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from agentenv.cli._common import console, err_console, fail, load_env, parse_args
from agentenv.env import Principal
from agentenv.gateway import Gateway, GatewayError
from agentenv.gateway.auth import RESERVED_ROLES, reserved_role_message
from agentenv.serve.card import build_card

EnvPath = Annotated[Path, typer.Argument(help="Environment document, or the folder holding it.")]
RoleOpt = Annotated[
    str | None, typer.Option("--role", "-r", help="Act as this role (default: the env's).")
]


def _principal(gateway: Gateway, role: str | None) -> Principal:
    """The caller; a role the environment does not declare gets a warning (a typo would
    otherwise quietly see every tool that declares no roles). A reserved role is refused
    here as on every transport: in-process is no back door to the gateway's own principal."""
    name = (role or gateway.env.default_role).strip()
    if name in RESERVED_ROLES:
        fail(reserved_role_message(name))
    if name not in gateway.env.roles:
        err_console.print(
            f"[yellow]warning:[/] {gateway.env.name} declares no role {name!r} "
            f"(roles: {', '.join(gateway.env.roles)})",
            highlight=False,
        )
    return Principal(role=name)


def _gateway(path: Path) -> Gateway:
    env = load_env(path)
    try:
        return Gateway(env)
    except GatewayError as exc:
        fail(f"{path}: {exc}")


def validate(
    path: Annotated[
        Path,
        typer.Argument(
            help="An environment document or its folder; a task file; a bundle folder; "
            "a Harbor task directory."
        ),
    ],
    solutions: Annotated[
        bool,
        typer.Option(
            "--solutions/--no-solutions",
            help="Run each task's reference solution with the oracle agent (it must pass).",
        ),
    ] = True,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=0, help="Seconds each task's solution may take (0: no limit)."
        ),
    ] = 120.0,
) -> None:
    """Check an environment document and say what it declares; or check tasks (a task
    file, a bundle's tasks/, a Harbor task directory): every problem of each document, then
    each reference solution run by the oracle, which must pass.

    Exits 1 when any document has a problem or any solution does not pass; a task with no
    reference solution is a warning.
    """
    from agentenv.cli.validate_tasks import is_task_target, validate_tasks

    if is_task_target(path):
        validate_tasks(path, solutions=solutions, timeout=timeout or None)
        return
    gateway = _gateway(path)
    env = gateway.env
    state = env.seed
    records = sum(len(rows) for rows in state.to_dict().values())
    console.print(f"[bold green]ok[/] {env.name} {env.version}", highlight=False)
    console.print(f"  roles:       {', '.join(env.roles)} (default {env.default_role})")
    console.print(f"  collections: {len(state.to_dict())} with {records} seed records")
    console.print(f"  tools:       {len(env.tools)}")
    console.print(f"  triggers:    {len(env.triggers.triggers)}")
    clock = env.clock
    armed = f"armed at {clock.start.isoformat()}" if clock.start else "not armed"
    console.print(f"  clock:       {clock.mode}, {armed}")


def card(
    path: EnvPath,
    role: RoleOpt = None,
) -> None:
    """Print the Environment Card (JSON) as a role would see it."""
    gateway = _gateway(path)
    principal = _principal(gateway, role)
    typer.echo(json.dumps(build_card(gateway, principal).to_json(), indent=2))


def tools(
    path: EnvPath,
    role: RoleOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print MCP-style JSON.")] = False,
) -> None:
    """List the tools a role may call."""
    gateway = _gateway(path)
    principal = _principal(gateway, role)
    visible = gateway.tools_for(principal)
    if as_json:
        typer.echo(json.dumps([t.info().model_dump(by_alias=True) for t in visible], indent=2))
        return
    table = Table(title=f"{gateway.env.name}: tools for role {principal.role!r}")
    table.add_column("tool", style="bold")
    table.add_column("kind")
    table.add_column("arguments")
    table.add_column("description")
    for t in visible:
        props = t.input_schema.get("properties", {})
        required = set(t.input_schema.get("required", []))
        args = ", ".join(f"{n}{'' if n in required else '?'}" for n in props)
        table.add_row(t.name, t.kind, args, t.description.splitlines()[0] if t.description else "")
    console.print(table)


def call(
    path: EnvPath,
    tool: Annotated[str, typer.Argument(help="Tool name.")],
    arg: Annotated[
        list[str] | None,
        typer.Option("--arg", help="KEY=VALUE, repeatable (no short form: -a is --agent)."),
    ] = None,
    json_args: Annotated[
        str | None, typer.Option("--json", help="All arguments as a JSON object.")
    ] = None,
    role: RoleOpt = None,
) -> None:
    """Call one tool on a fresh instance, in this process; prints the result as JSON.

    Exits 1 when the call fails (unknown tool, bad arguments, denied, tool error).
    """
    gateway = _gateway(path)
    principal = _principal(gateway, role)
    found = gateway.env.tools.get(tool)
    args = parse_args(arg or [], json_args, found.input_schema if found else {})
    result = asyncio.run(gateway.call(principal, tool, args))
    if result.ok:
        typer.echo(json.dumps(result.value, indent=2))
        return
    assert result.error is not None
    fail(f"{result.error.kind}: {result.error.message}")
