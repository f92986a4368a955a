"""Task synthesis by graph expansion with executable verification.

For each candidate (numbered from 0; candidate `i` draws from `random.Random(f"{seed}:{i}")`,
so a seed gives the same candidates in any order and any process):

1. sample a depth and a topology (the knobs), then a plan on the tool graph;
2. execute it through the gateway on a fork of the seed (`walks`); with distractors,
   add near-duplicates of the records it used and execute it again on that start;
3. replay it on a fresh fork (it must agree, call by call and hash by hash) and once
   more with the clock moved (what changes is time-dependent);
4. write the verifiers first (state checklist, gold replay, required facts), then the
   text (obfuscated references, templates), then the reference answer;
5. run the trials (`verify.run_trials` on replayed states; with `trials="full"` also the
   document itself through the task runner, `trials.full_trials`).

A candidate that fails any of these is dropped and counted by reason; duplicates (the
same reference calls) are dropped too. The surviving walk is the reference solution.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import yaml

from agentenv.env.environment import Environment
from agentenv.env.tool import SYSTEM
from agentenv.spec.task import TaskSpec
from agentenv.spec.wire import DataPart
from agentenv.state import Snapshot
from agentenv.synth import templates
from agentenv.synth.binding import Binder, Resolver
from agentenv.synth.dataset import (
    DEFAULT_RATIOS,
    GENERATOR,
    ancestry,
    assign_split,
    dump_yaml,
    env_hash,
    task_document,
)
from agentenv.synth.diagnosis import cause_of
from agentenv.synth.graph import ToolGraph, build_graph
from agentenv.synth.knobs import Knobs, choose_obfuscations, make_distractors
from agentenv.synth.runtime import SHIFT, Sandbox
from agentenv.synth.schema import tool_params
from agentenv.synth.trials import full_trials
from agentenv.synth.verify import (
    Verifier,
    reference_response,
    required_facts,
    run_trials,
    state_checks,
)
from agentenv.synth.walks import Dropped, Walk, Walker, agrees, sample_plan

Trials = Literal["direct", "full"]
CANDIDATES_PER_TASK = 40
"""Default cap on candidates: `n` times this many, then the run stops with what it has."""


@dataclass
class SynthConfig:
    """What a synthesis run makes."""

    n: int = 100
    knobs: Knobs = field(default_factory=Knobs)
    seed: int = 0
    role: str | None = None
    trials: Trials = "full"
    max_candidates: int | None = None
    ratios: tuple[float, float, float] = DEFAULT_RATIOS
    probes: int = 3
    gold_replay: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.n <= 1_000_000:
            raise ValueError(f"-n must be between 1 and 1000000, got {self.n}")
        if self.max_candidates is not None and self.max_candidates < 1:
            raise ValueError(f"--max-candidates must be at least 1, got {self.max_candidates}")
        if self.trials not in ("direct", "full"):
            raise ValueError(f"trials must be 'direct' or 'full', got {self.trials!r}")


@dataclass
class SynthTask:
    """One accepted task."""

    name: str
    document: dict[str, Any]
    text: str
    split: str
    ancestry: str
    first_call: dict[str, Any]


@dataclass
class SynthResult:
    """What a run made and its report (JSON data, no wall-clock values)."""

    tasks: list[SynthTask]
    report: dict[str, Any]
    graph: ToolGraph


def common_words(env: Environment) -> frozenset[str]:
    """Texts too common to prove anything in an answer: role names, enum values of the
    collections' schemas and of the tools' parameters (casefolded)."""
    words = {r.casefold() for r in env.roles}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for v in node.get("enum", []) if isinstance(node.get("enum"), list) else []:
                if isinstance(v, str):
                    words.add(v.casefold())
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    for info in env.seed.infos().values():
        walk(dict(info.schema or {}))
    for tool in env.tools.values():
        walk(tool.input_schema)
    return frozenset(words)


class TaskSynthesizer:
    """Synthesizes verified tasks from one environment."""

    def __init__(self, env: Environment, config: SynthConfig) -> None:
        self.env = env
        self.config = config
        self.role = config.role or env.default_role
        if self.role not in env.roles:
            raise ValueError(f"unknown role {self.role!r} (roles: {', '.join(env.roles)})")
        self.sandbox = Sandbox(env, self.role)
        self.resolver = Resolver(env.seed.fork())
        params = {name: tool_params(t, self.resolver.keys) for name, t in env.tools.items()}
        self.walker = Walker(self.sandbox, Binder(self.resolver), params)
        self.env_hash = env_hash(env)
        self.common = common_words(env)
        self.graph: ToolGraph | None = None
        self.dropped: Counter[str] = Counter()
        self.causes: dict[str, Counter[str]] = {}
        self.examples: dict[str, str] = {}
        self.candidates = 0
        self.interrupted = False
        self._seen: set[str] = set()

    async def run(self, progress: Callable[[int, int], None] | None = None) -> SynthResult:
        """Make up to `n` tasks (fewer when the candidate cap is reached first)."""
        config = self.config
        self.graph = await build_graph(
            self.env, role=self.role, probes=config.probes, seed=config.seed, sandbox=self.sandbox
        )
        cap = config.max_candidates or config.n * CANDIDATES_PER_TASK
        tasks: list[SynthTask] = []
        try:
            while len(tasks) < config.n and self.candidates < cap:
                index = self.candidates
                self.candidates += 1
                try:
                    task = await self.candidate(index, len(tasks) + 1)
                except Dropped as drop:
                    self._drop(drop.reason, drop.detail)
                except Exception as exc:  # a bug, or a tool that breaks the gateway's rules
                    self._drop("internal_error", f"{type(exc).__name__}: {exc}")
                else:
                    tasks.append(task)
                if progress is not None:
                    progress(len(tasks), self.candidates)
        except (KeyboardInterrupt, asyncio.CancelledError):  # keep what was made
            self.interrupted = True
        return SynthResult(tasks, self.report(tasks), self.graph)

    def _drop(self, reason: str, detail: str) -> None:
        self.dropped[reason] += 1
        self.examples.setdefault(reason, detail[:300])
        cause = cause_of(reason, detail)
        if cause is not None:
            self.causes.setdefault(reason, Counter())[cause] += 1

    async def _augment(self, records: dict[str, list[dict[str, Any]]]) -> Snapshot:
        """The seed with distractors, added through the data plane as the task will."""
        instance = await self.sandbox.open(self.env.seed)
        try:
            part = DataPart(kind="data", data=records)
            await self.sandbox.gateway.data_add(SYSTEM, [part], instance=instance)
            return self.sandbox.snapshot(instance)
        finally:
            self.sandbox.close(instance)

    async def candidate(self, index: int, number: int) -> SynthTask:
        """Candidate `index` as task number `number`, or Dropped."""
        assert self.graph is not None
        env, knobs, config = self.env, self.config.knobs, self.config
        rng = random.Random(f"{config.seed}:{index}")
        depth, topology = knobs.sample(rng)
        plan = sample_plan(self.graph, rng, depth, topology)
        walk = await self.walker.execute(plan, env.seed, rng)
        start: Snapshot = env.seed
        distractors: dict[str, list[dict[str, Any]]] = {}
        if knobs.distractors:
            distractors = make_distractors(walk, env.seed.fork(), knobs.distractors, rng)
            if distractors:
                start = await self._augment(distractors)
                try:
                    walk = await self.walker.execute(
                        plan, start, rng, reuse=[c.bounds for c in walk.calls]
                    )
                except Dropped as drop:
                    raise Dropped("distractors_break_walk", str(drop)) from None
        signature = walk.signature()
        if signature in self._seen:
            raise Dropped("duplicate", signature[:200])
        calls = [c.solution_call() for c in walk.calls]
        if not agrees(walk, await self.walker.replay(calls, start)):
            raise Dropped("replay_disagrees", signature[:200])
        shifted = await self.walker.replay(calls, start, SHIFT)
        if not all(ok for ok, _, _ in shifted):
            raise Dropped("clock_dependent", "a call fails when the clock is moved")
        task = self._write(index, number, walk, start, distractors, shifted, rng, signature)
        if config.trials == "full":
            await self.run_full_trials(task)
        return task

    def _write(
        self,
        index: int,
        number: int,
        walk: Walk,
        start: Snapshot,
        distractors: dict[str, list[dict[str, Any]]],
        shifted: list[tuple[bool, Any, Snapshot]],
        rng: random.Random,
        signature: str,
    ) -> SynthTask:
        assert self.graph is not None
        env, config = self.env, self.config
        obfuscated = choose_obfuscations(
            walk, start.fork(), self.graph, config.knobs.obfuscation, self.resolver, rng
        )
        descriptions = {name: t.description for name, t in env.tools.items()}
        steps = templates.steps_text(walk, descriptions, obfuscated)
        facts = required_facts(walk, [value for _, value, _ in shifted], steps, rng, self.common)
        changed = walk.final.hash() != start.hash()
        given = templates.given_values(walk, obfuscated)
        checks = state_checks(walk, shifted[-1][2], given) if changed else []
        gold = config.gold_replay and changed
        verifier = Verifier(checks, walk.final.hash() if gold else None, facts)
        response = reference_response(facts, walk)
        trials = run_trials(verifier, walk, response)
        self._seen.add(signature)
        calls = [c.solution_call() for c in walk.calls]
        first = calls[0]
        group = ancestry(env.name, first)
        split = assign_split(group, config.ratios)
        name = f"{env.name}-{number:05d}"
        difficulty = {
            "depth": len(walk.calls),
            "topology": walk.plan.topology,
            "obfuscation": config.knobs.obfuscation,
            "obfuscated": len({(c, v) for c, _, v in obfuscated.values()}),
            "distractors": sum(len(v) for v in distractors.values()),
        }
        metadata = {
            "difficulty": difficulty,
            "split": split,
            "synth": {
                "generator": GENERATOR,
                "env": {"name": env.name, "version": env.version, "hash": self.env_hash},
                "seed": config.seed,
                "candidate": index,
                "knobs": config.knobs.to_json(),
                "ancestry": group,
                "walk": [
                    {
                        "tool": c.tool,
                        "kind": c.kind,
                        "args": c.args,
                        "bound": {b.param: b.to_json() for b in c.bounds},
                    }
                    for c in walk.calls
                ],
                "obfuscated": [
                    {"step": s + 1, "param": p, "collection": c, "field": f, "value": v}
                    for (s, p), (c, f, v) in sorted(obfuscated.items())
                ],
                "trials": {**trials, "mode": config.trials},
            },
        }
        document = task_document(
            name=name,
            env=env,
            role=self.role,
            description=templates.description(walk, difficulty),
            prompt=templates.prompt(env.name, steps, facts),
            distractors=distractors,
            clock_step=self.sandbox.clock.step(),
            checks=checks,
            gold_replay=gold,
            response_checks=verifier.response_checks,
            calls=calls,
            response=response,
            metadata=metadata,
        )
        text = dump_yaml(document)
        return SynthTask(name, document, text, split, group, first)

    async def run_full_trials(self, task: SynthTask) -> None:
        """Run the written document through the task runner (Dropped on a failure)."""
        spec = TaskSpec.model_validate(yaml.safe_load(task.text))
        calls = len(task.document["solution"]["main"]["calls"])
        await full_trials(spec, self.env, calls)

    def report(self, tasks: list[SynthTask]) -> dict[str, Any]:
        """The run's report: acceptance rate and why candidates were dropped."""
        splits = {
            name: sum(1 for t in tasks if t.split == name) for name in ("train", "dev", "test")
        }
        graph = None
        if self.graph is not None:
            graph = dict(self.graph.to_json()["stats"])
            graph["probes"] = sum(n.probes for n in self.graph.nodes.values())
            graph["probes_ok"] = sum(n.probes_ok for n in self.graph.nodes.values())
        accepted = len(tasks)
        stopped = None
        if self.interrupted:
            stopped = "interrupted"
        elif accepted < self.config.n:
            stopped = f"reached the cap of {self.candidates} candidates"
        return {
            "generator": GENERATOR,
            "env": {"name": self.env.name, "version": self.env.version, "hash": self.env_hash},
            "role": self.role,
            "seed": self.config.seed,
            "knobs": self.config.knobs.to_json(),
            "trials": self.config.trials,
            "gold_replay": self.config.gold_replay,
            "requested": self.config.n,
            "candidates": self.candidates,
            "accepted": accepted,
            "acceptance_rate": round(accepted / self.candidates, 4) if self.candidates else 0.0,
            "dropped": dict(sorted(self.dropped.items(), key=lambda kv: (-kv[1], kv[0]))),
            "dropped_causes": {
                reason: dict(counts.most_common()) for reason, counts in sorted(self.causes.items())
            },
            "drop_examples": dict(sorted(self.examples.items())),
            "splits": splits,
            "graph": graph,
            "stopped": stopped,
        }
