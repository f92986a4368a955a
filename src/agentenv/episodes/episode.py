"""The episode SDK: a trainer drives an agent through a task, one turn at a time.

    spec = EpisodeSpec.from_task(Task.get("support-desk/resolve-billing"), turn_timeout=900)
    episode = await spec.start()
    while (turn := await episode.next_turn()) is not None:
        async with turn.tools() as tools:     # the agent's role, through the Gateway
            ...                               # read turn.prompt, call tools
        await turn.end(response="Done.")
    scores = await episode.result()

`start()` runs the task's DAG in the background; each `prompt_agent` step addressed to
the driven agent becomes a Turn that waits for `end()`. Other deployed agents (if any)
are played by the agents given in `agents=`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from agentenv.agents.base import Agent, AgentTurn
from agentenv.gateway.results import CallResult
from agentenv.spec.wire import CallError, ToolInfo
from agentenv.tasks.bundle import Task
from agentenv.tasks.context import DeployedAgentRequest
from agentenv.tasks.runner import TaskResult, TaskRunner, build_steps
from agentenv.tasks.step import StepError


class _TurnTools:
    """A turn's tool client that closes when the turn ends."""

    def __init__(self, tools: Any, future: asyncio.Future[str]) -> None:
        self._tools = tools
        self._future = future

    def list_tools(self) -> list[ToolInfo]:
        """The tools the agent may call."""
        return self._tools.list_tools()

    async def call(
        self, name: str, args: dict[str, Any] | None = None, *, env_id: str | None = None
    ) -> CallResult:
        """Call a tool, unless the turn has ended."""
        if self._future.done():
            message = "this turn has ended; its tools take no more calls"
            return CallResult(
                ok=False,
                value=None,
                text=f"Error: {message}",
                error=CallError(kind="denied", message=message),
                changelog_id=-1,
                seq=-1,
                state_hash="",
            )
        return await self._tools.call(name, args, env_id=env_id)


class Turn:
    """One prompt for the driven agent. Call tools inside `tools()`, then `end()`."""

    def __init__(self, agent_turn: AgentTurn, future: asyncio.Future[str]) -> None:
        self._turn = agent_turn
        self._future = future

    @property
    def prompt(self) -> str:
        """What the agent is asked."""
        return self._turn.prompt

    @property
    def prompt_id(self) -> str:
        """The id verifiers use to find this exchange."""
        return self._turn.prompt_id

    @property
    def role(self) -> str:
        """The agent's role."""
        return self._turn.role

    @property
    def system_prompt(self) -> str | None:
        """The system prompt the task gives, if any."""
        return self._turn.system_prompt

    @property
    def ended(self) -> bool:
        """Whether `end()` was called (or the turn timed out)."""
        return self._future.done()

    @contextlib.asynccontextmanager
    async def tools(self) -> AsyncIterator[_TurnTools]:
        """The agent's tools for this turn (its role, through the Gateway). Once the turn
        has ended (by `end()`, or because its step timed out) they refuse every call."""
        if self.ended:
            raise RuntimeError("this turn has ended")
        yield _TurnTools(self._turn.tools, self._future)

    async def end(self, response: str = "") -> None:
        """Give the agent's final answer; the task goes on."""
        if not self._future.done():
            self._future.set_result(response)
        await asyncio.sleep(0)  # let the task pick the answer up


@dataclass
class EpisodeSpec:
    """How to run one episode of a task."""

    task: Task
    turn_timeout: float | None = None
    agent_name: str | None = None
    seed: dict[str, Any] = field(default_factory=dict)
    agents: Mapping[str, Agent] = field(default_factory=dict)

    @classmethod
    def from_task(
        cls,
        task: Task,
        *,
        turn_timeout: float | None = None,
        agent_name: str | None = None,
        seed: dict[str, Any] | None = None,
        agents: Mapping[str, Agent] | None = None,
    ) -> EpisodeSpec:
        """An episode in which the caller plays `agent_name` (default: every deployed agent
        not given in `agents`). `turn_timeout` ends a turn that runs too long."""
        return cls(task, turn_timeout, agent_name, dict(seed or {}), dict(agents or {}))

    async def start(self) -> Episode:
        """Validate the task and start running it; returns at once."""
        episode = Episode(self)
        episode._start()
        return episode


class Episode:
    """A running episode."""

    def __init__(self, spec: EpisodeSpec) -> None:
        self.spec = spec
        self._turns: asyncio.Queue[Turn] = asyncio.Queue()
        self.context = spec.task.context(
            seed=spec.seed, agent_factory=self._agent_for, driver=self._drive
        )
        self._steps = build_steps(spec.task.spec, spec.seed)
        self._run: asyncio.Task[TaskResult] | None = None

    def _start(self) -> None:
        runner = TaskRunner(self.spec.task.spec, self.context, self._steps)
        self._run = asyncio.create_task(runner.run())

    def _agent_for(self, request: DeployedAgentRequest) -> Agent | None:
        if request.agent_name in self.spec.agents:
            return self.spec.agents[request.agent_name]
        if self.spec.agent_name is None or self.spec.agent_name == request.agent_name:
            return None  # the caller drives it
        raise StepError(f"no agent given for {request.agent_name!r} (pass it in agents=)")

    async def _drive(self, agent_turn: AgentTurn) -> str:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        turn = Turn(agent_turn, future)
        await self._turns.put(turn)
        try:
            return await asyncio.wait_for(asyncio.shield(future), self.spec.turn_timeout)
        except TimeoutError:
            raise StepError(
                f"turn {agent_turn.prompt_id!r} did not end within {self.spec.turn_timeout:g} s"
            ) from None
        finally:
            future.cancel()  # however the step ends, the turn ends with it (tools close)

    async def next_turn(self) -> Turn | None:
        """The next turn for the driven agent, or None once the task has finished."""
        assert self._run is not None
        while True:
            if not self._turns.empty():
                return self._turns.get_nowait()
            if self._run.done():
                return None
            getter = asyncio.ensure_future(self._turns.get())
            try:
                await asyncio.wait({getter, self._run}, return_when=asyncio.FIRST_COMPLETED)
            except BaseException:  # our caller gave up: never lose a turn already taken
                if getter.done() and not getter.cancelled():
                    self._turns.put_nowait(getter.result())
                else:
                    getter.cancel()
                raise
            if getter.done():
                return getter.result()
            getter.cancel()

    async def result(self) -> TaskResult:
        """Wait for the task to finish; its status, steps and verifier scores."""
        assert self._run is not None
        return await self._run
