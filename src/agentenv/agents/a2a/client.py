"""Talking to a remote A2A agent (a2a-sdk 1.x): `RemoteA2AAgent` and `send_instruction`.

`RemoteA2AAgent` is an Agent whose turns a remote A2A agent takes: it fetches the agent
card (which must declare `urn:agentenv:mcp-config/v1`), sends the prompt with the
environment's MCP endpoint and credential in the metadata, and waits for the task to
finish. Every way a remote agent can let us down (down, slow, garbage, a failed task)
becomes an AgentError with a message that says which; a turn cut short (timeout or
cancel) asks the remote agent to cancel its task, best effort.

`send_instruction` is the same exchange without the turn: for peers and for the `nl`
actions of triggers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any, Literal
from urllib.parse import parse_qsl, urljoin, urlsplit, urlunsplit

import httpx
from a2a.client import (
    A2ACardResolver,
    A2AClientTimeoutError,
    AgentCardResolutionError,
    ClientCallContext,
    ClientConfig,
    ClientFactory,
)
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.helpers import get_artifact_text, get_message_text, new_text_part
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import A2AError

from agentenv.agents.a2a import (
    EXTENSIONS,
    MCP_CONFIG_URI,
    PEER_AGENTS_URI,
    SOLUTION_URI,
)
from agentenv.agents.a2a.configure import configure
from agentenv.agents.a2a.mcp_tools import McpConfig, describe
from agentenv.agents.base import AgentError, AgentTurn

DEFAULT_TIMEOUT = 600.0  # prompt_agent's own default
CARD_TIMEOUT = 10.0
CANCEL_TIMEOUT = 3.0
POLL_FIRST, POLL_MAX = 0.1, 2.0  # seconds between GetTask calls to an agent that cannot stream
SolutionPolicy = Literal["auto", "always", "never"]

_ENDED = {
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
}


def check_url(url: str) -> str:
    """An A2A base URL, without a trailing slash (AgentError if it is not http(s))."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AgentError(f"an A2A agent is named by an http(s) URL, got {url!r}")
    return urlunsplit(parts).rstrip("/")


def _unreachable(url: str, exc: BaseException) -> AgentError:
    cause = exc.__cause__
    if isinstance(cause, httpx.TimeoutException) or isinstance(exc, A2AClientTimeoutError):
        return AgentError(f"the A2A agent at {url} did not answer in time ({describe(exc)})")
    return AgentError(f"the A2A agent at {url} is unreachable: {describe(cause or exc)}")


async def fetch_card(url: str, *, timeout: float = CARD_TIMEOUT) -> AgentCard:
    """The agent card at `url`/.well-known/agent-card.json (AgentError saying why not)."""
    url = check_url(url)
    try:
        async with httpx.AsyncClient(timeout=timeout) as http:
            card = await A2ACardResolver(http, url).get_agent_card()
    except AgentCardResolutionError as exc:
        if isinstance(exc.__cause__, httpx.RequestError):
            raise _unreachable(url, exc) from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise AgentError(f"the A2A agent at {url} has no valid agent card: {first}") from None
    except Exception as exc:
        raise AgentError(
            f"the A2A agent at {url} has no valid agent card: {describe(exc)}"
        ) from None
    if not card.supported_interfaces:
        raise AgentError(
            f"the A2A agent at {url} names no interface to send messages to in its agent card"
        )
    # Upstream's agents name their endpoint by path alone (`"url": "/a2a"`): it is the
    # agent's own address, so it resolves against where the card came from.
    for interface in card.supported_interfaces:
        if interface.url.startswith("/"):
            interface.url = url + interface.url
        elif not urlsplit(interface.url).scheme:
            interface.url = urljoin(url + "/", interface.url)
    return card


def declares(card: AgentCard, uri: str) -> bool:
    """Whether the card declares the extension."""
    return any(ext.uri == uri for ext in card.capabilities.extensions)


