"""Tasks with agents over A2A: deploy_agent with a2a_agent_id (a real a2a-sdk server on
127.0.0.1 serving our agents), the gateway served to it for its role and stopped when the
task ends, peers, nl trigger actions sent to an executor agent, and remote agents that
are down, slow, answer garbage, fail, or call tools their role may not."""

from __future__ import annotations

import asyncio
import json
import socket
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from agentenv.agents import AgentError, AgentTurn, OracleAgent, make_agent
from agentenv.agents.a2a.client import send_instruction
from agentenv.agents.a2a.server import JSONRPC_PATH, build_agent_card, serve_agent
from agentenv.serve.background import BackgroundServer
from agentenv.spec.task import TaskSpec
from agentenv.tasks import TaskContext, TaskResult, run_task

WAIT_S = 10.0

BANK_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: bank
roles: [{name: customer}, {name: teller}]
default_role: customer
state:
  accounts:
    schema:
      type: object
      required: [id, balance]
      properties:
        id: {type: string}
        balance: {type: integer, minimum: 0}
        open: {type: boolean}
seed:
  accounts:
    - {id: a1, balance: 100, open: true}
tools:
  - module: bank_tools.py
  - name: get_account
    crud: {collection: accounts, op: get}
"""

BANK_TOOLS = '''
from agentenv import ToolContext, ToolError, tool


@tool
def deposit(ctx: ToolContext, account_id: str, amount: int) -> dict:
    """Add money to an account."""
    if amount <= 0:
        raise ToolError("amount must be positive")
    account = ctx.state.require("accounts", account_id)
    return ctx.state.update("accounts", account_id, {"balance": account["balance"] + amount})


@tool(roles=["teller"])
def close_account(ctx: ToolContext, account_id: str) -> dict:
    """Close an account (tellers only)."""
    return ctx.state.update("accounts", account_id, {"open": False})
'''

DEPLOY_ENV = {"id": "env", "type": "deploy_env", "env_id": "bank", "env": "bank"}
ASK = {"id": "ask", "type": "prompt_agent", "prompt": "Deposit 5 into a1."}
SOLUTION = {
    "ask": {
        "calls": [{"tool": "deposit", "args": {"account_id": "a1", "amount": 5}}],
        "response": "Deposited 5.",
    }
}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "bank"
    folder.mkdir()
    (folder / "env.yaml").write_text(textwrap.dedent(BANK_ENV))
    (folder / "bank_tools.py").write_text(textwrap.dedent(BANK_TOOLS))
    return tmp_path


@pytest.fixture
async def oracle() -> AsyncIterator[str]:
    server = await serve_agent(OracleAgent())
    try:
        yield server.url
    finally:
        await server.stop()


async def run(doc: dict[str, Any], base: Path, **options: Any) -> tuple[TaskResult, TaskContext]:
    spec = TaskSpec.model_validate(doc)
    ctx = TaskContext(task=spec, base_dir=base, **options)
    return await run_task(spec, ctx), ctx


def step(result: TaskResult, sid: str) -> Any:
    return next(s for s in result.steps if s.id == sid)


def calls(ctx: TaskContext) -> list[Any]:
    return [r for r in ctx.env("bank").gateway.instance().trajectory if r.kind == "call"]


def balance(ctx: TaskContext) -> int:
    return ctx.env("bank").state.get("accounts", "a1")["balance"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def assert_stopped(ctx: TaskContext) -> None:
    """The gateway server the task started (if any) is down: its URL refuses connections."""
    assert ctx.cleanups == []
    if ctx.env("bank").served is None:
        return
    served = ctx.env("bank").served.result()
    assert not served.server.running
    async with httpx.AsyncClient(timeout=2) as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(served.mcp_url("default"))


# -- the oracle, remotely ---------------------------------------------------------------------


async def test_a_remote_oracle_solves_the_task_through_the_served_gateway(
    base: Path, oracle: str
) -> None:
    doc = {
        "steps": [
            DEPLOY_ENV,
            {"id": "agent", "type": "deploy_agent", "agent_name": "a", "a2a_agent_id": oracle},
            ASK,
        ],
        "solution": SOLUTION,
    }
    result, ctx = await run(doc, base)
    assert result.status == "passed", result.error
    assert step(result, "agent").output["a2a_url"] == oracle
    assert step(result, "ask").output["response"] == "Deposited 5."
    assert step(result, "ask").output["records"] == 1
    assert balance(ctx) == 105
    [call] = calls(ctx)
    assert (call.tool, call.role, call.principal, call.session, call.args) == (
        "deposit",
        "customer",
        "a",  # the agent's name, as for an agent in process
        "ask",
        {"account_id": "a1", "amount": 5},  # exact: 5, not 5.0
    )
    assert ctx.prompts["ask"].response == "Deposited 5."
    await assert_stopped(ctx)


async def test_agent_a2a_url_plays_every_agent_and_episodes_share_nothing(
    base: Path, oracle: str
) -> None:
    """`agent-env run --agent a2a:URL`: the run's agent is remote; each run serves its
    own gateway with its own token, and stops it."""
    doc = {
        "steps": [DEPLOY_ENV, {"id": "agent", "type": "deploy_agent", "agent_name": "a"}, ASK],
        "solution": SOLUTION,
    }
    tokens = []
    for _ in range(2):
        result, ctx = await run(doc, base, agent_factory=lambda req: make_agent(f"a2a:{oracle}"))
        assert result.status == "passed", result.error
        assert balance(ctx) == 105  # each episode starts from the seed
        assert [(c.tool, c.role) for c in calls(ctx)] == [("deposit", "customer")]
        tokens.append(ctx.env("bank").served.result().tokens.issue("customer", "a"))
        await assert_stopped(ctx)
    assert tokens[0] != tokens[1]


async def test_a2a_agent_id_may_name_a_peer(base: Path, oracle: str) -> None:
    doc = {
        "steps": [
            DEPLOY_ENV,
            {"id": "peers", "type": "peer_agents", "agents": {"remote-oracle": oracle}},
            {
                "id": "agent",
                "type": "deploy_agent",
                "agent_name": "a",
                "a2a_agent_id": "remote-oracle",
            },
            ASK,
        ],
        "solution": SOLUTION,
    }
    result, ctx = await run(doc, base)
    assert result.status == "passed", result.error
    assert step(result, "peers").output == {"peers": {"remote-oracle": oracle}}
    assert balance(ctx) == 105


async def test_an_unknown_peer_name_fails_the_deploy(base: Path) -> None:
    doc = {
        "steps": [
            DEPLOY_ENV,
            {"id": "agent", "type": "deploy_agent", "agent_name": "a", "a2a_agent_id": "nobody"},
        ]
    }
    result, _ = await run(doc, base)
    assert step(result, "agent").error == (
        "a2a_agent_id 'nobody' is neither an http(s) URL nor a peer "
        "(none yet; declare them with peer_agents)"
    )


# -- remote agents that let the task down ---------------------------------------------------


async def test_a_remote_agent_that_is_down_fails_the_deploy(base: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    doc = {
        "steps": [
            DEPLOY_ENV,
            {"id": "agent", "type": "deploy_agent", "agent_name": "a", "a2a_agent_id": url},
            ASK,
        ],
        "solution": SOLUTION,
    }
    result, ctx = await run(doc, base)
    assert result.status == "error"
    assert step(result, "agent").status == "failed"
    assert step(result, "agent").error == (
        f"the A2A agent at {url} is unreachable: ConnectError: All connection attempts failed"
    )
    assert step(result, "ask").status == "skipped"
    assert ctx.env("bank").served is None  # nothing was served to an agent that is not there
    assert calls(ctx) == []


class Sleeper:
    name = "sleeper"

    def __init__(self) -> None:
        self.stopped = asyncio.Event()

    async def run_turn(self, turn: AgentTurn) -> str:
        try:
            await asyncio.sleep(60)
        finally:
            self.stopped.set()
        return "late"


async def test_a_slow_remote_agent_times_the_prompt_out_and_is_canceled(base: Path) -> None:
    sleeper = Sleeper()
    server = await serve_agent(sleeper)
    try:
        doc = {
            "steps": [
                DEPLOY_ENV,
                {
                    "id": "agent",
                    "type": "deploy_agent",
                    "agent_name": "a",
                    "a2a_agent_id": server.url,
                },
                {**ASK, "timeout_seconds": 1},
            ],
        }
        result, ctx = await run(doc, base)
        await asyncio.wait_for(sleeper.stopped.wait(), WAIT_S)  # the remote turn was canceled
    finally:
        await server.stop()
    assert result.status == "error"
    assert (step(result, "ask").status, step(result, "ask").error) == (
        "timeout",
        "took longer than 1 s",
    )
    await assert_stopped(ctx)


async def test_a_remote_agent_that_answers_garbage_fails_the_prompt(base: Path) -> None:
    """A valid card, and HTML where the JSON-RPC answers should be."""

    async def card(request: Request) -> Response:
        base_url = str(request.base_url).rstrip("/")
        return JSONResponse(agent_card_to_dict(build_agent_card(base_url, name="junk")))

    async def rpc(request: Request) -> Response:
        return PlainTextResponse("<html>hello</html>", media_type="text/html")

    app = Starlette(
        routes=[
            Route("/.well-known/agent-card.json", card, methods=["GET"]),
            Route(JSONRPC_PATH, rpc, methods=["POST"]),
        ]
    )
    server = await BackgroundServer.start(
        lambda port: uvicorn.Server(
            uvicorn.Config(app, port=port, log_level="warning", lifespan="off")
        )
    )
    try:
        doc = {
            "steps": [
                DEPLOY_ENV,
                {
                    "id": "agent",
                    "type": "deploy_agent",
                    "agent_name": "a",
                    "a2a_agent_id": server.url,
                },
                ASK,
            ],
        }
        result, ctx = await run(doc, base)
    finally:
        await server.stop()
    assert result.status == "error"
    assert step(result, "ask").status == "failed"
    assert step(result, "ask").error == (
        f"the A2A agent at {server.url} answered with something that is not a valid A2A "
        "reply: A2AClientError: Invalid JSON-RPC response in SSE stream: Expecting value: "
        "line 1 column 1 (char 0)"
    )
    assert ctx.prompts["ask"].error == step(result, "ask").error
    await assert_stopped(ctx)


async def test_a_remote_agent_that_fails_its_task_fails_the_prompt(base: Path) -> None:
    class Refuser:
        name = "refuser"

        async def run_turn(self, turn: AgentTurn) -> str:
            raise AgentError("not today")

    server = await serve_agent(Refuser())
    try:
        doc = {
            "steps": [
                DEPLOY_ENV,
                {
                    "id": "agent",
                    "type": "deploy_agent",
                    "agent_name": "a",
                    "a2a_agent_id": server.url,
                },
                ASK,
            ],
        }
        result, ctx = await run(doc, base)
    finally:
        await server.stop()
    assert step(result, "ask").error == f"the A2A agent at {server.url} failed the task: not today"
    await assert_stopped(ctx)


class Intruder:
    """Calls a teller-only tool as a customer, then tries the REST door with a role header."""

    name = "intruder"

    async def run_turn(self, turn: AgentTurn) -> str:
        closed = await turn.tools.call("close_account", {"account_id": "a1"})
        config = turn.tools.configs[0]  # type: ignore[attr-defined]
        async with httpx.AsyncClient(timeout=WAIT_S) as http:
            answer = await http.post(
                config.url.removesuffix("/mcp") + "/step",
                json={
                    "action": "call_tool",
                    "tool_name": "close_account",
                    "arguments": {"account_id": "a1"},
                },
                headers={"Authorization": f"Bearer {config.token}", "AgentEnv-Role": "teller"},
            )
        return json.dumps(
            {
                "listed": "close_account" in [t.name for t in turn.tools.list_tools()],
                "mcp": [closed.ok, closed.denied, closed.text],
                "rest": answer.status_code,
            }
        )


async def test_a_remote_agent_calling_a_tool_its_role_may_not_is_denied_and_recorded(
    base: Path,
) -> None:
    server = await serve_agent(Intruder())
    try:
        doc = {
            "steps": [
                DEPLOY_ENV,
                {
                    "id": "agent",
                    "type": "deploy_agent",
                    "agent_name": "a",
                    "a2a_agent_id": server.url,
                },
                ASK,
            ],
        }
        result, ctx = await run(doc, base)
    finally:
        await server.stop()
    assert result.status == "passed", result.error
    answer = json.loads(ctx.prompts["ask"].response or "{}")
    assert answer == {
        "listed": False,
        "mcp": [False, True, "Error: role 'customer' may not call 'close_account'"],
        "rest": 403,  # the role header grants nothing once a token is required
    }
    assert [(c.tool, c.role, c.denied) for c in calls(ctx)] == [
        ("close_account", "customer", True),
        ("close_account", "customer", True),
    ]
    assert ctx.env("bank").state.get("accounts", "a1")["open"] is True
    await assert_stopped(ctx)


# -- peers ----------------------------------------------------------------------------------


class Asker:
    """Forwards its prompt to the peer named `helper` and answers what it says."""

    name = "asker"

    async def run_turn(self, turn: AgentTurn) -> str:
        answer = await send_instruction(
            turn.peers["helper"], turn.prompt, {"prompt_id": turn.prompt_id}, timeout=WAIT_S
        )
        return f"helper says: {answer}"


class Helper:
    """Deposits what it is asked to, as a teller."""

    name = "helper"

    async def run_turn(self, turn: AgentTurn) -> str:
        result = await turn.tools.call("deposit", {"account_id": "a1", "amount": 7})
        return f"{turn.role} deposited" if result.ok else result.text


async def test_peers_address_each_other_over_a2a(base: Path) -> None:
    """A remote agent asks a local one, served over A2A by the peer_agents step."""
    asker = await serve_agent(Asker())
    try:
        doc = {
            "steps": [
                DEPLOY_ENV,
                {"id": "helper", "type": "deploy_agent", "agent_name": "helper", "role": "teller"},
                {
                    "id": "asker",
                    "type": "deploy_agent",
                    "agent_name": "asker",
                    "a2a_agent_id": asker.url,
                },
                {"id": "peers", "type": "peer_agents", "agents": ["helper", "asker"]},
                {**ASK, "agent_name": "asker"},
            ],
        }
        result, ctx = await run(doc, base, agent_factory=lambda req: Helper())
    finally:
        await asker.stop()
    assert result.status == "passed", result.error
    peers = step(result, "peers").output["peers"]
    assert peers["asker"] == asker.url
    assert peers["helper"].startswith("http://127.0.0.1:")
    assert ctx.peers == peers
    assert ctx.prompts["ask"].response == "helper says: teller deposited"
    assert [(c.tool, c.role, c.principal, c.session) for c in calls(ctx)] == [
        ("deposit", "teller", "helper", "ask")
    ]
    assert balance(ctx) == 107
    async with httpx.AsyncClient(timeout=2) as http:  # the served helper is gone too
        with pytest.raises(httpx.ConnectError):
            await http.get(peers["helper"] + "/.well-known/agent-card.json")
    await assert_stopped(ctx)


async def test_peer_agents_checks_what_it_is_given(base: Path) -> None:
    result, _ = await run(
        {"steps": [DEPLOY_ENV, {"id": "p", "type": "peer_agents", "agents": {"x": "ftp://y"}}]},
        base,
    )
    assert (
        step(result, "p").error
        == "agents.x: an A2A agent is named by an http(s) URL, got 'ftp://y'"
    )
    result, _ = await run(
        {"steps": [DEPLOY_ENV, {"id": "p", "type": "peer_agents", "agents": ["ghost"]}]}, base
    )
    assert step(result, "p").error == "no agent 'ghost' is deployed (none deployed)"


# -- nl trigger actions ---------------------------------------------------------------------


class Closer:
    """An nl executor: closes the account its instruction names, as whatever role it is."""

    name = "closer"

    async def run_turn(self, turn: AgentTurn) -> str:
        account = turn.prompt.rsplit(" ", 1)[-1]
        result = await turn.tools.call("close_account", {"account_id": account})
        return "closed" if result.ok else result.text


async def test_an_nl_action_goes_to_the_executor_which_acts_in_the_env(base: Path) -> None:
    executor = await serve_agent(Closer())
    try:
        doc = {
            "steps": [
                DEPLOY_ENV,
                {
                    "id": "triggers",
                    "type": "register_env_triggers",
                    "watch_roles": ["customer"],
                    "executor": {"a2a_url": executor.url, "role": "teller", "timeout_seconds": 10},
                    "triggers": [
                        {
                            "id": "close-after-deposit",
                            "when": {"type": "action", "tool": "deposit"},
                            "actions": [{"type": "nl", "text": "Close account ${args.account_id}"}],
                        }
                    ],
                },
                {"id": "agent", "type": "deploy_agent", "agent_name": "a"},
                ASK,
            ],
            "solution": SOLUTION,
        }
        result, ctx = await run(doc, base, agent_factory=lambda req: make_agent("oracle"))
    finally:
        await executor.stop()
    assert result.status == "passed", result.error
    trajectory = ctx.env("bank").gateway.instance().trajectory
    assert [(r.tool, r.role, r.principal, r.session) for r in trajectory if r.kind == "call"] == [
        ("deposit", "customer", "a", "ask"),
        # made while the deposit's firing waited: the lock is released for the executor
        ("close_account", "teller", "executor", "trigger:close-after-deposit"),
    ]
    assert ctx.env("bank").state.get("accounts", "a1")["open"] is False
    state = ctx.env("bank").gateway.triggers_state()
    assert state.triggers[0].status == "fired"
    assert [e.event for e in state.log] == ["added", "detected", "action_ok", "fired"]
    await assert_stopped(ctx)


async def test_an_nl_action_whose_executor_is_down_fails_the_firing_clearly(base: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    doc = {
        "steps": [
            DEPLOY_ENV,
            {
                "id": "triggers",
                "type": "register_env_triggers",
                "executor": {"a2a_url": url, "timeout_seconds": 5},
                "triggers": [
                    {
                        "id": "tell",
                        "when": {"type": "action", "tool": "deposit"},
                        "actions": [{"type": "nl", "text": "Tell the customer."}],
                    }
                ],
            },
            {"id": "agent", "type": "deploy_agent", "agent_name": "a"},
            ASK,
        ],
        "solution": SOLUTION,
    }
    result, ctx = await run(doc, base, agent_factory=lambda req: make_agent("oracle"))
    assert result.status == "passed", result.error  # the agent's call itself went through
    info = ctx.env("bank").gateway.triggers_state().triggers[0]
    assert (info.status, info.failure_count) == ("armed", 1)  # a failed firing re-arms it
    assert info.error == (
        f"actions[0] (nl): the A2A agent at {url} is unreachable: ConnectError: All "
        "connection attempts failed"
    )
    assert balance(ctx) == 105
    await assert_stopped(ctx)


# -- an agent built on upstream's A2A framework (a2a-sdk 0.3) ---------------------------------


def _upstream_helper() -> Any:
    """tests/agents/a2a_v03/upstream.py: upstream's venv and its echo agent (by path)."""
    import importlib.util
    import sys

    path = Path(__file__).parents[1] / "agents" / "a2a_v03" / "upstream.py"
    spec = importlib.util.spec_from_file_location("agentenv_a2a_v03_upstream", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "drive"):
        spec.loader.exec_module(module)
    return module


