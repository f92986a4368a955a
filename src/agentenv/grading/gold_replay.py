"""Gold replay: replay a reference solution on a fork and compare final states.

tau-bench's database reward: the agent did the right thing when the state it left is
exactly the state the reference solution leaves, from the same start. The replay runs
on fresh gateway instances forked from the initial snapshots (so RBAC, validation and
triggers apply as they did to the agent), calls the reference tools in order as the
agent's principal, compares canonical state hashes, and drops the instances. When the
states differ the score's details carry a readable diff (expected -> actual).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentenv.env.tool import SYSTEM, Principal
from agentenv.gateway.client import Binding, ToolClient
from agentenv.gateway.clock import ClockMode
from agentenv.gateway.gateway import Gateway
from agentenv.grading.checklist import VerifierError
from agentenv.grading.score import Score
from agentenv.spec.task import SolutionCall
from agentenv.state import Snapshot, State, StateView, diff

MAX_DIFF_LINES = 100
DIFF_HEADER = "expected -> actual (- missing, + unexpected, ~ changed):"
REPLAY_SESSION = "gold-replay"


@dataclass
class ReplayEnv:
    """One environment of a replay: where to fork from, and what the agent left.

    `clock_at` (with `clock_mode` and `clock_rate`) arms the fork's clock at that time,
    so tools that stamp times see what the agent's calls saw.
    """

    gateway: Gateway
    initial: Snapshot
    actual: State | Snapshot | None = None
    clock_at: datetime | None = None
    clock_mode: ClockMode | None = None
    clock_rate: float | None = None


@dataclass
class ReplayOutcome:
    """What a replay produced: each environment's final snapshot and each call's result."""

    finals: dict[str, Snapshot]
    results: list[dict[str, Any]]

    @property
    def failed_calls(self) -> list[dict[str, Any]]:
        """The reference calls that did not succeed (a sign of a stale reference)."""
        return [r for r in self.results if not r["ok"]]


def _calls(calls: Iterable[SolutionCall | Mapping[str, Any]]) -> list[SolutionCall]:
    out = []
    for i, call in enumerate(calls):
        if isinstance(call, SolutionCall):
            out.append(call)
        elif isinstance(call, Mapping):
            try:
                out.append(SolutionCall.model_validate(dict(call)))
            except ValueError as exc:
                raise VerifierError(f"reference call {i}: {exc}") from None
        else:
            tool = getattr(call, "tool", None)
            if not isinstance(tool, str):
                raise VerifierError(f"reference call {i}: expected {{tool, args}}, got {call!r}")
            out.append(
                SolutionCall(
                    tool=tool,
                    args=dict(getattr(call, "args", None) or {}),
                    env_id=getattr(call, "env_id", None),
                )
            )
    return out


async def replay(
    envs: Mapping[str, ReplayEnv],
    calls: Iterable[SolutionCall | Mapping[str, Any]],
    *,
    principal: Principal,
    session: str = REPLAY_SESSION,
) -> ReplayOutcome:
    """Replay `calls` on forks of `envs` as `principal`, routed like an agent's tool
    client (with several environments, `env_id` on a call or an `<env_id>__tool` name);
    the forks are dropped afterwards."""
    if not envs:
        raise VerifierError("gold replay: no environment to replay on")
    parsed = _calls(calls)
    created: list[tuple[Gateway, str]] = []
    try:
        bindings = []
        for env_id, target in envs.items():
            inst = target.gateway.create_instance(state=target.initial)
            created.append((target.gateway, inst.id))
            if target.clock_at is not None:
                await target.gateway.set_clock(
                    SYSTEM, target.clock_at, target.clock_rate, target.clock_mode, instance=inst.id
                )
            bindings.append(Binding(env_id, target.gateway, inst.id))
        client = ToolClient(principal, bindings, session=session)
        results = []
        for i, call in enumerate(parsed):
            result = await client.call(call.tool, call.args, env_id=call.env_id)
            entry: dict[str, Any] = {"index": i, "tool": call.tool, "ok": result.ok}
            if result.error is not None:
                entry["error"] = result.error.message
            results.append(entry)
        finals = {b.env_id: b.gateway.instance(b.instance).state.snapshot() for b in bindings}
        return ReplayOutcome(finals=finals, results=results)
    finally:
        for gateway, instance_id in created:
            if instance_id in gateway.instances:
                gateway.drop_instance(instance_id)


def compare_states(
    expected: State | Snapshot, actual: State | Snapshot, *, max_lines: int = MAX_DIFF_LINES
) -> dict[str, Any]:
    """Hashes of both states, whether they match and, when not, the diff
    (expected -> actual) as readable lines."""
    expected_hash, actual_hash = expected.hash(), actual.hash()
    out: dict[str, Any] = {
        "match": expected_hash == actual_hash,
        "expected_hash": expected_hash,
        "actual_hash": actual_hash,
    }
    if not out["match"]:
        lines = diff(expected, actual).summary().splitlines()
        if len(lines) > max_lines:
            lines = [*lines[:max_lines], f"... and {len(lines) - max_lines} more"]
        out["diff"] = "\n".join(lines)
    return out


async def gold_replay_envs(
    envs: Mapping[str, ReplayEnv],
    calls: Iterable[SolutionCall | Mapping[str, Any]],
    *,
    principal: Principal,
    compare: Sequence[str] | None = None,
) -> Score:
    """Replay the reference on forks of several environments and compare the ones named
    in `compare` (default: every one with an `actual`) with what the agent left.

    Score 1 when every compared state hash matches, else 0; details carry, per
    environment, the hashes and a readable diff (expected -> actual), and the reference
    calls that failed on replay.
    """
    names = (
        list(compare)
        if compare is not None
        else [k for k, v in envs.items() if v.actual is not None]
    )
    if not names:
        raise VerifierError("gold replay: nothing to compare (give an actual state)")
    for name in names:
        if name not in envs:
            raise VerifierError(f"gold replay: no environment {name!r} ({', '.join(envs)})")
        if envs[name].actual is None:
            raise VerifierError(f"gold replay: no actual state for {name!r}")
    outcome = await replay(envs, calls, principal=principal)
    per_env = {}
    for name in names:
        actual = envs[name].actual
        assert actual is not None
        per_env[name] = compare_states(outcome.finals[name], actual)
    match = all(v["match"] for v in per_env.values())
    details: dict[str, Any] = {
        "kind": "gold_replay",
        "match": match,
        "calls": len(outcome.results),
        "envs": per_env,
    }
    if outcome.failed_calls:
        details["failed_reference_calls"] = outcome.failed_calls
    if not match:
        details["diff"] = "\n".join(
            f"[{name}] {DIFF_HEADER}\n{v['diff']}" for name, v in per_env.items() if not v["match"]
        )
    return Score(score=1.0 if match else 0.0, passed=match, details=details)


async def gold_replay(
    gateway: Gateway,
    initial: Snapshot,
    calls: Iterable[SolutionCall | Mapping[str, Any]],
    actual: State | Snapshot | StateView,
    *,
    principal: Principal | str = "agent",
    clock_at: datetime | None = None,
) -> Score:
    """Replay the reference `calls` on a fork of `initial` (one environment; calls'
    `env_id`s are ignored) and compare the result with `actual`.

    `principal` is who calls (a role name or a Principal): the agent's role, so its
    access rules apply to the reference too.
    """
    if isinstance(actual, StateView):
        raise VerifierError("gold replay compares whole states, not a composed child's view")
    who = Principal(role=principal) if isinstance(principal, str) else principal
    stripped = [c.model_copy(update={"env_id": None}) for c in _calls(calls)]
    env = ReplayEnv(gateway=gateway, initial=initial, actual=actual, clock_at=clock_at)
    score = await gold_replay_envs({"env": env}, stripped, principal=who)
    if "diff" in score.details:
        score.details["diff"] = f"{DIFF_HEADER}\n" + score.details["envs"]["env"]["diff"]
    return score
