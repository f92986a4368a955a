"""Fixtures for the REST transport tests: small environments written here, apps over them.

Every HTTP client built here checks every answer it gets: no 500, no Python traceback.
"""

from __future__ import annotations

import contextlib
import socket
import textwrap
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentenv import Environment, Gateway
from agentenv.gateway.auth import Authenticator
from agentenv.serve import create_app, make_server

DESK_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: test-desk
version: 1.2.3
description: A help desk for the transport tests.
roles:
  - name: agent
  - name: supervisor
default_role: agent
state:
  tickets:
    key: id
    schema:
      type: object
      properties:
        id: {type: string}
        subject: {type: string}
        priority: {type: integer}
        status: {type: string}
      required: [id, subject]
  notes:
    key: id
seed:
  tickets:
    - {id: T-1, subject: Printer on fire, priority: 1, status: open}
    - {id: T-2, subject: Password reset, priority: 3, status: open}
tools:
  - name: get_ticket
    crud: {collection: tickets, op: get}
  - name: list_tickets
    crud: {collection: tickets, op: list}
  - name: create_ticket
    crud: {collection: tickets, op: create}
  - name: update_ticket
    crud: {collection: tickets, op: update}
  - module: tools.py
"""

DESK_TOOLS = '''\
import asyncio

from agentenv import ToolContext, ToolError, tool


@tool
def add_note(ctx: ToolContext, ticket_id: str, text: str, minutes: int = 0) -> dict:
    """Add a note to a ticket.

    Args:
        ticket_id: The ticket the note is about.
        text: What to write.
        minutes: Time spent.
    """
    ctx.state.require("tickets", ticket_id)
    number = ctx.state.count("notes") + 1
    return ctx.state.insert(
        "notes", {"id": f"N-{number}", "ticket_id": ticket_id, "text": text, "minutes": minutes}
    )


@tool
def explode(ctx: ToolContext, ticket_id: str) -> dict:
    """Write to a ticket, then crash (a bug in the tool)."""
    ctx.state.update("tickets", ticket_id, {"status": "exploded"})
    raise RuntimeError("kaboom")


@tool
def refuse(reason: str) -> dict:
    """Fail on purpose with the given reason."""
    raise ToolError(reason)


@tool
def tag_set(ctx: ToolContext, ticket_id: str) -> set:
    """Write to a ticket, then return a set (not JSON)."""
    ctx.state.update("tickets", ticket_id, {"status": "tagged"})
    return {"urgent", "printer"}


@tool(timeout=0.05)
async def slow(ctx: ToolContext, ticket_id: str, seconds: float = 30.0) -> str:
    """Write to a ticket, then take far longer than the tool's timeout."""
    ctx.state.update("tickets", ticket_id, {"status": "slow"})
    await asyncio.sleep(seconds)
    return "done"


@tool(kind="read")
def ticket_ids(ctx: ToolContext) -> list:
    """The ids of every ticket."""
    return ctx.state.keys("tickets")


@tool(roles=["supervisor"])
def close_ticket(ctx: ToolContext, ticket_id: str) -> dict:
    """Close a ticket (supervisors only)."""
    return ctx.state.update("tickets", ticket_id, {"status": "closed"})
