"""Serve any agent over A2A (a2a-sdk 1.x): agent card, JSON-RPC and REST interfaces.

The served agent learns its environment from each request, not from code: the message
(or request) metadata carries `urn:agentenv:mcp-config/v1` (where the env's MCP endpoint
is, the bearer token, the role, the env_id), `urn:agentenv:peer-agents/v1` (other agents
by name) and the turn's fields (`prompt_id`, `agent_name`, `system_prompt`, `history`,
...). The text parts are the prompt. Each request becomes an `AgentTurn` whose `tools`
speak MCP to that endpoint (`McpTools`), and the agent's `run_turn` answers it.

Upstream AgentEnv's way works too: what its task runner POSTs to the card's `/ext/...`
endpoints (`extensions.py`: environments, peers, settings) holds for every later
request that does not say otherwise. Both A2A 1.0 and 0.3 clients are answered (the
SDK's 0.3 compatibility mode, and JSON-RPC also at `/a2a`, where upstream sends it).

The reply is a Task: completed with an artifact `response` (the answer as text, also the
final status message) and, when the agent called tools, an artifact `trajectory` (its
own log of the calls); or failed, with the reason as the status message. An agent that
raises never reaches the client as a JSON-RPC internal error.

See docs/a2a.md for every metadata key.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import uvicorn
from a2a.helpers import get_text_parts, new_data_part, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes import create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Task,
    TaskState,
    TaskStatus,
)
from a2a.utils import AGENT_CARD_WELL_KNOWN_PATH, TransportProtocol
from a2a.utils.constants import PROTOCOL_VERSION_0_3
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from agentenv import __version__
from agentenv.agents.a2a.extensions import AgentSetup, card_extensions, extension_routes
from agentenv.agents.a2a.mcp_tools import (
    DEFAULT_TIMEOUT,
    McpConfig,
    McpConnectError,
    McpTools,
    NoTools,
    describe,
)
from agentenv.agents.a2a.request import BadRequest, TurnRequest
from agentenv.agents.base import Agent, AgentError

JSONRPC_PATH = "/a2a/jsonrpc"
REST_PREFIX = "/a2a/rest"
LEGACY_JSONRPC_PATH = "/a2a"  # where upstream's agents (and task runner) speak JSON-RPC 0.3
LEGACY_CARD_PATH = "/.well-known/agent.json"  # the card's pre-0.3 address, still asked for

log = logging.getLogger(__name__)

AgentSource = Agent | Callable[[], Agent]
"""An agent shared by every request, or a factory that builds a fresh one per request."""


# -- the executor ---------------------------------------------------------------------------


class _TurnFailed(Exception):
    """A turn that ends the task as failed: the reason, and the `error_code` and
    `error_type` (upstream's `agent_error` or `infra_error`) its status message carries."""

    def __init__(self, message: str, code: str, kind: str = "agent_error") -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind


def _failure(reason: str, code: str, kind: str) -> list[Any]:
    """A failed task's status message parts, laid out as upstream's agents send them: the
    reason as text, then `{error_type, error_code, error_message}` as data."""
    return [
        new_text_part(reason),
        new_data_part({"error_type": kind, "error_code": code, "error_message": reason}),
    ]


class AgentTurnExecutor(AgentExecutor):
    """Runs one of our Agents for each A2A request (see the module's docstring)."""

    def __init__(
        self,
        agent: AgentSource,
        *,
        defaults: list[McpConfig] | None = None,
        mcp_timeout: float = DEFAULT_TIMEOUT,
        turn_timeout: float | None = None,
        setup: AgentSetup | None = None,
    ) -> None:
        self.setup = setup or AgentSetup()
        self._make: Callable[[], Agent] = (
            (lambda: agent) if hasattr(agent, "run_turn") else agent  # type: ignore[assignment,return-value]
        )
        self.defaults = list(defaults or [])
        self.mcp_timeout = mcp_timeout
        self.turn_timeout = turn_timeout

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Take the turn; always ends the task (completed or failed), never raises."""
        message = context.message
        assert message is not None and context.task_id and context.context_id
        task = context.current_task
        if task is None:
            task = Task(
                id=context.task_id,
                context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                history=[message],
            )
            await event_queue.enqueue_event(task)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()
        try:
            metadata = {**(context.metadata or {}), **MessageToDict(message.metadata)}
            request = TurnRequest.parse(
                get_text_parts(message.parts),
                metadata,
                task_id=task.id,
                defaults=self.setup.configs() or self.defaults,
            )
            limit = self.setup.apply(request)
            response, calls = await self._run(request, limit or self.turn_timeout)
        except BadRequest as exc:
            await updater.failed(
                updater.new_agent_message(_failure(str(exc), "bad_request", "agent_error"))
            )
            return
        except _TurnFailed as exc:
            await updater.failed(updater.new_agent_message(_failure(str(exc), exc.code, exc.kind)))
            return
        except Exception as exc:  # the agent's own bug: a failed task, logged with its trace
            log.exception("the agent failed on task %s", task.id)
            parts = _failure(describe(exc), "agent_exception", "agent_error")
            await updater.failed(updater.new_agent_message(parts))
            return
        trajectory = {"prompt_id": request.prompt_id, "calls": calls}
        self.setup.keep_trajectory(task.id, trajectory)
        await updater.add_artifact([new_text_part(response)], name="response")
        if calls:
            await updater.add_artifact([new_data_part(trajectory)], name="trajectory")
        # The answer is also the final status message, where upstream's task runner reads
        # it (with the tool call count as `usage`, as upstream's agents report it).
        usage = new_data_part({"usage": {"tool_call_count": len(calls)}})
        await updater.complete(updater.new_agent_message([new_text_part(response), usage]))

    async def _run(
        self, request: TurnRequest, turn_timeout: float | None
    ) -> tuple[str, list[dict[str, Any]]]:
        agent = self._make()
        async with contextlib.AsyncExitStack() as stack:
            tools: Any = NoTools()
            if request.configs:
                try:
                    tools = await stack.enter_async_context(
                        McpTools(
                            request.configs, session=request.prompt_id, timeout=self.mcp_timeout
                        )
                    )
                except McpConnectError as exc:
                    raise _TurnFailed(str(exc), "environment_unreachable", "infra_error") from None
            turn = request.turn(agent, tools)
            try:
                if turn_timeout:
                    response = await asyncio.wait_for(agent.run_turn(turn), turn_timeout)
                else:
                    response = await agent.run_turn(turn)
            except AgentError as exc:
                raise _TurnFailed(str(exc), "agent_error") from None
            except TimeoutError:
                reason = f"the agent did not finish within {turn_timeout:g} s"
                raise _TurnFailed(reason, "timeout") from None
            if not isinstance(response, str):
                reason = f"the agent answered {type(response).__name__}, not text"
                raise _TurnFailed(reason, "bad_answer")
            calls = list(getattr(tools, "calls", []))
        return response, calls

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing to clean up here: the SDK cancels the running turn and marks the task
        canceled (closing its MCP connections on the way out)."""


# -- the card and the app -------------------------------------------------------------------


def build_agent_card(
    base_url: str,
    *,
    name: str,
    description: str | None = None,
    solution: bool = False,
    default_env: bool = False,
) -> AgentCard:
    """The agent card for an agent served at `base_url`."""
    base = base_url.rstrip("/")
    return AgentCard(
        name=name,
        description=description
        or f"The agentenv agent {name!r}, served over A2A: it takes one turn per message, "
        "acting in the environment named by urn:agentenv:mcp-config/v1.",
        version=__version__,
        supported_interfaces=[
            AgentInterface(
                url=base + JSONRPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version="1.0",
            ),
            AgentInterface(
                url=base + REST_PREFIX,
                protocol_binding=TransportProtocol.HTTP_JSON,
                protocol_version="1.0",
            ),
            # A2A 0.3 clients read the first of these as the card's `url`; upstream's
            # task runner posts JSON-RPC to `<base>/a2a` whatever the card says.
            AgentInterface(
                url=base + LEGACY_JSONRPC_PATH,
                protocol_binding=TransportProtocol.JSONRPC,
                protocol_version=PROTOCOL_VERSION_0_3,
            ),
            AgentInterface(
                url=base + REST_PREFIX,
                protocol_binding=TransportProtocol.HTTP_JSON,
                protocol_version=PROTOCOL_VERSION_0_3,
            ),
        ],
        capabilities=AgentCapabilities(
            streaming=True,
            extensions=card_extensions(solution=solution, default_env=default_env),
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[
            AgentSkill(
                id="take-turn",
                name="Take a turn",
                description="Act on the prompt with the environment's tools, then answer.",
                tags=["agentenv"],
            )
        ],
    )


def create_a2a_app(
    agent: AgentSource,
    *,
    name: str | None = None,
    description: str | None = None,
    public_url: str | None = None,
    mcp: list[McpConfig] | None = None,
    solution: bool | None = None,
    mcp_timeout: float = DEFAULT_TIMEOUT,
    turn_timeout: float | None = None,
) -> Starlette:
    """An ASGI app serving `agent` over A2A.

    `agent` is an Agent (shared by all requests) or a factory called once per request
    (nothing carries over between episodes). The card's interface URLs are `public_url`
    or else the URL the card was fetched from. `mcp` is the environment used when a
    request names none (e.g. an `nl` executor configured once). `solution` declares
    urn:agentenv:solution/v1 (default: only for the oracle).
    """
    sample = agent if hasattr(agent, "run_turn") else agent()  # type: ignore[operator]
    name = name or getattr(sample, "name", "agent")
    if solution is None:
        from agentenv.agents.oracle import OracleAgent

        solution = isinstance(sample, OracleAgent) or bool(getattr(sample, "uses_solution", 0))
    defaults = list(mcp or [])

    def card_for(base_url: str) -> AgentCard:
        return build_agent_card(
            base_url,
            name=name,
            description=description,
            solution=bool(solution),
            default_env=bool(defaults),
        )

    setup = AgentSetup()
    handler = DefaultRequestHandler(
        agent_executor=AgentTurnExecutor(
            agent,
            defaults=defaults,
            mcp_timeout=mcp_timeout,
            turn_timeout=turn_timeout,
            setup=setup,
        ),
        task_store=InMemoryTaskStore(),
        agent_card=card_for(public_url or "http://127.0.0.1"),
    )

    async def agent_card(request: Request) -> JSONResponse:
        base = public_url or str(request.base_url)
        return JSONResponse(agent_card_to_dict(card_for(base)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await handler.aclose()  # no agent turn outlives the server

    return Starlette(
        routes=[
            Route(AGENT_CARD_WELL_KNOWN_PATH, agent_card, methods=["GET"]),
            Route(LEGACY_CARD_PATH, agent_card, methods=["GET"]),
            # Before the REST routes: their tenant mount (`/{tenant}`) matches any path.
            *extension_routes(setup),
            # Each JSON-RPC endpoint answers both A2A 1.0 and 0.3 method names.
            *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH, enable_v0_3_compat=True),
            *create_jsonrpc_routes(handler, rpc_url=LEGACY_JSONRPC_PATH, enable_v0_3_compat=True),
            *create_rest_routes(handler, path_prefix=REST_PREFIX, enable_v0_3_compat=True),
        ],
        lifespan=lifespan,
    )


def make_agent_server(
    agent: AgentSource,
    *,
    host: str = "127.0.0.1",
    port: int = 9100,
    log_level: str = "warning",
    **options: Any,
) -> uvicorn.Server:
    """A uvicorn server for `create_a2a_app(agent, **options)`; `.run()` or `await .serve()`."""
    app = create_a2a_app(agent, **options)
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=3,
    )
    return uvicorn.Server(config)


async def serve_agent(agent: AgentSource, *, host: str = "127.0.0.1", **options: Any) -> Any:
    """Serve `agent` over A2A from this event loop on a free port of `host`; returns a
    started `BackgroundServer` (its `url` is the agent's base URL; `await .stop()`)."""
    from agentenv.serve.background import BackgroundServer

    return await BackgroundServer.start(
        lambda port: make_agent_server(agent, host=host, port=port, **options), host=host
    )