def _fold(task: Task | None, event: Any) -> Task | None:
    """Apply one streamed event to the task it updates."""
    kind = event.WhichOneof("payload")
    if kind == "task":
        folded = Task()
        folded.CopyFrom(event.task)
        return folded
    if kind == "status_update":
        update = event.status_update
        if task is None:
            task = Task(id=update.task_id, context_id=update.context_id)
        task.status.CopyFrom(update.status)
    elif kind == "artifact_update":
        update = event.artifact_update
        if task is None:
            task = Task(id=update.task_id, context_id=update.context_id)
        artifact = update.artifact
        for existing in task.artifacts:
            if existing.artifact_id and existing.artifact_id == artifact.artifact_id:
                if update.append:
                    existing.parts.extend(artifact.parts)
                else:
                    existing.CopyFrom(artifact)
                break
        else:
            task.artifacts.append(artifact)
    return task


def _status_text(task: Task) -> str:
    if task.status.HasField("message"):
        return get_message_text(task.status.message).strip()
    return ""


def answer_text(url: str, result: Task | Message) -> str:
    """The answer in a final reply; AgentError for a task that did not complete."""
    if isinstance(result, Message):
        return get_message_text(result)
    state = result.status.state
    if state == TaskState.TASK_STATE_COMPLETED:
        named = [a for a in result.artifacts if a.name == "response"]
        chosen = named or [a for a in result.artifacts if a.name != "trajectory"]
        texts = [get_artifact_text(a) for a in chosen]
        if any(texts):
            return "\n".join(t for t in texts if t)
        return _status_text(result)
    reason = _status_text(result) or "no reason given"
    if state == TaskState.TASK_STATE_FAILED:
        raise AgentError(f"the A2A agent at {url} failed the task: {reason}")
    if state == TaskState.TASK_STATE_REJECTED:
        raise AgentError(f"the A2A agent at {url} rejected the task: {reason}")
    if state == TaskState.TASK_STATE_CANCELED:
        raise AgentError(f"the A2A agent at {url} canceled the task: {reason}")
    if state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
        raise AgentError(
            f"the A2A agent at {url} asks for more ({TaskState.Name(state)}), which one "
            f"message cannot give: {reason}"
        )
    raise AgentError(
        f"the A2A agent at {url} stopped answering before the task ended "
        f"(last state: {TaskState.Name(state)})"
    )


async def exchange(
    url: str,
    card: AgentCard,
    text: str,
    metadata: dict[str, Any],
    *,
    timeout: float,
    limit: float | None = None,
    extensions: tuple[str, ...] = EXTENSIONS,
) -> Task | Message:
    """Send one message and wait (at most `timeout` s) for the final Task or Message.

    AgentError for every failure (a timeout's message names `limit`, the caller's whole
    budget, default `timeout`). On timeout or cancellation the remote task is asked to
    cancel (best effort, bounded).
    """
    too_slow = f"the A2A agent at {url} did not finish within {limit or timeout:g} s"
    http = httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(timeout, CARD_TIMEOUT)))
    try:
        client = ClientFactory(
            ClientConfig(
                streaming=True,
                httpx_client=http,
                supported_protocol_bindings=["JSONRPC", "HTTP+JSON"],
            )
        ).create(card)
    except Exception as exc:
        await http.aclose()
        raise AgentError(f"cannot talk to the A2A agent at {url}: {describe(exc)}") from None
    context_id = str(uuid.uuid4())  # ours, so that a task we never heard of can be found
    request = SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            context_id=context_id,
            parts=[new_text_part(text)],
            metadata=metadata,
        )
    )
    # An agent that cannot stream (upstream's) is asked to answer at once and then polled,
    # as upstream's task runner does: the task id is known from the start, so a turn cut
    # short can cancel it, and no HTTP request stays open for the whole turn.
    polled = not card.capabilities.streaming
    if polled:
        request.configuration.return_immediately = True
    context = ClientCallContext(
        timeout=timeout,
        service_parameters=ServiceParametersFactory.create([with_a2a_extensions(list(extensions))]),
    )
    task: Task | None = None
    reply: Message | None = None
    try:
        async with asyncio.timeout(timeout):
            async for event in client.send_message(request, context=context):
                if event.WhichOneof("payload") == "message":
                    reply = event.message
                    break
                task = _fold(task, event)
                if task is not None and task.status.state in _ENDED:
                    break
            if reply is None and task is not None and polled:
                task = await _poll(client, task, context)
    except (TimeoutError, A2AClientTimeoutError):
        await _cancel(client, task, context_id)
        raise AgentError(too_slow) from None
    except asyncio.CancelledError:
        await _cancel(client, task, context_id)
        raise
    except A2AError as exc:
        cause = exc.__cause__
        if isinstance(cause, httpx.TimeoutException):
            await _cancel(client, task, context_id)
            raise AgentError(too_slow) from None
        if isinstance(cause, httpx.RequestError) or "Network communication error" in str(exc):
            raise _unreachable(url, exc) from None
        raise AgentError(
            f"the A2A agent at {url} answered with something that is not a valid A2A reply: "
            f"{describe(exc)}"
        ) from None
    except Exception as exc:  # a reply the SDK could not make sense of
        raise AgentError(
            f"the A2A agent at {url} answered with something that is not a valid A2A reply: "
            f"{describe(exc)}"
        ) from None
    finally:
        with contextlib.suppress(Exception):
            await client.close()
        await http.aclose()
    if reply is not None:
        return reply
    if task is None:
        raise AgentError(f"the A2A agent at {url} ended its reply without a task or a message")
    return task


