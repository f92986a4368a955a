"""`agent-env serve`: the REST surface of an environment over HTTP.

The environment is a document (or the folder holding one: a process environment's, an
upstream environment folder), or, with `--url`, a server already running elsewhere (an
AgentEnv environment server or any MCP server over Streamable HTTP) fronted by our gateway.
Server processes the environment started stop when the server stops (Ctrl-C included).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import anyio
import typer
from rich.markup import escape

from agentenv.cli._common import close_env, console, fail, load_env, parse_headers, url_env
from agentenv.env import Environment
from agentenv.env.servers import loop as children_loop
from agentenv.gateway import Gateway, GatewayError
from agentenv.gateway.auth import Authenticator, is_loopback, parse_tokens
from agentenv.serve._http import DEFAULT_MAX_BODY
from agentenv.serve.mcp import McpAdapter
from agentenv.serve.server import freeze_long_lived, make_server


def serve(
    path: Annotated[
        Path | None,
        typer.Argument(
            help="Environment document, or the folder holding it (a process environment's, or "
            "an upstream environment folder). Leave it out with --url."
        ),
    ] = None,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="Front a running server instead of a document: an AgentEnv environment "
            "server or any MCP server over Streamable HTTP (its base URL or MCP endpoint).",
        ),
    ] = None,
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header",
            help="With --url: NAME=VALUE, a header sent to that server on every request "
            "(repeatable).",
        ),
    ] = None,
    url_token: Annotated[
        str | None,
        typer.Option(
            "--url-token",
            help="With --url: a bearer token for that server (`${NAME}` reads a variable). "
            "--token is this server's own.",
        ),
    ] = None,
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
    if (path is None) == (url is None):
        fail("give an environment (a document or its folder) or --url URL, one of the two")
    if url is None and (header or url_token):
        fail("--header and --url-token go with --url (a document's server: block has its own)")
    if mode is not None and mode not in ("consistent", "performance"):
        fail(f"--mode: expected 'consistent' or 'performance', got {mode!r}")
    try:
        tokens = parse_tokens(token or [])
    except ValueError as exc:
        fail(f"--token: {exc}")
    if not stdio and port and not _port_free(host, port):
        fail(f"port {port} on {host} is in use (pick another with --port)")
    headers = parse_headers(header or [])
    # Checked before anything starts: a refusal below must not leave server processes behind.
    env = load_env(path) if path is not None else url_env(str(url), headers, url_token)
    try:
        _serve(
            env,
            path or url,
            host,
            port,
            tokens,
            max_body,
            log_level,
            stdio,
            mode,
            strict_roles,
            behind_gateway,
        )
    finally:
        close_env(env)


def _serve(
    env: Environment,
    source: object,
    host: str,
    port: int,
    tokens: dict[str, str],
    max_body: int,
    log_level: str,
    stdio: bool,
    mode: str | None,
    strict_roles: bool | None,
    behind_gateway: bool,
) -> None:
    options = {"mode": mode, "strict_roles": strict_roles, "behind_gateway": behind_gateway}
    if stdio:
        _serve_stdio(env, options)
        return
    try:
        gateway = Gateway(env, **options)  # type: ignore[arg-type]
    except GatewayError as exc:
        fail(f"{source}: {exc}")
    _send_nl_over_a2a(gateway, host, port, tokens)
    if not is_loopback(host) and not tokens:
        console.print(
            "[yellow]warning:[/] listening beyond loopback with no --token: every request "
            "will be refused (401). Add --token ROLE=SECRET.",
        )
    console.print(
        f"[bold]{escape(env.name)}[/] on http://{host}:{port}  card: /.well-known/agent-env.json"
        f"  auth: {escape(auth_mode(host, tokens))}  mode: {gateway.mode}"
        + ("  roles: strict" if gateway.strict_roles else ""),
        highlight=False,
    )
    for namespace, runtime in env.runtimes():
        where = f" ({namespace.removesuffix('__')})" if namespace else ""
        console.print(f"  server{escape(where)}: {escape(runtime.describe())}", highlight=False)
    server = make_server(
        gateway, host=host, port=port, tokens=tokens, max_body=max_body, log_level=log_level
    )
    if not env.runtimes():
        server.run()
        return
    # Server children live on the children's loop: serving from that loop too spares every
    # call a hop between threads (loop.py). Ctrl-C asks uvicorn to stop, as its own would.
    children_loop.run_main(
        server.serve(), on_interrupt=lambda: setattr(server, "should_exit", True)
    )


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
        gateway = Gateway(env, **options)  # type: ignore[arg-type]
    except GatewayError as exc:
        fail(str(exc))
    _send_nl_over_a2a(gateway)
    auth = Authenticator(default_role=env.default_role)
    adapter = McpAdapter(gateway, auth)
    freeze_long_lived()  # as make_server does: the seed data costs the cyclic GC nothing
    if env.runtimes():
        children_loop.run_main(adapter.run_stdio())  # no hop per call (see above)
    else:
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
