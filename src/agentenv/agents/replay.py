"""The replay agent: calls the tools of a recorded trajectory again, in order.

`replay:FILE` reads trajectory JSONL: what `GET /trajectory` serves (upstream's events, or
our records with `?format=records`), or a run folder's `trajectory.jsonl` (our records,
each with its `env_id`). A `tool_call` event counts as a call record, its outcome event
(`tool_call_result` or `tool_call_failed`) saying how it went. Which records it replays:

- only `kind: "call"` records (trigger firings and control records are the environment's
  doing, not the agent's), and not those of the `system` role (a task's setup and checks);
  `role=NAME` keeps only that role's calls;
- denied and failed calls too, by default: they are part of what the agent did, and
  replaying them gives the same trajectory (same denials, same errors) when the documents
  are the same. `denied=skip` leaves denied calls out;
- per prompt: the calls recorded under the prompt's session (`prompt_agent` records a
  prompt's calls with `session = prompt_id`) when the file has any; otherwise every
  selected call this agent has not replayed yet, in file order. So a file without
  sessions (an agent recorded over REST) is replayed whole on the first prompt.

Each call goes through `turn.tools` (the deployed agent's role, RBAC and all). With a run
folder's `env_id` the call is routed to that environment when the agent reaches it. The
answer is `response` with `{n}` replaced by the number of calls replayed (default
"Replayed {n} calls."). Where a replayed call's outcome differs from the recorded one
(ok vs failed, or another result) it is listed in `agent.divergences`; `strict=true`
makes the first divergence an AgentError.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from agentenv.agents.base import AgentError, AgentTurn
from agentenv.gateway.results import CallResult

DEFAULT_RESPONSE = "Replayed {n} calls."
SYSTEM_ROLE = "system"


@dataclass(frozen=True)
class RecordedCall:
    """One tool call read from a trajectory file."""

    line: int
    tool: str
    args: dict[str, Any]
    role: str | None = None
    session: str | None = None
    env_id: str | None = None
    denied: bool = False
    ok: bool = True
    result: Any = None


@dataclass(frozen=True)
class Divergence:
    """A replayed call whose outcome differs from the recorded one."""

    line: int
    tool: str
    recorded_ok: bool
    replayed_ok: bool
    detail: str


def read_calls(path: Path) -> list[RecordedCall]:
    """The `kind: "call"` records of a trajectory JSONL file, in order."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AgentError(f"cannot read trajectory {str(path)!r}: {exc.strerror or exc}") from None
    calls = []
    outcomes = _outcomes(text)
    # "\n" only: str.splitlines also splits at U+2028 and kin, kept raw in JSON strings
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise AgentError(f"{where}: not a JSON record ({exc.msg})") from None
        if not isinstance(row, dict):
            raise AgentError(f"{where}: expected a JSON object, got {type(row).__name__}")
        if "event_type" in row:
            row = _event_as_record(row, outcomes, where)
            if row is None:
                continue
        if row.get("kind", "call") != "call":
            continue
        tool = row.get("tool")
        if not isinstance(tool, str) or not tool:
            raise AgentError(f"{where}: a call record needs a 'tool' name")
        args = row.get("args") or {}
        if not isinstance(args, dict):
            raise AgentError(f"{where}: 'args' must be an object")
        calls.append(
            RecordedCall(
                line=number,
                tool=tool,
                args=args,
                role=row.get("role"),
                session=row.get("session"),
                env_id=row.get("env_id"),
                denied=bool(row.get("denied", False)),
                ok=row.get("error") is None and not row.get("denied", False),
                result=row.get("result"),
            )
        )
    return calls


def _outcomes(text: str) -> dict[str, dict[str, Any]]:
    """The outcome events of a file of upstream events, by the id of their `tool_call`."""
    found: dict[str, dict[str, Any]] = {}
    for line in text.split("\n"):
        if '"tool_call_event_id"' not in line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # reported with its line number by the main pass
        if isinstance(event, dict) and isinstance(event.get("tool_call_event_id"), str):
            found[event["tool_call_event_id"]] = event
    return found


