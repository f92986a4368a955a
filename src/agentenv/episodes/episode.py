"""The episode SDK: a trainer drives an agent through a task, one turn at a time.

    spec = EpisodeSpec.from_task(Task.get("support-desk/resolve-billing"), turn_timeout=900)
    episode = await spec.start()
    while (turn := await episode.next_turn()) is not None:
        async with turn.tools() as tools:     # the agent's role, through the Gateway
            ...                               # read turn.prompt, call tools
        await turn.end(response="Done.", usage={"prompt_tokens": 812, "completion_tokens": 64})
    result = await episode.result()           # TaskResult: status, score, scores by verifier
    episode.messages()                        # the chat an LLM saw (OpenAI message list)
    episode.trajectory()                      # every call and message, as records
    episode.usage, episode.final_state()      # tokens summed; each env's records at the end

`start()` runs the task's DAG in the background; each `prompt_agent` step addressed to
the driven agent becomes a Turn that waits for `end()`. Other deployed agents (if any)
are played by the agents given in `agents=`.

Episodes share what does not change between them, as rollouts do: the rollout's
`EnvironmentCache` (environments loaded once per document, a task's steps checked once
per seed, each tool's JSON form made once). By default every episode of the process
shares one (`default_cache()`); pass `cache=` for your own, or `cache=False` to load
everything afresh each episode (e.g. while editing an environment's document).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from agentenv.agents.base import Agent, AgentTurn
from agentenv.agents.openai_agent import function_tool
from agentenv.episodes.usage import UsageLike, usage_counters
from agentenv.gateway.results import CallResult
from agentenv.rollout.episode import WORKER, EnvironmentCache
from agentenv.rollout.exporters.base import chat_messages, chat_tools, conversations
from agentenv.rollout.plan import PlannedEpisode, episode_id
from agentenv.rollout.records import Finished, build_record, usage_of
from agentenv.rollout.store import EpisodeRecord
from agentenv.spec.wire import CallError, ToolInfo
from agentenv.tasks.bundle import Task
from agentenv.tasks.context import DeployedAgentRequest
from agentenv.tasks.runner import TaskResult, TaskRunner, build_steps
from agentenv.tasks.step import StepError

DEFAULT_CACHE_TASKS = 1024
"""How many (task, seed) step lists the default cache keeps: a trainer that loads its Task
anew for every episode must not grow it without end."""

_default: EnvironmentCache | None = None

_repeats: dict[str, itertools.count[int]] = {}
"""Per task name, the next repeat number an episode of this process takes: how two SDK
episodes of one task get distinct record ids (as a rollout's repeats do). Keyed by task
alone, not by seed too, so a trainer drawing a fresh seed per episode keeps one counter
per task rather than one per episode."""


def _next_repeat(task: str) -> int:
    return next(_repeats.setdefault(task, itertools.count()))


def default_cache() -> EnvironmentCache:
    """The cache every episode of this process shares unless given another (made on first
    use). `len(default_cache())` is how many environment documents it has loaded."""
    global _default
    if _default is None:
        _default = EnvironmentCache(max_tasks=DEFAULT_CACHE_TASKS)
    return _default


class TurnTools:
    """A turn's tool client (the agent's role, through the Gateway); it refuses every call
    once the turn has ended."""

    def __init__(self, tools: Any, future: asyncio.Future[str]) -> None:
        self._tools = tools
        self._future = future

    def list_tools(self) -> list[ToolInfo]:
        """The tools the agent may call."""
        return self._tools.list_tools()

    def openai_tools(self) -> list[dict[str, Any]]:
        """The same tools as OpenAI function tools (`tools=` of a chat completion)."""
        return [function_tool(info) for info in self.list_tools()]

    async def call(
        self, name: str, args: dict[str, Any] | None = None, *, env_id: str | None = None
    ) -> CallResult:
        """Call a tool, unless the turn has ended. `result.text` is what the agent reads."""
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

    def __init__(
        self,
        agent_turn: AgentTurn,
        future: asyncio.Future[str],
        on_usage: Callable[[Turn, dict[str, int | float]], None],
    ) -> None:
        self._turn = agent_turn
        self._future = future
        self._on_usage = on_usage
        self._usage: dict[str, int | float] | None = None

    @property
    def prompt(self) -> str:
        """What the agent is asked (in a conversation: the simulated user's last message)."""
        return self._turn.prompt

    @property
    def prompt_id(self) -> str:
        """The id verifiers use to find this exchange."""
        return self._turn.prompt_id

    @property
    def agent_name(self) -> str:
        """The deployed agent this turn is for."""
        return self._turn.agent_name

    @property
    def role(self) -> str:
        """The agent's role."""
        return self._turn.role

    @property
    def system_prompt(self) -> str | None:
        """The system prompt the task gives, if any."""
        return self._turn.system_prompt

    @property
    def conversation_turn(self) -> int:
        """In a conversation with a simulated user, which exchange this is (from 0)."""
        return self._turn.conversation_turn

    @property
    def history(self) -> list[dict[str, str]]:
        """In a conversation, the messages so far (`{"role", "text"}`); else empty."""
        return list(self._turn.history)

    @property
    def ended(self) -> bool:
        """Whether `end()` was called (or the turn timed out)."""
        return self._future.done()

    @property
    def usage(self) -> dict[str, int | float] | None:
        """The token usage given to `end()`, as counters (None if none was given)."""
        return None if self._usage is None else dict(self._usage)

    @contextlib.asynccontextmanager
    async def tools(self) -> AsyncIterator[TurnTools]:
        """The agent's tools for this turn (its role, through the Gateway). Once the turn
        has ended (by `end()`, or because its step timed out) they refuse every call."""
        if self.ended:
            raise RuntimeError("this turn has ended")
        yield TurnTools(self._turn.tools, self._future)

    async def end(self, response: str = "", *, usage: UsageLike | None = None) -> None:
        """Give the agent's final answer; the task goes on. `usage` is what the model spent
        on this turn (a dict, or an openai `CompletionUsage`); it is recorded for the turn
        even when the turn had already timed out (the tokens were spent). Only the first
        call counts."""
        if usage is not None and self._usage is None:
            self._usage = usage_counters(usage)
            self._on_usage(self, self._usage)
        if not self._future.done():
            self._future.set_result(response)
        await asyncio.sleep(0)  # let the task pick the answer up


CacheChoice = EnvironmentCache | Literal[False] | None
"""An `EnvironmentCache`; None for the process's `default_cache()`; False for none."""


@dataclass
class EpisodeSpec:
    """How to run one episode of a task."""

    task: Task
    turn_timeout: float | None = None
    agent_name: str | None = None
    seed: dict[str, Any] = field(default_factory=dict)
    agents: Mapping[str, Agent] = field(default_factory=dict)
    cache: CacheChoice = None

    @classmethod
    def from_task(
        cls,
        task: Task,
        *,
        turn_timeout: float | None = None,
        agent_name: str | None = None,
        seed: dict[str, Any] | None = None,
        agents: Mapping[str, Agent] | None = None,
        cache: CacheChoice = None,
    ) -> EpisodeSpec:
        """An episode in which the caller plays `agent_name` (default: every deployed agent
        not given in `agents`). `turn_timeout` ends a turn that runs too long. `cache`: see
        `CacheChoice` (the default shares loaded environments across the process)."""
        return cls(task, turn_timeout, agent_name, dict(seed or {}), dict(agents or {}), cache)

    def environment_cache(self) -> EnvironmentCache | None:
        """The cache episodes of this spec use (None: none)."""
        if self.cache is False:
            return None
        return self.cache if self.cache is not None else default_cache()

    async def start(self) -> Episode:
        """Validate the task and start running it; returns at once."""
        episode = Episode(self)
        episode._start()
        return episode


class Episode:
    """A running episode: its turns (`next_turn`), then what it left (`result`, `record`,
    `trajectory`, `messages`, `usage`, `final_state`)."""

    def __init__(self, spec: EpisodeSpec) -> None:
        self.spec = spec
        self._turns: asyncio.Queue[Turn] = asyncio.Queue()
        self.context = spec.task.context(
            seed=spec.seed, agent_factory=self._agent_for, driver=self._drive
        )
        self._cache = spec.environment_cache()
        if self._cache is not None:  # as rollout.run_episode builds its context
            self.context.env_resolver = self._cache.resolver(spec.task)
            self._steps = self._cache.steps_for(spec.task, self.context.seed)
        else:
            self._steps = build_steps(spec.task.spec, spec.seed)
        self._runner: TaskRunner | None = None
        self._run: asyncio.Task[TaskResult] | None = None
        self._started = datetime.now(UTC)
        self._t0 = 0.0
        self._duration: float | None = None
        self._record: EpisodeRecord | None = None
        self.repeat = _next_repeat(spec.task.name)
        """This episode's number among the episodes of its task that this process started
        (from 0): the default `repeat` of its record."""

    def _start(self) -> None:
        self._runner = TaskRunner(self.spec.task.spec, self.context, self._steps)
        self._started, self._t0 = datetime.now(UTC), time.perf_counter()
        self._run = asyncio.create_task(self._runner.run())
        self._run.add_done_callback(self._finished)

    def _finished(self, _: object) -> None:
        self._duration = time.perf_counter() - self._t0

    def _agent_for(self, request: DeployedAgentRequest) -> Agent | None:
        if request.agent_name in self.spec.agents:
            return self.spec.agents[request.agent_name]
        if self.spec.agent_name is None or self.spec.agent_name == request.agent_name:
            return None  # the caller drives it
        raise StepError(f"no agent given for {request.agent_name!r} (pass it in agents=)")

    def _usage(self, turn: Turn, counters: dict[str, int | float]) -> None:
        entry = {"agent": turn.agent_name, "turn": turn.conversation_turn, "usage": counters}
        self.context.usage.setdefault(turn.prompt_id, []).append(entry)
        self._record = None  # a record built before this no longer holds all of it

    async def _drive(self, agent_turn: AgentTurn) -> str:
        future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        turn = Turn(agent_turn, future, self._usage)
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
        """Wait for the task to finish: its status, aggregate score, steps, and
        `scores` by verifier step id (each a `Score`: score, passed, details)."""
        assert self._run is not None
        return await self._run

    @property
    def done(self) -> bool:
        """Whether the task has finished."""
        return self._run is not None and self._run.done()

    def _result_now(self) -> TaskResult:
        if self._run is None or not self._run.done():
            raise RuntimeError("the episode has not finished: await episode.result() first")
        return self._run.result()

    # -- what a trainer keeps ----------------------------------------------------------

    def record(self, agent: str = "sdk", *, repeat: int | None = None) -> EpisodeRecord:
        """The episode as the rollout store keeps it (`EpisodeRecord`: status, scores,
        usage, prompts, tools offered, trajectory), `agent` naming who played it. After
        `result()`; the same object until more usage is reported.

        Its `episode_id` is a digest of task, agent, seed and `repeat`, as in a rollout.
        `repeat` defaults to `self.repeat` (the n-th episode of this task that this
        process started), so the records of two episodes differ; pass it to number
        episodes yourself (e.g. when several processes append to one run folder)."""
        repeat = self.repeat if repeat is None else repeat
        if repeat < 0:
            raise ValueError(f"record(repeat={repeat}): a repeat is a number from 0")
        cached = self._record
        if cached is not None and (cached.agent, cached.repeat) == (agent, repeat):
            return cached
        result = self._result_now()
        seed = dict(self.context.seed)
        name = self.spec.task.name
        planned = PlannedEpisode(
            episode_id(name, agent, seed, repeat), name, agent, seed, repeat=repeat
        )
        done = Finished(
            ctx=self.context,
            runner=self._runner,
            result=result,
            episode=planned,
            status=result.status,
            error=result.error,
            started=self._started,
            duration=self._duration or 0.0,
            worker=WORKER,
        )
        tools = self._cache.tools if self._cache is not None else None
        self._record = build_record(done, tools=tools)
        return self._record

    def trajectory(self) -> list[dict[str, Any]]:
        """Every deployed environment's trajectory records in order (calls, messages,
        trigger firings, clock moves; see docs/trajectory.md), each with its `env_id`."""
        return self.record().trajectory

    def _driven(self, agent_name: str | None) -> str:
        if agent_name is not None:
            return agent_name
        driven = [d.name for d in self.context.agents.values() if d.agent is None]
        if not driven:
            raise LookupError("no agent of this episode was driven through the SDK")
        return driven[0]

    def messages(self, agent_name: str | None = None) -> list[dict[str, Any]]:
        """The chat an LLM playing `agent_name` (default: the first agent the caller
        drove) saw, as OpenAI chat messages: system, user prompt, assistant tool calls
        and tool results, the answers, further user turns (the sft-chat export's
        conversion). Empty if that agent was never prompted."""
        return chat_messages(self._conversation(agent_name)) if self._has(agent_name) else []

    def openai_tools(self, agent_name: str | None = None) -> list[dict[str, Any]]:
        """The tools that agent was offered, as OpenAI function tools."""
        return chat_tools(self._conversation(agent_name)) if self._has(agent_name) else []

    def _has(self, agent_name: str | None) -> bool:
        name = self._driven(agent_name)
        return any(p.agent_name == name for p in self.record().prompts)

    def _conversation(self, agent_name: str | None) -> Any:
        name = self._driven(agent_name)
        for conversation in conversations(self.record()):
            if conversation.agent_name == name:
                return conversation
        raise LookupError(f"agent {name!r} was not prompted in this episode")

    @property
    def usage(self) -> dict[str, int | float]:
        """Token counters summed over the episode (what every turn reported to `end()`,
        and what agents given in `agents=` count themselves)."""
        return usage_of(self.context)

    @property
    def usage_by_prompt(self) -> dict[str, list[dict[str, Any]]]:
        """Per prompt id, one entry per turn: `{"agent", "turn", "usage": {counters}}`."""
        return {k: [dict(e) for e in v] for k, v in self.context.usage.items()}

    def final_state(self) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """Each deployed environment's records, by env id then collection (its committed
        state now: after `result()`, the state the verifiers judged)."""
        return {env_id: d.snapshot().to_dict() for env_id, d in self.context.envs.items()}
