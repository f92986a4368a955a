"""Walks on the tool graph, executed through the gateway.

A *plan* is a sampled shape on the graph (which tools, in which order, and which edge
feeds which parameter): a `chain` (each call feeds the next), a `fan-out` (one call
feeds all the others) or a `fan-in` (several calls feed the last one). A *walk* is a
plan executed on a fork of a snapshot: each argument bound (see `binding`), each call
made as the agent through `Gateway.call`, each result and the state after it kept.

A walk is dropped (`Dropped`, with a reason code) when a call fails, returns nothing
(neither changes the state nor returns something informative), or repeats an earlier
one; a call is a *write* of the walk when it changed the state, else a *read*; a call gets a few
tries with fresh bindings first (the clock is set back after a failed try, so a retry
happens at the time a clean replay would make it). `replay` runs a walk's calls again
on a fresh fork, optionally with the clock moved, to check that the walk is
reproducible and to find the fields that depend on time.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Literal

from agentenv.env.tool import SYSTEM
from agentenv.state import Snapshot, canonical_json
from agentenv.synth.binding import Binder, BindError, Bound, Executed
from agentenv.synth.graph import Edge, ToolGraph
from agentenv.synth.runtime import Sandbox
from agentenv.synth.schema import Leaf, Param, informative, leaves

Topology = Literal["chain", "fan-in", "fan-out"]
TOPOLOGIES: tuple[Topology, ...] = ("chain", "fan-in", "fan-out")
ATTEMPTS = 3


class Dropped(Exception):
    """A candidate that cannot become a task; `reason` is a short code for reports."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


@dataclass
class PlannedStep:
    """One call of a plan: the tool, and which earlier step's field feeds which parameter."""

    tool: str
    feeds: dict[str, tuple[int, str]] = field(default_factory=dict)


@dataclass
class Plan:
    """A sampled walk shape."""

    topology: Topology
    steps: list[PlannedStep]


@dataclass
class WalkCall:
    """One executed call of a walk."""

    tool: str
    kind: str
    args: dict[str, Any]
    bounds: list[Bound]
    result: Any
    leaves: list[Leaf]
    after: Snapshot

    def solution_call(self) -> dict[str, Any]:
        """The call as a reference solution writes it."""
        return {"tool": self.tool, "args": self.args}


@dataclass
class Walk:
    """An executed plan: the start snapshot and the calls, each with its outcome."""

    plan: Plan
    start: Snapshot
    calls: list[WalkCall]
    retries: int = 0

    @property
    def final(self) -> Snapshot:
        """The state after the last call."""
        return self.calls[-1].after

    def signature(self) -> str:
        """The calls as canonical JSON: equal walks have equal signatures."""
        return canonical_json([c.solution_call() for c in self.calls])

    def consumed(self) -> set[int]:
        """The steps whose results later calls took arguments from."""
        return {
            b.step
            for c in self.calls
            for b in c.bounds
            if b.source == "upstream" and b.step is not None
        }


def _weighted(edges: list[Edge], rng: random.Random) -> Edge:
    weights = [3 if e.strength == "strong" else 1 for e in edges]
    return rng.choices(edges, weights=weights, k=1)[0]


def sample_plan(graph: ToolGraph, rng: random.Random, depth: int, topology: Topology) -> Plan:
    """A plan of `depth` calls in the given shape; Dropped("no_walk") when the graph
    has none from the sampled start."""
    tools = sorted(graph.nodes)
    if not tools:
        raise Dropped("no_walk", "the role may call no tool")
    if depth == 1:
        return Plan(topology, [PlannedStep(rng.choice(tools))])
    if topology == "chain":
        starts = [t for t in tools if graph.out_edges(t)]
        if not starts:
            raise Dropped("no_walk", "the graph has no edges")
        steps = [PlannedStep(rng.choice(starts))]
        for i in range(1, depth):
            edges = graph.out_edges(steps[-1].tool)
            if not edges:
                raise Dropped("no_walk", f"{steps[-1].tool} feeds no tool")
            e = _weighted(edges, rng)
            steps.append(PlannedStep(e.target, {e.param: (i - 1, e.field)}))
        return Plan(topology, steps)
    if topology == "fan-out":
        roots = [t for t in tools if graph.out_edges(t)]
        if not roots:
            raise Dropped("no_walk", "the graph has no edges")
        root = rng.choice(roots)
        pool = list(graph.out_edges(root))
        steps = [PlannedStep(root)]
        for _ in range(depth - 1):
            fresh = [
                e for e in pool if all(s.tool != e.target or e.param not in s.feeds for s in steps)
            ]
            e = _weighted(fresh or pool, rng)
            steps.append(PlannedStep(e.target, {e.param: (0, e.field)}))
        return Plan(topology, steps)
    consumers = [t for t in tools if len({e.param for e in graph.in_edges(t)}) >= depth - 1]
    if not consumers:
        inputs = f"{depth - 1} input{'s' if depth > 2 else ''}"
        raise Dropped("no_walk", f"no tool takes {inputs} from other tools")
    consumer = rng.choice(consumers)
    by_param: dict[str, list[Edge]] = {}
    for e in graph.in_edges(consumer):
        by_param.setdefault(e.param, []).append(e)
    chosen = [_weighted(by_param[p], rng) for p in rng.sample(sorted(by_param), depth - 1)]
    steps = [PlannedStep(e.source) for e in chosen]
    steps.append(PlannedStep(consumer, {e.param: (i, e.field) for i, e in enumerate(chosen)}))
    return Plan(topology, steps)