async def _poll(client: Any, task: Task, context: ClientCallContext) -> Task:
    """GetTask until the task ends (the caller bounds the time)."""
    delay = POLL_FIRST
    while task.status.state not in _ENDED:
        await asyncio.sleep(delay)
        delay = min(delay * 2, POLL_MAX)
        task = await client.get_task(GetTaskRequest(id=task.id), context=context)
    return task


async def _cancel(client: Any, task: Task | None, context_id: str) -> None:
    """Ask the remote agent to cancel what it is still working on for us (best effort,
    bounded): the task we know of, or else those of our context (the reply may have been
    cut before its first event)."""
    call = ClientCallContext(timeout=CANCEL_TIMEOUT)

    async def cancel_all() -> None:
        if task is not None and task.id:
            ids = [] if task.status.state in _ENDED else [task.id]
        else:
            listed = await client.list_tasks(ListTasksRequest(context_id=context_id), context=call)
            ids = [t.id for t in listed.tasks if t.status.state not in _ENDED]
        for task_id in ids:
            await client.cancel_task(CancelTaskRequest(id=task_id), context=call)

    with contextlib.suppress(Exception, asyncio.CancelledError):
        await asyncio.wait_for(cancel_all(), CANCEL_TIMEOUT)


async def send_instruction(
    url: str,
    text: str,
    metadata: dict[str, Any] | None = None,
    *,
    timeout: float = 60.0,
) -> str:
    """Send `text` to the A2A agent at `url` and return its answer (AgentError if none).

    For peers (`turn.peers`) and `nl` trigger actions. Metadata values should be JSON
    data; numbers arrive as floats (protobuf Struct), so send exact structured values as
    JSON text.
    """
    url = check_url(url)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    card = await fetch_card(url, timeout=min(timeout, CARD_TIMEOUT))
    meta = dict(metadata or {})
    if meta.get(MCP_CONFIG_URI) is not None:
        # An upstream-era executor learns where to act only through mcp-config `add`.
        try:
            configs = McpConfig.parse(meta[MCP_CONFIG_URI])
        except ValueError as exc:
            raise AgentError(f"metadata {MCP_CONFIG_URI!r}: {exc}") from None
        await configure(url, card, configs, {})
    left = max(deadline - loop.time(), 0.1)
    result = await exchange(url, card, text, meta, timeout=left, limit=timeout)
    return answer_text(url, result)


