"""Checking a task's state checks against the environment they grade, before any agent
runs: an unknown collection, or a field no record of the collection has
(`grading.field_refs`), is an error with its path in the task document.

A task is bound to its environments when its `deploy_env` steps deploy them: that step
fails (and so the task, with status `error`, before any prompt) when the task's
`env_outcome_verifier` checks name what the environment cannot have; `agent-env run`,
`rollout` and the episode SDK all deploy that way. `tasks.validation` checks the same
against the environments it can find, for `agent-env validate`.

Not checked: a process environment (a `server:` block: its data is the server's, not
known before it runs), collections with no schema and no seed records, and levels of a
record neither tells (see `grading.field_refs`).
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import Any

from agentenv.env.environment import Environment
from agentenv.grading.field_refs import CollectionFields, field_problems, known_fields
from agentenv.spec.task import StepSpec, TaskSpec, fill_placeholders
from agentenv.tasks.checking import Problem, describe, problem_at

VERIFIER = "env_outcome_verifier"
DEPLOY = "deploy_env"

Knowledge = dict[str, CollectionFields | None] | None

# Keyed by id(), holding only weak references: an entry is dropped when what it was
# computed from goes (neither Environment, a frozen dataclass hashed by value, nor a task's
# list of steps can be a WeakKeyDictionary key); identity is checked on every hit too.
_KNOWN: dict[int, tuple[weakref.ref[Environment], Knowledge]] = {}
_PROBLEMS: dict[tuple[tuple[int, ...], int, str, str], _Found] = {}


@dataclass(frozen=True, eq=False)
class _Found:
    """What `env_problems` found for one environment and one task's steps."""

    env: weakref.ref[Environment]
    refs: tuple[weakref.ref[StepSpec], ...]
    problems: list[Problem]


def env_knowledge(env: Environment) -> Knowledge:
    """What is known of an environment's collections (made once per environment object),
    or None when nothing can be known before it runs (a process environment)."""
    key = id(env)
    found = _KNOWN.get(key)
    if found is None or found[0]() is not env:

        def drop(ref: weakref.ref[Environment]) -> None:
            entry = _KNOWN.get(key)
            if entry is not None and entry[0] is ref:
                del _KNOWN[key]

        knowledge = None if env.runtimes() else known_fields(env.seed)
        found = _KNOWN[key] = (weakref.ref(env, drop), knowledge)
    return found[1]


def _remember(
    key: tuple[tuple[int, ...], int, str, str],
    steps: list[StepSpec],
    env: Environment,
    out: list[Problem],
) -> None:
    """Keep what `env_problems` found, until the environment or any of the steps goes."""

    def drop(ref: weakref.ref[Any]) -> None:
        entry = _PROBLEMS.get(key)
        if entry is not None and (ref is entry.env or any(ref is r for r in entry.refs)):
            del _PROBLEMS[key]

    refs = tuple(weakref.ref(step, drop) for step in steps)
    _PROBLEMS[key] = _Found(weakref.ref(env, drop), refs, out)


def _deployed_ids(task: TaskSpec, values: dict[str, Any]) -> list[str]:
    out = []
    for step in task.steps:
        if step.type == DEPLOY:
            env_id = fill_placeholders(step.params.get("env_id"), values)
            if isinstance(env_id, str):
                out.append(env_id)
    return out


def env_problems(
    task: TaskSpec, env_id: str, env: Environment, seed: dict[str, Any] | None = None
) -> list[Problem]:
    """What the task's `env_outcome_verifier` state checks that grade `env_id` name that
    `env` cannot have, each at its path (`steps[4].checks[1].where.stauts`) with its step
    (and verifier) id. Checks that do not parse are left to `check_task`."""
    values = {**task.seed, **(seed or {})}
    # By the steps' identity: a runner copies the task (not its steps) for each run. An
    # entry lives no longer than its steps, so their ids name them alone while it does.
    steps = tuple(map(id, task.steps))
    key = (steps, id(env), env_id, json.dumps(values, sort_keys=True, default=repr))
    cached = _PROBLEMS.get(key)
    if cached is not None and cached.env() is env:
        return list(cached.problems)
    out: list[Problem] = []
    knowledge = env_knowledge(env)
    deployed = _deployed_ids(task, values)
    for i, step in enumerate(task.steps):
        if knowledge is None or step.type != VERIFIER:
            continue
        params = fill_placeholders(step.params, values)
        target = params.get("env_id")
        if target is None and len(deployed) == 1:
            target = deployed[0]
        checks = params.get("checks")
        if target != env_id or not isinstance(checks, list):
            continue
        verifier = params.get("verifier_id")
        named = f" (verifier {verifier!r})" if isinstance(verifier, str) and verifier else ""
        for loc, message in field_problems(checks, knowledge):
            out.append(problem_at(task, ("steps", i, "checks", *loc), message + named))
    _remember(key, task.steps, env, out)
    return list(out)


def env_problems_message(task: TaskSpec, env_id: str, problems: list[Problem]) -> str:
    """The error of a deploy step whose environment the task's checks do not fit."""
    return (
        f"task {task.name!r}: its state checks name what environment {env_id!r} cannot have "
        f"(a check that matches nothing would score 0 whatever the agent did): "
        f"{describe(problems)}"
    )
