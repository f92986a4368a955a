"""A small bank environment, written to disk the way a user writes one, for gateway tests.

The document and its tools file are written once per session (an Environment is immutable
and a gateway forks fresh instances from it); every test gets its own Gateway.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentenv import Environment, Gateway, Principal

BANK_TOOLS = '''
import asyncio
import threading

from agentenv import ToolContext, ToolError, tool


@tool(kind="read", duration=0)
def get_account(ctx: ToolContext, account_id: str) -> dict:
    """Look up an account.

    Args:
        account_id: The account's id.
    """
    return ctx.state.require("accounts", account_id)


@tool(duration=60)
def deposit(ctx: ToolContext, account_id: str, amount: int) -> dict:
    """Add money to an account."""
    if amount <= 0:
        raise ToolError("amount must be positive")
    account = ctx.state.require("accounts", account_id)
    return ctx.state.update("accounts", account_id, {"balance": account["balance"] + amount})


@tool
def transfer(ctx: ToolContext, source: str, target: str, amount: int) -> dict:
    """Move money; the debit is written before the credit is looked up."""
    src = ctx.state.require("accounts", source)
    ctx.state.update("accounts", source, {"balance": src["balance"] - amount})
    dst = ctx.state.require("accounts", target)  # RecordNotFound for a bad target
    ctx.state.update("accounts", target, {"balance": dst["balance"] + amount})
    return {"moved": amount}


@tool
def explode(ctx: ToolContext) -> None:
    """Write, then crash with a bug."""
    ctx.state.put("audit", {"id": "e1", "event": "explode"})
    raise RuntimeError("boom")


@tool
def silent_failure(ctx: ToolContext) -> None:
    """Raise a ToolError without a message."""
    ctx.state.put("audit", {"id": "e2"})
    raise ToolError()


@tool
def returns_set(ctx: ToolContext) -> object:
    ctx.state.put("audit", {"id": "set"})
    return {1, 2}


@tool
def returns_object(ctx: ToolContext) -> object:
    ctx.state.put("audit", {"id": "obj"})
    return {"value": object()}


@tool
def returns_nan(ctx: ToolContext) -> object:
    ctx.state.put("audit", {"id": "nan"})
    return float("nan")


@tool
def returns_text() -> str:
    return "plain text"


@tool
def returns_list() -> list:
    return [1, "two"]


@tool(kind="read")
def sneaky_read(ctx: ToolContext, account_id: str) -> dict:
    """Claims to read, but writes."""
    return ctx.state.update("accounts", account_id, {"balance": 0})


@tool(timeout=0.01)
async def hang(ctx: ToolContext) -> None:
    """Write, then wait forever (its timeout ends it)."""
    ctx.state.put("audit", {"id": "hang"})
    await asyncio.Event().wait()


@tool
async def stall(ctx: ToolContext) -> None:
    """Write, then wait forever, with no timeout of its own."""
    ctx.state.put("audit", {"id": "stall"})
    await asyncio.Event().wait()


@tool
async def async_deposit(ctx: ToolContext, account_id: str, amount: int) -> int:
    """Read, yield to the event loop, then write: loses updates unless calls are serialised."""
    balance = ctx.state.require("accounts", account_id)["balance"]
    await asyncio.sleep(0)
    ctx.state.update("accounts", account_id, {"balance": balance + amount})
    return balance + amount


@tool(blocking=True)
def blocking_audit(ctx: ToolContext, account_id: str) -> dict:
    """Blocking code: update, insert and delete, from a worker thread."""
    account = ctx.state.require("accounts", account_id)
    ctx.state.update("accounts", account_id, {"balance": account["balance"] + 1})
    ctx.state.put("audit", {"id": "blocking", "account": account_id})
    ctx.state.delete("accounts", "a3")
    return {"in_thread": threading.current_thread() is not threading.main_thread()}


@tool(roles=["supervisor"])
def freeze(ctx: ToolContext, account_id: str) -> dict:
    """Freeze an account (supervisors only)."""
    return ctx.state.update("accounts", account_id, {"frozen": True})


@tool(kind="read", duration=0)
def whoami(ctx: ToolContext) -> dict:
    return {
        "role": ctx.principal.role,
        "name": ctx.principal.name,
        "instance": ctx.instance_id,
        "now": ctx.now.isoformat(),
    }


@tool(duration=0)
def wait(ctx: ToolContext, minutes: int) -> str:
    """Take as long as asked (virtual time)."""
    ctx.spend(minutes * 60)
    return "waited"
'''

BANK_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: bank
version: 2.0.0
roles:
  - name: agent
  - name: supervisor
state:
  accounts:
    schema:
      type: object
      properties:
        id: {type: string}
        owner: {type: string}
        balance: {type: integer, minimum: 0}
        frozen: {type: boolean}
      required: [id, owner, balance]
  audit: {}
seed:
  accounts:
    - {id: a1, owner: Ada, balance: 100}
    - {id: a2, owner: Bob, balance: 50}
    - {id: a3, owner: Cy, balance: 0}
tools:
  - module: bank_tools.py
  - name: list_accounts
    crud: {collection: accounts, op: list}
  - name: open_account
    crud: {collection: accounts, op: create}
"""

AGENT = Principal("agent", name="ada")
SUPERVISOR = Principal("supervisor")


@pytest.fixture(scope="session")
def bank_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder: Path = tmp_path_factory.mktemp("bank")
    (folder / "bank_tools.py").write_text(textwrap.dedent(BANK_TOOLS))
    (folder / "env.yaml").write_text(textwrap.dedent(BANK_ENV))
    return Environment.load(folder)


@pytest.fixture
def gw(bank_env: Environment) -> Gateway:
    return Gateway(bank_env)


@pytest.fixture
def agent() -> Principal:
    return AGENT


@pytest.fixture
def supervisor() -> Principal:
    return SUPERVISOR