'''

CLOCKED_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: clocked-desk
roles:
  - name: agent
state:
  tickets:
    key: id
  notes:
    key: id
seed:
  tickets:
    - {id: T-1, subject: Printer on fire, priority: 3}
tools:
  - name: update_ticket
    crud: {collection: tickets, op: update}
    params:
      id: {type: string, required: true}
      priority: {type: integer}
  - name: create_note
    crud: {collection: notes, op: create}
    params:
      id: {type: string, required: true}
      ticket_id: {type: string}
      text: {type: string}
clock:
  start: 2026-03-02T09:00:00Z
  mode: stepped
triggers:
  - id: escalate
    when:
      type: action
      tool: update_ticket
      where:
        args.priority: {equals: 1}
    actions:
      - type: tool
        tool: create_note
        args: {id: "esc-${args.id}", ticket_id: "${args.id}", text: escalated}
"""


def write_env(folder: Path, document: str, tools: str | None = None) -> Path:
    """Write an environment document (and its tools.py) into `folder`; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "env.yaml").write_text(textwrap.dedent(document), encoding="utf-8")
    if tools is not None:
        (folder / "tools.py").write_text(tools, encoding="utf-8")
    return folder


@pytest.fixture(scope="session")
def desk_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    """The desk environment (immutable: each test builds its own Gateway over it)."""
    folder = write_env(tmp_path_factory.mktemp("desk"), DESK_YAML, DESK_TOOLS)
    return Environment.load(folder)


@pytest.fixture(scope="session")
def clocked_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    """An environment whose clock is armed by its document and which declares a trigger."""
    folder = write_env(tmp_path_factory.mktemp("clocked"), CLOCKED_YAML)
    return Environment.load(folder)


@pytest.fixture
def gateway(desk_env: Environment) -> Gateway:
    """A fresh gateway over the desk environment."""
    return Gateway(desk_env)


@pytest.fixture
def clocked_gateway(clocked_env: Environment) -> Gateway:
    """A fresh gateway over the clocked environment."""
    return Gateway(clocked_env)


# -- clients ----------------------------------------------------------------------------


def check_answer(response: httpx.Response) -> None:
    """What holds for every answer of the server: no 500, no stack trace."""
    assert response.status_code != 500, response.text
    assert "Traceback" not in response.text, response.text


async def _check_async(response: httpx.Response) -> None:
    await response.aread()
    check_answer(response)


def _check_sync(response: httpx.Response) -> None:
    response.read()
    check_answer(response)


@contextlib.asynccontextmanager
async def asgi_client(app: Any) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client for an app (no lifespan: fine for routes)."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport,
        base_url="http://testserver",
        event_hooks={"response": [_check_async]},
    ) as client:
        yield client


@pytest.fixture
async def client(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of the desk app in trusted local mode."""
    async with asgi_client(create_app(gateway)) as c:
        yield c


@pytest.fixture
async def clocked_client(clocked_gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of the clocked app in trusted local mode."""
    async with asgi_client(create_app(clocked_gateway)) as c:
        yield c


@pytest.fixture(scope="session")
def app_client() -> Callable[[Any], contextlib.AbstractAsyncContextManager[httpx.AsyncClient]]:
    """`async with app_client(app) as client:` for an app a test builds itself."""
    return asgi_client


@pytest.fixture
async def token_client(gateway: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    """An in-process client of the desk app with tokens s1 (agent) and s2 (admin)."""
    auth = Authenticator({"s1": "agent", "s2": "admin"}, default_role="agent")
    async with asgi_client(create_app(gateway, auth=auth)) as c:
        yield c


# -- a real server ----------------------------------------------------------------------


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_server(gateway: Gateway, **options: Any) -> Iterator[str]:
    """Serve `gateway` with `make_server` (uvicorn) in a thread; yields the base URL.

    Startup is waited for (at most 15 s) and the server is always stopped and joined.
    """
    port = free_port()
    server = make_server(gateway, host="127.0.0.1", port=port, **options)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            assert thread.is_alive(), "the server thread died during startup"
            assert time.monotonic() < deadline, "the server did not start within 15 s"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        assert not thread.is_alive(), "the server did not stop within 15 s"


@pytest.fixture(scope="session")
def live_server() -> Callable[..., contextlib.AbstractContextManager[str]]:
    """`with live_server(gateway, max_body=...) as url:` runs a real uvicorn server."""
    return running_server


def _http_client(base_url: str, **options: Any) -> httpx.Client:
    return httpx.Client(
        base_url=base_url, timeout=15, event_hooks={"response": [_check_sync]}, **options
    )


@pytest.fixture(scope="session")
def http_client() -> Callable[..., httpx.Client]:
    """`with http_client(url) as c:` a client of a real server, checked like the others."""
    return _http_client


# -- the notes environment of the hostile-input MCP modules (HTTP and stdio) -------------

NOTES_ENV_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: mcp-hostile
roles:
  - name: agent
  - name: supervisor
default_role: agent
state:
  notes:
    key: id
seed:
  notes:
    - {id: N-1, text: first}
tools:
  - module: tools.py
"""

NOTES_TOOLS_PY = '''\
from agentenv import ToolContext, tool


@tool(kind="read")
def get_note(ctx: ToolContext, note_id: str) -> dict:
    """Read one note."""
    return ctx.state.require("notes", note_id)


@tool
def add_note(ctx: ToolContext, note_id: str, text: str) -> dict:
    """Add a note."""
    return ctx.state.insert("notes", {"id": note_id, "text": text})


@tool(roles=["supervisor"])
def purge(ctx: ToolContext, note_id: str) -> dict:
    """Delete a note (supervisors only)."""
    ctx.state.delete("notes", note_id)
    return {"deleted": note_id}


@tool
def keep(ctx: ToolContext, payload: dict) -> dict:
    """Store any JSON object as note K, and answer it back."""
    ctx.state.insert("notes", {"id": "K", "payload": payload})
    return payload
'''


@pytest.fixture(scope="session")
def notes_env_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small notes environment: a read tool, a write tool, a supervisor-only tool, and
    `keep`, which stores and answers back any JSON object (for hostile values)."""
    return write_env(tmp_path_factory.mktemp("notes-env"), NOTES_ENV_YAML, NOTES_TOOLS_PY)