async def test_a_task_deploys_an_upstream_agent_which_acts_through_the_served_gateway(
    base: Path,
) -> None:
    helper = _upstream_helper()
    python = helper.upstream_python()
    async with helper.echo_agent(python) as url:
        doc = {
            "steps": [
                DEPLOY_ENV,
                {"id": "agent", "type": "deploy_agent", "agent_name": "a", "a2a_agent_id": url},
                {
                    "id": "ask",
                    "type": "prompt_agent",
                    "prompt": 'call deposit {"account_id": "a1", "amount": 5}',
                },
            ]
        }
        result, ctx = await run(doc, base)
    assert result.status == "passed", result.error
    answer = json.loads(step(result, "ask").output["response"])
    [(name, seen)] = answer["servers"].items()
    assert name == "bank"  # the env_id, as the registration's name
    assert seen["tools"] == ["deposit", "get_account"]  # a customer's: close_account is hidden
    assert seen["is_error"] is False
    assert balance(ctx) == 105
    [call] = calls(ctx)
    assert (call.tool, call.role, call.principal) == ("deposit", "customer", "a")
    await assert_stopped(ctx)


async def test_an_nl_action_goes_to_an_upstream_executor_registered_through_mcp_config(
    base: Path,
) -> None:
    helper = _upstream_helper()
    python = helper.upstream_python()
    async with helper.echo_agent(python) as url:
        doc = {
            "steps": [
                DEPLOY_ENV,
                {
                    "id": "triggers",
                    "type": "register_env_triggers",
                    "watch_roles": ["customer"],
                    "executor": {"a2a_url": url, "role": "teller", "timeout_seconds": 30},
                    "triggers": [
                        {
                            "id": "close-after-deposit",
                            "when": {"type": "action", "tool": "deposit"},
                            "actions": [
                                {
                                    "type": "nl",
                                    "text": 'call close_account {"account_id": "${args.account_id}"}',
                                }
                            ],
                        }
                    ],
                },
                {"id": "agent", "type": "deploy_agent", "agent_name": "a"},
                ASK,
            ],
            "solution": SOLUTION,
        }
        result, ctx = await run(doc, base, agent_factory=lambda req: make_agent("oracle"))
    assert result.status == "passed", result.error
    assert [(r.tool, r.role, r.principal) for r in calls(ctx)] == [
        ("deposit", "customer", "a"),
        ("close_account", "teller", "executor"),  # the upstream agent, as the executor's role
    ]
    assert ctx.env("bank").state.get("accounts", "a1")["open"] is False
    await assert_stopped(ctx)
