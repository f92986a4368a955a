"""`agent-env agent serve AGENT`: any agent over A2A (agent card, JSON-RPC and REST)."""

from __future__ import annotations

from typing import Annotated

import typer

from agentenv.cli._common import BaseUrlOption, console, fail

agent_app = typer.Typer(help="Agents: serve one over A2A.", no_args_is_help=True)


@agent_app.callback()
def _agent() -> None:
    """Agents: serve one over A2A."""  # a group, even while `serve` is its one command


@agent_app.command("serve")
def serve(
    agent: Annotated[
        str,
        typer.Argument(
            help="The agent, as `agent-env run --agent` takes it: oracle, openai:MODEL, "
            "scripted:module:function, replay:FILE, ..."
        ),
    ],
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 9100,
    public_url: Annotated[
        str | None,
        typer.Option(
            help="Base URL the agent card advertises (default: the URL the card is fetched from)."
        ),
    ] = None,
    name: Annotated[
        str | None, typer.Option(help="The card's name (default: the agent's).")
    ] = None,
    mcp_url: Annotated[
        str | None,
        typer.Option(
            help="The environment to act in when a request names none (its MCP endpoint), "
            "e.g. for the executor of nl trigger actions."
        ),
    ] = None,
    mcp_token: Annotated[
        str | None, typer.Option(help="Bearer token for --mcp-url.", envvar="AGENTENV_MCP_TOKEN")
    ] = None,
    mcp_role: Annotated[
        str | None, typer.Option(help="Role for --mcp-url (sent as AgentEnv-Role without a token).")
    ] = None,
    turn_timeout: Annotated[
        float | None, typer.Option(help="Fail a turn that takes longer than this (seconds).")
    ] = None,
    base_url: BaseUrlOption = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "warning",
) -> None:
    """Serve an agent over A2A: card at /.well-known/agent-card.json, JSON-RPC at
    /a2a/jsonrpc, REST at /a2a/rest. Each request gets a fresh agent, acting in the
    environment its metadata names (urn:agentenv:mcp-config/v1)."""
    from agentenv.agents import AgentError, make_agent
    from agentenv.agents.a2a import require_sdk
    from agentenv.agents.a2a.mcp_tools import McpConfig
    from agentenv.registry import RegistryError

    try:
        require_sdk()
    except AgentError as exc:
        fail(str(exc))
    from agentenv.agents.a2a.server import make_agent_server
    from agentenv.agents.registry import with_base_url

    spec = agent  # the name shown stays the spec given, without the endpoint
    try:
        if base_url:
            spec = with_base_url(agent, base_url)
        sample = make_agent(spec)  # a bad spec fails here, before anything listens
    except RegistryError as exc:
        fail(str(exc))
    defaults = []
    if mcp_url:
        try:
            defaults.append(McpConfig(url=mcp_url, token=mcp_token, role=mcp_role))
        except ValueError as exc:
            fail(f"--mcp-url: {exc}")
    elif mcp_token or mcp_role:
        fail("--mcp-token and --mcp-role go with --mcp-url")
    if turn_timeout is not None and turn_timeout <= 0:
        fail("--turn-timeout must be positive")
    server = make_agent_server(
        lambda: make_agent(spec),
        host=host,
        port=port,
        log_level=log_level,
        name=name or getattr(sample, "name", agent),
        public_url=public_url,
        mcp=defaults,
        turn_timeout=turn_timeout,
    )
    shown = public_url or f"http://{host}:{port}"
    console.print(
        f"[bold]{agent}[/] over A2A on {shown}  card: /.well-known/agent-card.json",
        highlight=False,
    )
    server.run()
