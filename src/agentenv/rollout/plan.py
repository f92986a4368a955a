"""The rollout plan: tasks x agents x seeds x repeats, each episode with a stable id.

An episode's id is a digest of what defines it (task name, agent name, seed values,
repeat index), so re-running the same plan into the same run folder finds the episodes
that are already done. Everything a plan names is checked when the plan is built: a
missing task, an unknown agent or a task document that cannot run fails before any
episode starts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentenv.agents.base import Agent
from agentenv.agents.registry import make_agent, with_base_url
from agentenv.registry import RegistryError
from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import ENV_FILE_NAMES, is_upstream_folder
from agentenv.tasks.bundle import Bundle, Task, TaskNotFound, iter_bundles
from agentenv.tasks.harbor import harbor_task_spec, harbor_tasks
from agentenv.tasks.runner import TaskError, build_steps

ID_LENGTH = 16
"""Hex digits of an episode id (64 bits)."""


class PlanError(ValueError):
    """A plan that cannot run: a missing task or agent, a bad task document, bad numbers."""


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def episode_id(task: str, agent: str, seed: Mapping[str, Any], repeat: int) -> str:
    """The stable id of one episode: a digest of its task, agent, seed values and repeat."""
    key = _canonical({"task": task, "agent": agent, "seed": dict(seed), "repeat": repeat})
    return hashlib.sha256(key.encode()).hexdigest()[:ID_LENGTH]


@dataclass(frozen=True)
class PlanAgent:
    """An agent a plan runs: a name (what records and reports show) and how to build one.

    `make` is called for every agent a task deploys, in every episode, so each episode gets
    its own agent (an agent's `usage` counters are then per episode).
    """

    name: str
    make: Callable[[], Agent]
    spec: str | None = None
    """The registry spec (`oracle`, `scripted:mod:fn`) when it came from one."""

    @classmethod
    def from_spec(cls, spec: str, *, base_url: str | None = None) -> PlanAgent:
        """An agent from the registry by spec; PlanError now if there is no such agent.

        With `base_url` (`--base-url`), the agent is built with that endpoint
        (`with_base_url`), while its name (records, reports, episode ids) stays `spec`:
        where a model is served is not what the agent is.
        """
        full = spec
        if base_url:
            try:
                full = with_base_url(spec, base_url)
            except RegistryError as exc:  # names the agent already
                raise PlanError(str(exc)) from None
        try:
            make_agent(full)
        except RegistryError as exc:
            raise PlanError(f"agent {spec!r}: {exc}") from None
        return cls(name=spec, make=_SpecFactory(full), spec=full)

    @classmethod
    def of(cls, name: str, agent: Agent | Callable[[], Agent] | type) -> PlanAgent:
        """An agent from Python: an Agent class or a zero-argument factory (one agent per
        episode), or an Agent instance (shared by every episode; keep it stateless)."""
        if isinstance(agent, type) or not hasattr(agent, "run_turn"):
            if not callable(agent):
                raise PlanError(f"agent {name!r}: expected an Agent or a factory of one")
            return cls(name=name, make=agent)  # type: ignore[arg-type]
        return cls(name=name, make=_Shared(agent))


@dataclass(frozen=True)
class _SpecFactory:
    """Picklable (Ray ships it to workers): builds the agent from its spec."""

    spec: str

    def __call__(self) -> Agent:
        return make_agent(self.spec)


@dataclass(frozen=True)
class _Shared:
    agent: Any

    def __call__(self) -> Agent:
        return self.agent


@dataclass(frozen=True)
class PlannedEpisode:
    """One episode of a plan."""

    id: str
    task: str
    agent: str
    seed: dict[str, Any] = field(default_factory=dict, hash=False)
    repeat: int = 0

    def to_json(self) -> dict[str, Any]:
        """The episode as JSON data."""
        return {
            "episode_id": self.id,
            "task": self.task,
            "agent": self.agent,
            "seed": self.seed,
            "repeat": self.repeat,
        }


def resolve_targets(targets: Iterable[str | Path | Task]) -> list[Task]:
    """Tasks from targets: a task file, a bundle folder (all its tasks), a Harbor task
    directory (or a folder of them), a catalog name `bundle/task`, a catalog bundle name
    (all its tasks), or a Task. A folder is named by its resolved path, so `.` inside a
    bundle names its tasks as the bundle's own name would. PlanError for a target that
    names nothing, or for two different tasks under one name."""
    found: dict[str, Task] = {}
    for target in targets:
        for task in _resolve_one(target):
            known = found.get(task.name)
            if known is not None and known.file != task.file:
                raise PlanError(
                    f"two different tasks are called {task.name!r}: {known.file} and {task.file}"
                )
            found.setdefault(task.name, task)
    if not found:
        raise PlanError("the plan has no tasks")
    return list(found.values())


def _resolve_one(target: str | Path | Task) -> list[Task]:
    if isinstance(target, Task):
        return [target]
    path = Path(target)
    text = str(target)
    try:
        if path.is_file():
            return [Task.load(path.resolve())]
        if path.is_dir() and harbor_tasks(path):
            return [harbor_task(p) for p in harbor_tasks(path)]
        if path.is_dir():
            if not Bundle.is_bundle(path):
                if _is_environment(path):
                    raise PlanError(_environment_not_runnable(path))
                raise PlanError(f"{path} is not a bundle (no tasks/ or envs/ folder)")
            bundle = Bundle(path.resolve())
            files = bundle.task_files()
            if not files:
                raise PlanError(f"bundle {path} has no tasks (tasks/*.json|yaml)")
            return [Task.load(f, bundle=bundle) for f in files]
        if text.count("/") == 1 and not path.suffix and not text.startswith((".", "/")):
            return [Task.get(text)]
        for bundle in iter_bundles():
            if bundle.name == text:
                files = bundle.task_files()
                if not files:
                    raise PlanError(f"bundle {text!r} has no tasks")
                return [Task.load(f, bundle=bundle) for f in files]
    except TaskNotFound as exc:
        raise PlanError(str(exc)) from None
    except DocumentError as exc:
        raise PlanError(str(exc)) from None
    raise PlanError(
        f"no task file, bundle folder or catalog task {text!r} (see `agent-env task list`)"
    )


def _is_environment(path: Path) -> bool:
    """Whether a folder is an environment (a document, or an upstream server folder)."""
    return any((path / name).is_file() for name in ENV_FILE_NAMES) or is_upstream_folder(path)


def _environment_not_runnable(path: Path) -> str:
    """Why an environment folder is no run target, what works on it, and the bundles with
    tasks on the search path whose `envs/` hold it."""
    resolved = path.resolve()
    holders = [
        str(bundle.path)
        for bundle in iter_bundles()
        if (bundle.path / "envs" / resolved.name).resolve() == resolved and bundle.task_files()
    ]
    where = (
        f"run a bundle that holds it: {', '.join(holders)}"
        if holders
        else "run a bundle (a folder with tasks/ and envs/) whose envs/ holds it"
    )
    return (
        f"{path} is an environment, not a bundle of tasks: check, serve or try it with "
        f"`agent-env validate {path}`, `agent-env serve {path}` or `agent-env call {path} "
        f"TOOL`; to run tasks on it, {where}"
    )


def harbor_task(path: Path) -> Task:
    """A Harbor task directory as a Task (its environment built on this machine).
    DocumentError for what cannot be honoured. Callable from inside a running event loop
    too (a trainer's async code): the build then runs in a thread of its own."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    try:
        asyncio.get_running_loop()
    except RuntimeError:  # no loop here: the common case, from the command line
        spec = asyncio.run(harbor_task_spec(path))
    else:  # asyncio.run refuses to nest in a running loop
        with ThreadPoolExecutor(1) as pool:
            spec = pool.submit(asyncio.run, harbor_task_spec(path)).result()
    return Task(spec=spec, name=f"harbor/{spec.name}", file=path.resolve() / "task.toml")


@dataclass
class RolloutPlan:
    """Tasks x agents x seeds x repeats. Build one with `RolloutPlan.build`."""

    tasks: dict[str, Task]
    agents: dict[str, PlanAgent]
    repeats: int = 1
    seeds: list[dict[str, Any]] = field(default_factory=lambda: [{}])

    @classmethod
    def build(
        cls,
        tasks: Iterable[str | Path | Task],
        agents: Iterable[str | PlanAgent],
        *,
        repeats: int = 1,
        seeds: Iterable[Mapping[str, Any]] | None = None,
        check: bool = True,
        base_url: str | None = None,
    ) -> RolloutPlan:
        """Resolve and check everything the plan names; PlanError before anything runs.

        `agents` are registry specs (`oracle`) or PlanAgents; `seeds` are sets of `<key>`
        placeholder values (each task runs once per seed set, `repeats` times).
        `check` also builds every task's steps for every seed (unknown step types and bad
        fields fail here rather than in every episode). `base_url` is given to every
        agent spec (`PlanAgent.from_spec`); PlanError for an agent that takes none.
        """
        if repeats < 1:
            raise PlanError(f"repeats must be at least 1 (got {repeats})")
        seed_list = list(seeds) if seeds is not None else [{}]
        if not seed_list:
            raise PlanError("the plan has no seeds (give at least one, or none for {})")
        for i, seed in enumerate(seed_list):
            if not isinstance(seed, Mapping) or not all(isinstance(k, str) for k in seed):
                raise PlanError(f"seeds[{i}] must be an object of placeholder values")
        seen: set[str] = set()
        unique = []
        for seed in seed_list:  # the same seed twice is the same episodes: run them once
            key = json.dumps(seed, sort_keys=True, default=str)
            if key not in seen:
                seen.add(key)
                unique.append(dict(seed))
        seed_list = unique
        resolved = resolve_targets(tasks)
        plan_agents: dict[str, PlanAgent] = {}
        for agent in agents:
            entry = (
                agent
                if isinstance(agent, PlanAgent)
                else PlanAgent.from_spec(agent, base_url=base_url)
            )
            if entry.name in plan_agents:
                raise PlanError(f"agent {entry.name!r} is named twice")
            plan_agents[entry.name] = entry
        if not plan_agents:
            raise PlanError("the plan has no agents")
        plan = cls(
            tasks={t.name: t for t in resolved},
            agents=plan_agents,
            repeats=repeats,
            seeds=seed_list,
        )
        if check:
            plan.check()
        return plan

    def check(self) -> None:
        """Build every task's steps for every seed; PlanError naming the first problem."""
        for task in self.tasks.values():
            for seed in self.seeds:
                try:
                    build_steps(task.spec, seed)
                except TaskError as exc:
                    where = task.file or task.name
                    shown = f" with seed {_canonical(seed)}" if seed else ""
                    raise PlanError(f"task {task.name!r} ({where}){shown}: {exc}") from None

    def __len__(self) -> int:
        return len(self.tasks) * len(self.agents) * len(self.seeds) * self.repeats

    def episodes(self) -> Iterator[PlannedEpisode]:
        """Every episode, task by task, then agent, seed and repeat."""
        for task in self.tasks:
            for agent in self.agents:
                for seed in self.seeds:
                    for repeat in range(self.repeats):
                        yield PlannedEpisode(
                            id=episode_id(task, agent, seed, repeat),
                            task=task,
                            agent=agent,
                            seed=seed,
                            repeat=repeat,
                        )

    @property
    def plan_id(self) -> str:
        """A digest of the plan's definition."""
        return hashlib.sha256(_canonical(self.describe(ids=False)).encode()).hexdigest()[:16]

    def describe(self, *, ids: bool = False) -> dict[str, Any]:
        """The plan as JSON data (what `plan.json` in a run folder holds)."""
        out: dict[str, Any] = {
            "tasks": {
                name: str(task.file) if task.file else None for name, task in self.tasks.items()
            },
            "agents": list(self.agents),
            "seeds": self.seeds,
            "repeats": self.repeats,
            "episodes": len(self),
        }
        if ids:
            out["episode_ids"] = [e.id for e in self.episodes()]
        return out