def _event_as_record(
    event: dict[str, Any], outcomes: dict[str, dict[str, Any]], where: str
) -> dict[str, Any] | None:
    """A `tool_call` event (with its outcome) as a call record; None for other events."""
    if event.get("event_type") != "tool_call":
        return None
    call = event.get("tool_call")
    if not isinstance(call, dict):
        raise AgentError(f"{where}: a tool_call event needs a 'tool_call' object")
    outcome = outcomes.get(str(event.get("event_id")), {})
    failed = outcome.get("event_type") == "tool_call_failed"
    result = outcome.get("tool_call_result") or {}
    error = failed or bool(result.get("isError"))
    structured = result.get("structuredContent")
    if isinstance(structured, dict) and set(structured) == {"result"}:
        structured = structured["result"]  # a non-object result, wrapped for MCP
    return {
        "kind": "call",
        "tool": call.get("function_name"),
        "args": call.get("arguments"),
        "role": event.get("role"),
        "session": event.get("session"),
        "denied": bool(outcome.get("denied", False)),
        "error": {"kind": outcome.get("error_kind", "tool_error")} if error else None,
        "result": None if error else structured,
    }


def _json_equal(recorded: Any, value: Any) -> bool:
    try:
        return json.loads(json.dumps(value, default=str)) == recorded
    except (TypeError, ValueError):
        return False


class ReplayAgent:
    """Replays recorded tool calls (see the module docstring for which, and why)."""

    name = "replay"

    def __init__(
        self,
        calls: list[RecordedCall],
        *,
        response: str = DEFAULT_RESPONSE,
        role: str | None = None,
        skip_denied: bool = False,
        strict: bool = False,
        source: str | None = None,
    ) -> None:
        self.source = source
        self.response = response
        self.strict = strict
        self.calls = [
            c
            for c in calls
            if (c.role == role if role is not None else c.role != SYSTEM_ROLE)
            and not (skip_denied and c.denied)
        ]
        self._done: set[int] = set()
        self.divergences: list[Divergence] = []
        """Replayed calls whose outcome differs from the recording."""

    @classmethod
    def from_file(cls, path: str | Path, **options: Any) -> ReplayAgent:
        """A replay agent for a trajectory file."""
        path = Path(path)
        return cls(read_calls(path), source=str(path), **options)

    @classmethod
    def from_spec(cls, argument: str) -> ReplayAgent:
        """The agent of a spec's argument: `FILE` or `FILE?option=value&...`.

        Options: `response` (text, `{n}` = calls replayed), `role` (replay only this
        role's calls), `denied=skip`, `strict=true`. A FILE that exists as written is
        taken whole, even if it contains `?`.
        """
        if not argument:
            raise AgentError("the replay agent needs a trajectory file: replay:FILE")
        path, query = argument, ""
        if not Path(argument).exists() and "?" in argument:
            path, _, query = argument.rpartition("?")
        options: dict[str, Any] = {}
        for name, value in parse_qsl(query, keep_blank_values=True):
            if name == "response":
                options["response"] = value
            elif name == "role":
                options["role"] = value or None
            elif name == "denied" and value in ("skip", "replay"):
                options["skip_denied"] = value == "skip"
            elif name == "strict" and value.lower() in ("true", "false", "1", "0"):
                options["strict"] = value.lower() in ("true", "1")
            else:
                raise AgentError(
                    f"bad replay option {name}={value!r} (known: response=TEXT, role=NAME, "
                    "denied=skip|replay, strict=true|false)"
                )
        return cls.from_file(path, **options)

    def select(self, turn: AgentTurn) -> list[int]:
        """Indexes (into `self.calls`) of the calls to replay for this prompt."""
        mine = [i for i, c in enumerate(self.calls) if c.session == turn.prompt_id]
        if mine:
            return [i for i in mine if i not in self._done]
        return [i for i in range(len(self.calls)) if i not in self._done]

    async def run_turn(self, turn: AgentTurn) -> str:
        """Replay this prompt's calls, then answer the configured response."""
        chosen = self.select(turn)
        self._done.update(chosen)  # claimed before the awaits: a concurrent prompt skips them
        reachable = set(turn.tools.env_ids)
        for index in chosen:
            call = self.calls[index]
            env_id = call.env_id if call.env_id in reachable else None
            result = await turn.tools.call(call.tool, call.args, env_id=env_id)
            self._compare(call, result)
        return self.response.replace("{n}", str(len(chosen)))

    def _compare(self, call: RecordedCall, result: CallResult) -> None:
        if call.ok != result.ok:
            was = "succeeded" if call.ok else "failed"
            detail = f"recorded call {was}, replay {'succeeded' if result.ok else 'failed'}"
            if not result.ok:
                detail += f": {result.text}"
        elif call.ok and not _json_equal(call.result, result.value):
            detail = "a different result"
        else:
            return
        divergence = Divergence(call.line, call.tool, call.ok, result.ok, detail)
        self.divergences.append(divergence)
        if self.strict:
            where = f"{self.source}:{call.line}" if self.source else f"line {call.line}"
            raise AgentError(f"replay diverged at {where} ({call.tool}): {detail}")
