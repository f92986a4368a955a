"""Building an episode's record from what its task run left, and its one JSON line.

Two ways to the same line. `build_record` makes the EpisodeRecord (what `run_episode`
returns, and what the store's `record_json` serialises). `record_line` is the runners' fast
path: it serialises the record without its tool lists and trajectory, which are most of
a record, and splices them in: the trajectory as the gateway's own JSON lines (no dict is
made per trajectory record, nothing is validated twice), each tool as JSON made once. The line it gives
parses to exactly what `build_record` + `record_json` give (tests prove it over many
episodes); whenever the fast path cannot make its line (anything at all raises), the slow
path runs instead, so every error stand-in and message is the slow path's own.

The tool lists a record keeps (`tools`) are computed per episode, since a task may change
a role's tool access while it runs, but each tool's JSON form is made once per process
(`ToolDumps`): nothing in agentenv changes a loaded environment's Tool (`with_options`
makes a new one), and its description and schema are most of the bytes. A ToolDumps lives
as long as the runner that made it, and keeps the tools it has dumped alive.
"""

from __future__ import annotations

import dataclasses
import io
import re
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import to_json

from agentenv.env.tool import Principal, Tool
from agentenv.rollout.plan import PlannedEpisode
from agentenv.rollout.store import EpisodeRecord, PromptEntry, record_json
from agentenv.spec.task import fill_placeholders
from agentenv.state import SEPARATOR
from agentenv.tasks.context import TaskContext
from agentenv.tasks.runner import TaskRunner

_STR = TypeAdapter(str)
_KIND = re.compile(rb'\{"seq":\d+,"kind":"(\w+)"')
_SPLICE = b'"tools":{},"trajectory":[],"worker":'
"""Where the tools and trajectory go in a record's line: its last fields are `tools`,
`trajectory`, then `worker` and `format` (scalars), so the last occurrence of this is the
fields themselves."""


def trajectory_rows(ctx: TaskContext) -> list[dict[str, Any]]:
    """Every deployed env's trajectory records as JSON data, with `env_id` added (what an
    episode record's `trajectory` holds)."""
    rows = []
    for env_id, deployed in ctx.envs.items():
        for record in deployed.gateway.instance(deployed.instance).trajectory:
            rows.append({"env_id": env_id, **record.to_json()})
    return rows


def now() -> datetime:
    """The wall clock, as records keep it."""
    return datetime.now(UTC)


# -- tool lists ---------------------------------------------------------------------------


class ToolDumps:
    """Each tool's JSON form (`ToolInfo` dumped by alias, without empty fields), made once
    per Tool object and shared by every episode's record that lists it."""

    def __init__(self) -> None:
        self._dumps: dict[int, tuple[Tool, dict[str, Any]]] = {}
        self._bytes: dict[tuple[int, str | None], tuple[Tool, bytes]] = {}

    def dump(self, tool: Tool) -> dict[str, Any]:
        """`tool.info()` as JSON data (the same dict each time: never change it)."""
        found = self._dumps.get(id(tool))
        if found is None or found[0] is not tool:  # the tool kept alive: its id stays its own
            found = (tool, tool.info().model_dump(mode="json", by_alias=True, exclude_none=True))
            self._dumps[id(tool)] = found
        return found[1]

    def tools_of(self, ctx: TaskContext) -> dict[str, list[dict[str, Any]]]:
        """Per deployed agent, the tools it may call now, named as its client names them
        (what `ToolClient.list_tools` gives, dumped)."""
        return {name: [d for _, d, _ in listed] for name, listed in self._listed(ctx).items()}

    def tools_json(self, ctx: TaskContext) -> bytes:
        """`tools_of(ctx)` as JSON, from each tool's JSON made once."""
        parts = []
        for name, listed in self._listed(ctx).items():
            tools = b",".join(self._json(tool, dumped, renamed) for tool, dumped, renamed in listed)
            parts.append(_STR.dump_json(name) + b":[" + tools + b"]")
        return b"{" + b",".join(parts) + b"}"

    def _json(self, tool: Tool, dumped: dict[str, Any], renamed: bool) -> bytes:
        key = (id(tool), dumped["name"] if renamed else None)
        found = self._bytes.get(key)
        if found is None or found[0] is not tool:
            found = self._bytes[key] = (tool, to_json(dumped))
        return found[1]

    def _listed(self, ctx: TaskContext) -> dict[str, list[tuple[Tool, dict[str, Any], bool]]]:
        out: dict[str, list[tuple[Tool, dict[str, Any], bool]]] = {}
        for deployed in ctx.agents.values():
            try:
                principal = Principal(role=deployed.role, name=deployed.name)
                envs = [ctx.env(e) for e in deployed.env_ids]
                if not envs:
                    raise ValueError("a tool client needs at least one environment")
                single = len(set(deployed.env_ids)) == 1
                listed: list[tuple[Tool, dict[str, Any], bool]] = []
                for env in {e.env_id: e for e in envs}.values():
                    for tool in env.gateway.tools_for(principal, env.instance):
                        dumped = self.dump(tool)
                        if not single:
                            dumped = {**dumped, "name": f"{env.env_id}{SEPARATOR}{tool.name}"}
                        listed.append((tool, dumped, not single))
                out[deployed.name] = listed
            except Exception:  # a half-deployed episode: no tool list, the record still stands
                continue
        return out


