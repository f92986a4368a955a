"""`agent-env serve`: the REST surface of an environment over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.markup import escape

from agentenv.cli._common import console, fail, load_env
from agentenv.env import Environment
from agentenv.gateway import Gateway, GatewayError
from agentenv.gateway.auth import Authenticator, is_loopback, parse_tokens
from agentenv.serve._http import DEFAULT_MAX_BODY
from agentenv.serve.mcp import McpAdapter
from agentenv.serve.server import freeze_long_lived, make_server


def serve(
    path: Annotated[Path, typer.Argument(help="Environment document, or the folder holding it.")],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8765,
    token: Annotated[
        list[str] | None,
        typer.Option(
            "--token",
            help="ROLE=SECRET: bearer token for a role (repeatable). Once any is set, the "
            "AgentEnv-Role header grants nothing. Role 'admin' may use the control plane.",
        ),
    ] = None,
    max_body: Annotated[
        int, typer.Option(help="Largest request body, in bytes.")
    ] = DEFAULT_MAX_BODY,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
    stdio: Annotated[
        bool,
        typer.Option(
            "--stdio", help="Speak MCP over stdin/stdout instead (for clients that spawn servers)."
        ),
    ] = False,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            envvar="GATEWAY_MODE",
            help="consistent (calls on one instance run one at a time) or performance (they "
            "may overlap). Default: the document's gateway_mode, else consistent.",
        ),
    ] = None,
    strict_roles: Annotated[
        bool | None,
        typer.Option(
            "--strict-roles/--any-role",
            help="Serve only the roles the document declares (others are refused), or any "
            "role name. Default: the document's strict_roles, else any role.",
        ),
    ] = None,
    behind_gateway: Annotated[
        bool,
        typer.Option(
            "--behind-gateway",
            help="Serve as a backing server of another gateway (e.g. upstream's), which "
            "decides who sees which tool: list to every caller each tool some role may call "
            "(hidden ones marked in _meta); calls are still refused where this environment's "
            "rules say so.",
        ),
    ] = False,
) -> None:
    """Serve an environment: card, /step and MCP (/mcp) on one port, or MCP over stdio."""
    env = load_env(path)
    if mode is not None and mode not in ("consistent", "performance"):
        fail(f"--mode: expected 'consistent' or 'performance', got {mode!r}")
    options = {"mode": mode, "strict_roles": strict_roles, "behind_gateway": behind_gateway}
    if stdio:
        _serve_stdio(env, options)
        return
    try:
        tokens = parse_tokens(token or [])
    except ValueError as exc:
        fail(f"--token: {exc}")
    try:
        gateway = Gateway(env, **options)
    except GatewayError as exc:
        fail(f"{path}: {exc}")
    _send_nl_over_a2a(gateway, host, port, tokens)
    if not is_loopback(host) and not tokens:
        console.print(
            "[yellow]warning:[/] listening beyond loopback with no --token: every request "
            "will be refused (401). Add --token ROLE=SECRET.",
        )
    if port and not _port_free(host, port):
        fail(f"port {port} on {host} is in use (pick another with --port)")
    console.print(
        f"[bold]{escape(env.name)}[/] on http://{host}:{port}  card: /.well-known/agent-env.json"
        f"  auth: {escape(auth_mode(host, tokens))}  mode: {gateway.mode}"
        + ("  roles: strict" if gateway.strict_roles else ""),
        highlight=False,
    )
    server = make_server(
        gateway, host=host, port=port, tokens=tokens, max_body=max_body, log_level=log_level
    )
    server.run()


def auth_mode(host: str, tokens: dict[str, str]) -> str:
    """What the banner says about who may call a server on `host` with these tokens
    (secret -> role): the security mode as `Authenticator.for_host` will enforce it."""
    if tokens:
        roles = ", ".join(sorted(set(tokens.values())))
        return f"bearer tokens (roles: {roles})"
    if is_loopback(host):
        return "trusted local (AgentEnv-Role header)"
    return "none: no --token set, so every call is refused (401)"


def _serve_stdio(env: Environment, options: dict[str, Any]) -> None:
    # stdout belongs to the MCP protocol now: say nothing there.
    try:
        gateway = Gateway(env, **options)
    except GatewayError as exc:
        fail(str(exc))
    _send_nl_over_a2a(gateway)
    auth = Authenticator(default_role=env.default_role)
    adapter = McpAdapter(gateway, auth)
    freeze_long_lived()  # as make_server does: the seed data costs the cyclic GC nothing
    anyio.run(adapter.run_stdio)


def _send_nl_over_a2a(
    gateway: Gateway, host: str | None = None, port: int = 0, tokens: dict[str, str] | None = None
) -> None:
    """nl trigger actions go to their executor over A2A; served over HTTP, the executor is
    also told this server's MCP endpoint (a wildcard address is given as 127.0.0.1) and
    its role's token."""
    from agentenv.agents.a2a.nl import a2a_nl_sender, served_gateway_locator

    if host is None:
        gateway.nl_sender = a2a_nl_sender()
        return
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    shown = f"[{shown}]" if ":" in shown else shown
    gateway.nl_sender = a2a_nl_sender(served_gateway_locator(f"http://{shown}:{port}", tokens))


def _port_free(host: str, port: int) -> bool:
    """Whether we can bind the port now (so the banner never announces a failed start)."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True