class Walker:
    """Executes plans and replays walks for one environment and role."""

    def __init__(self, sandbox: Sandbox, binder: Binder, params: dict[str, list[Param]]) -> None:
        self.sandbox = sandbox
        self.binder = binder
        self.params = params

    async def execute(
        self,
        plan: Plan,
        start: Snapshot,
        rng: random.Random,
        *,
        reuse: list[list[Bound]] | None = None,
    ) -> Walk:
        """Run a plan on a fork of `start`. With `reuse` (the bindings of an earlier
        run), given values are kept and upstream values re-read from this run's results."""
        sandbox = self.sandbox
        env = sandbox.env
        instance = await sandbox.open(start)
        try:
            inst = sandbox.gateway.instance(instance)
            state = inst.state
            history: list[Executed] = []
            calls: list[WalkCall] = []
            seen: set[str] = set()
            retries = 0
            for i, step in enumerate(plan.steps):
                tool = env.tools[step.tool]
                params = self.params[step.tool]
                problem: tuple[str, str] = ("call_failed", "")
                done = None
                for attempt in range(ATTEMPTS if reuse is None else 1):
                    try:
                        if reuse is None:  # a retry leaves out optional filters
                            args, bounds = self.binder.bind(
                                tool, params, step.feeds, history, state, rng, optional=attempt == 0
                            )
                        else:
                            args, bounds = self._rebind(reuse[i], params, history, rng)
                    except BindError as exc:
                        problem = ("unbound_argument", str(exc))
                        continue
                    signature = canonical_json([step.tool, args])
                    if signature in seen:
                        problem = ("repeated_call", step.tool)
                        continue
                    before, clock = state.hash(), inst.clock.now()
                    result = await sandbox.call(instance, step.tool, args)
                    if not result.ok:
                        problem = ("call_failed", f"{step.tool}: {result.text}")
                        if clock is not None:  # a failed call still took time: undo that
                            await sandbox.gateway.set_clock(SYSTEM, clock, instance=instance)
                        retries += 1
                        continue
                    wrote = state.hash() != before
                    if wrote or informative(result.value):
                        done = (args, bounds, result.value, signature, wrote)
                        break
                    problem = ("noop_write" if tool.kind == "write" else "empty_result", step.tool)
                    if clock is not None:
                        await sandbox.gateway.set_clock(SYSTEM, clock, instance=instance)
                    retries += 1
                if done is None:
                    raise Dropped(*problem)
                args, bounds, value, signature, wrote = done
                seen.add(signature)
                found = leaves(value, state)
                history.append(Executed(step.tool, args, value, found))
                kind = "write" if wrote else "read"  # what the call did, not what it may do
                calls.append(
                    WalkCall(step.tool, kind, args, bounds, value, found, state.snapshot())
                )
            return Walk(plan, start, calls, retries)
        finally:
            sandbox.close(instance)

    def _rebind(
        self,
        previous: list[Bound],
        params: list[Param],
        history: list[Executed],
        rng: random.Random,
    ) -> tuple[dict[str, Any], list[Bound]]:
        by_name = {p.name: p for p in params}
        args: dict[str, Any] = {}
        bounds: list[Bound] = []
        for b in previous:
            if b.source == "upstream" and b.step is not None:
                found = self.binder.upstream(
                    by_name[b.param], history, rng, step=b.step, path=b.path, prefer=b.value
                )
                if found is None:
                    raise BindError(f"step {b.step + 1} no longer gives {b.path!r}")
            else:
                found = Bound(**{**b.__dict__})
            args[b.param] = found.value
            bounds.append(found)
        return args, bounds

    async def replay(
        self, calls: list[dict[str, Any]], start: Snapshot, shift: timedelta | None = None
    ) -> list[tuple[bool, Any, Snapshot]]:
        """Make the calls again on a fresh fork of `start` (the clock moved by `shift`):
        each call's success, result and state after it."""
        sandbox = self.sandbox
        instance = await sandbox.open(start, shift)
        try:
            out = []
            for call in calls:
                result = await sandbox.call(instance, call["tool"], call["args"])
                out.append((result.ok, result.value, sandbox.snapshot(instance)))
            return out
        finally:
            sandbox.close(instance)


def agrees(walk: Walk, replayed: list[tuple[bool, Any, Snapshot]]) -> bool:
    """Whether a replay made every call succeed with the same results and states."""
    if len(replayed) != len(walk.calls):
        return False
    for call, (ok, value, after) in zip(walk.calls, replayed, strict=True):
        if not ok or canonical_json(value) != canonical_json(call.result):
            return False
        if after.hash() != call.after.hash():
            return False
    return True