def tools_slow(ctx: TaskContext) -> dict[str, list[dict[str, Any]]]:
    """The tool lists through each agent's ToolClient, dumped one by one (what
    `ToolDumps.tools_of` must equal)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for deployed in ctx.agents.values():
        try:
            client = ctx.tool_client(
                Principal(role=deployed.role, name=deployed.name), deployed.env_ids
            )
            out[deployed.name] = [
                t.model_dump(mode="json", by_alias=True, exclude_none=True)
                for t in client.list_tools()
            ]
        except Exception:
            continue
    return out


# -- the record ---------------------------------------------------------------------------


@dataclasses.dataclass
class Finished:
    """What a task run left for its record."""

    ctx: TaskContext
    runner: TaskRunner | None
    result: Any
    episode: PlannedEpisode
    status: str
    error: str | None
    started: datetime
    duration: float
    worker: str


def build_record(
    done: Finished,
    *,
    record_tools: bool = True,
    tools: ToolDumps | None = None,
    calls: int | None = None,
) -> EpisodeRecord:
    """The record of a finished episode: its result, steps, prompts, tools, trajectory
    (left empty when `calls` is given: `record_line` splices it in)."""
    ctx, runner, result, episode = done.ctx, done.runner, done.result, done.episode
    if result is not None:
        passed, score = result.passed, result.score
        scores = dict(result.scores)
        steps = [s.model_dump(mode="json") for s in result.steps]
        warnings = list(result.warnings)
    else:
        passed, score, scores, warnings = False, None, dict(ctx.scores), []
        steps = [r.model_dump(mode="json") for r in runner.records.values()] if runner else []
    rows: list[dict[str, Any]] = []
    if calls is None:
        rows = trajectory_rows(ctx)
        calls = sum(1 for r in rows if r["kind"] == "call")
    listed: dict[str, list[dict[str, Any]]] = {}
    if record_tools:
        listed = tools.tools_of(ctx) if tools is not None else tools_slow(ctx)
    return EpisodeRecord(
        episode_id=episode.id,
        status=done.status,  # type: ignore[arg-type]
        task=episode.task,
        agent=episode.agent,
        seed=episode.seed,
        repeat=episode.repeat,
        passed=passed,
        score=score,
        scores=scores,
        error=done.error,
        started_at=done.started,
        ended_at=now(),
        duration_s=done.duration,
        calls=calls,
        usage=usage_of(ctx),
        usage_by_prompt=dict(getattr(ctx, "usage", None) or {}),
        steps=steps,
        warnings=warnings,
        prompts=prompts_of(ctx),
        tools=listed,
        trajectory=rows,
        worker=done.worker,
    )


def trajectory_json(ctx: TaskContext) -> tuple[bytes, int]:
    """The `trajectory` field's value as JSON (every deployed env's records, as the
    trajectory writes them as JSON lines, with the `env_id` put first: what
    `trajectory_rows` gives, serialised), and how many of them are calls."""
    parts: list[bytes] = []
    calls = 0
    for env_id, deployed in ctx.envs.items():
        head = b'{"env_id":' + _STR.dump_json(env_id) + b","
        out = io.BytesIO()
        deployed.gateway.instance(deployed.instance).trajectory.write_jsonl(out)
        for line in out.getvalue().splitlines():
            kind = _KIND.match(line)
            if kind is None:
                raise ValueError("a trajectory line that does not begin with its seq and kind")
            calls += kind.group(1) == b"call"
            parts.append(head + line[1:])
    return b"[" + b",".join(parts) + b"]", calls


def record_line(
    done: Finished, *, record_tools: bool = True, tools: ToolDumps | None = None
) -> tuple[str, str]:
    """(status written, the record's JSON line): the fast path described above, else the
    slow one (`build_record` + `record_json`, which writes an error stand-in for a record
    that cannot be serialised). Raises what `build_record` raises."""
    try:
        rows, calls = trajectory_json(done.ctx)
        listed = b"{}"
        if record_tools:
            listed = (tools or ToolDumps()).tools_json(done.ctx)
        head = build_record(done, record_tools=False, calls=calls)
        line = head.model_dump_json().encode()
        at = line.rfind(_SPLICE)
        if at < 0:
            raise ValueError("no tools and trajectory fields in the record's line")
        whole = b"".join(
            (
                line[:at],
                b'"tools":',
                listed,
                b',"trajectory":',
                rows,
                line[at + len(_SPLICE) - 10 :],
            )
        )
        return head.status, whole.decode()
    except Exception:  # whatever it was, the slow path says it as it always has
        record = build_record(done, record_tools=record_tools, tools=tools)
        text, written = record_json(record)
        return written.status, text


def usage_of(ctx: TaskContext) -> dict[str, int | float]:
    """Token counters summed over the episode: from what `prompt_agent` recorded per turn
    (`ctx.usage`), else from each agent's own `usage` (a mapping or a dataclass)."""
    total: dict[str, int | float] = {}

    def add(counters: Any) -> None:
        if dataclasses.is_dataclass(counters) and not isinstance(counters, type):
            counters = dataclasses.asdict(counters)
        if not isinstance(counters, dict):
            return
        for key, value in counters.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                total[key] = total.get(key, 0) + value

    turns = getattr(ctx, "usage", None) or {}
    if turns:
        for entries in turns.values():
            for entry in entries:
                add(entry.get("usage") if isinstance(entry, dict) else None)
        return total
    seen: set[int] = set()
    for deployed in ctx.agents.values():
        agent = deployed.agent
        if agent is not None and id(agent) not in seen:
            seen.add(id(agent))
            add(getattr(agent, "usage", None))
    return total


def prompts_of(ctx: TaskContext) -> list[PromptEntry]:
    """The prompts of the episode, with the step fields that shaped each."""
    if not ctx.prompts:
        return []
    values = {**ctx.task.seed, **ctx.seed}
    params: dict[str, dict[str, Any]] = {}
    for step in ctx.task.steps:
        if step.type == "prompt_agent":
            filled = fill_placeholders(step.params, values)
            params[str(filled.get("prompt_id") or step.id)] = filled
    out = []
    for record in ctx.prompts.values():
        deployed = ctx.agents.get(record.agent_name)
        step = params.get(record.prompt_id, {})
        out.append(
            PromptEntry(
                prompt_id=record.prompt_id,
                agent_name=record.agent_name,
                role=deployed.role if deployed else None,
                env_ids=list(record.start_seq),
                system_prompt=step.get("system_prompt")
                or (deployed.system_prompt if deployed else None),
                prompt=record.prompt,
                response=record.response,
                error=record.error,
                model=step.get("model"),
                started_at=record.started,
                ended_at=record.ended,
                start_seq=record.start_seq,
                end_seq=record.end_seq,
                messages=list(getattr(record, "messages", [])),
            )
        )
    return out