class RemoteA2AAgent:
    """An agent whose turns a remote A2A agent takes (see the module's docstring).

    `mcp` is where the remote agent acts (set by `deploy_agent`, which serves the env's
    gateway to it: `bind`). `solution`: send the task's reference solution when the card
    declares `urn:agentenv:solution/v1` (`auto`, how the oracle works remotely), always,
    or never.
    """

    name = "a2a"

    def __init__(
        self,
        url: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        card_timeout: float = CARD_TIMEOUT,
        solution: SolutionPolicy = "auto",
        mcp: list[McpConfig] | None = None,
    ) -> None:
        if timeout <= 0 or card_timeout <= 0:
            raise AgentError("timeouts must be positive")
        if solution not in ("auto", "always", "never"):
            raise AgentError(f"solution must be auto, always or never, got {solution!r}")
        self.url = check_url(url)
        self.timeout = timeout
        self.card_timeout = card_timeout
        self.solution: SolutionPolicy = solution
        self.mcp = list(mcp or [])
        self._card: AgentCard | None = None
        self._configured = False

    @classmethod
    def from_spec(cls, argument: str) -> RemoteA2AAgent:
        """`URL[?timeout=S&card_timeout=S&solution=auto|always|never]` (the part after `a2a:`)."""
        if not argument:
            raise AgentError("give the agent's URL: a2a:http://host:port")
        parts = urlsplit(argument)
        options: dict[str, Any] = {}
        kept = []
        for key, value in parse_qsl(parts.query, keep_blank_values=True):
            if key in ("timeout", "card_timeout"):
                try:
                    options[key] = float(value)
                except ValueError:
                    raise AgentError(f"{key} must be a number of seconds, got {value!r}") from None
            elif key == "solution":
                options[key] = value
            else:
                kept.append(f"{key}={value}")
        url = urlunsplit(parts._replace(query="&".join(kept)))
        return cls(url, **options)

    def bind(self, mcp: list[McpConfig]) -> RemoteA2AAgent:
        """The same remote agent, acting in these environments (the card is shared)."""
        bound = RemoteA2AAgent(
            self.url,
            timeout=self.timeout,
            card_timeout=self.card_timeout,
            solution=self.solution,
            mcp=mcp,
        )
        bound._card = self._card
        return bound

    async def card(self) -> AgentCard:
        """The remote agent's card, fetched once and checked: it must declare
        urn:agentenv:mcp-config/v1 (AgentError otherwise)."""
        if self._card is None:
            card = await fetch_card(self.url, timeout=self.card_timeout)
            if not declares(card, MCP_CONFIG_URI):
                raise AgentError(
                    f"the A2A agent at {self.url} does not declare {MCP_CONFIG_URI} in its agent "
                    "card, so it cannot be told where its environment is"
                )
            self._card = card
        return self._card

    def metadata(self, turn: AgentTurn, card: AgentCard) -> dict[str, Any]:
        """The message metadata for a turn (see docs/a2a.md)."""
        meta: dict[str, Any] = {
            "prompt_id": turn.prompt_id,
            "agent_name": turn.agent_name,
            "role": turn.role,
            "conversation_turn": turn.conversation_turn,
        }
        if self.mcp:
            configs = [c.to_wire() for c in self.mcp]
            meta[MCP_CONFIG_URI] = configs[0] if len(configs) == 1 else configs
        if turn.peers:
            meta[PEER_AGENTS_URI] = dict(turn.peers)
        if turn.system_prompt:
            meta["system_prompt"] = turn.system_prompt
        if turn.history:
            meta["history"] = [dict(h) for h in turn.history]
        if turn.max_turns is not None:
            meta["max_turns"] = turn.max_turns
        if turn.model:
            meta["model"] = turn.model
        # Exact numbers: structured values travel as JSON text (a Struct makes 5 into 5.0).
        if turn.model_params:
            meta["model_params"] = json.dumps(turn.model_params)
        if turn.config:
            meta["config"] = json.dumps(turn.config)
        wants = self.solution == "always" or (
            self.solution == "auto" and declares(card, SOLUTION_URI)
        )
        if turn.solution is not None and wants:
            meta["solution"] = turn.solution.model_dump_json()
        return meta

    async def run_turn(self, turn: AgentTurn) -> str:
        """Send the prompt; the remote agent's answer, or AgentError saying what went wrong."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        card = await self.card()
        # Upstream-era agents learn their environment through mcp-config `add` (once) and
        # the turn's settings through agent-config `set` (each turn).
        await configure(
            self.url,
            card,
            self.mcp,
            dict(turn.peers),
            {
                "name": turn.agent_name,
                "role": turn.role,
                "system_prompt": turn.system_prompt,
                "model": turn.model,
                "max_turns": turn.max_turns,
                "model_params": turn.model_params or None,
            },
            register=not self._configured,
        )
        self._configured = True
        left = max(deadline - loop.time(), 0.1)
        result = await exchange(
            self.url, card, turn.prompt, self.metadata(turn, card), timeout=left, limit=self.timeout
        )
        return answer_text(self.url, result)
