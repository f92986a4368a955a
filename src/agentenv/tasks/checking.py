"""Checking a task before it runs: every problem at once, each with its path.

`check_task` builds every step it can and collects, rather than stops at, what is wrong:
unknown step types, bad or missing fields, bad structure (ids, dependencies, retry
targets), fields the protocol has that we refuse, and what a step type's own static
check finds (`Step.static_problems`). Fields we accept but do not act on come back as
warnings. Paths are the document's own (`steps[2].criteria[0].type`), so a user can
find each one.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from agentenv.registry import Registry, RegistryError
from agentenv.spec.errors import format_location
from agentenv.spec.task import (
    PLACEHOLDER,
    TaskSpec,
    fill_placeholders,
    fill_shell_placeholders,
)
from agentenv.tasks.step import STEPS, Step

_UNSET = object()

NOT_BUILT_STEP_TYPES = frozenset(
    {
        "add_skills",
        "apply_server_config",
        "build_mcp_cli",
        "combine_universe_verdicts",
        "deploy_human_agent",
        "install_agent",
        "register_agent_triggers",
        "review",
        "run_docker_container",
        "validation_gate_aggregator",
        "verify_a2a_agent_card",
        "verify_a2a_agent_config_identity",
        "verify_a2a_agent_mcp",
        "verify_a2a_core_protocol",
        "verify_a2a_install",
        "verify_a2a_modalities",
        "verify_a2a_peer_agents",
        "verify_a2a_role",
        "verify_a2a_skill_config",
        "verify_a2a_snapshot",
        "verify_a2a_system_prompt",
        "verify_a2a_trajectory",
        "verify_env_card",
        "verify_env_core_protocol",
        "verify_mcp_env_assessment",
        "verify_universe_load_export_roundtrip",
    }
)
"""Step types of upstream AgentEnv (0.9) that are not built here: sandboxes, harness
installs, container runs, agent validators. A task using one is refused, by name."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong (or, as a warning, not acted on) in a task document."""

    path: str
    message: str
    step_id: str | None = None

    def __str__(self) -> str:
        step = f" (step {self.step_id!r})" if self.step_id else ""
        return f"{self.path}: {self.message}{step}"


@dataclass
class CheckedTask:
    """What checking a task found: the steps it could build, problems and warnings."""

    steps: list[Step] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem (warnings are not problems)."""
        return not self.problems


def problem_at(task: TaskSpec, loc: tuple[Any, ...], message: str) -> Problem:
    """A Problem at a document location; a step's location also names its id."""
    step_id = None
    in_steps = len(loc) >= 2 and loc[0] == "steps" and isinstance(loc[1], int)
    if in_steps and 0 <= loc[1] < len(task.steps):
        step_id = task.steps[loc[1]].id
    return Problem(format_location(loc, strip_tags=False), message, step_id)


def user_location(loc: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    """A pydantic error location with the labels it adds for union members and
    discriminator tags (which no user wrote) dropped, by walking the data itself."""
    out: list[Any] = []
    node = data
    for n, part in enumerate(loc):
        in_dict = isinstance(node, dict) and part in node
        in_list = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if in_dict or in_list:
            out.append(part)
            node = node[part]
        elif n == len(loc) - 1 and isinstance(part, str | int) and str(part).isidentifier():
            out.append(part)  # a field the data lacks (a missing field)
        elif not isinstance(node, dict | list):
            node = _UNSET
        # else: a union label or a tag the user did not write; the data stays where it is
    return tuple(out)


def _messages(exc: ValidationError, data: Any) -> list[tuple[tuple[Any, ...], str]]:
    out: list[tuple[tuple[Any, ...], str]] = []
    seen: set[tuple[tuple[Any, ...], str]] = set()
    for error in exc.errors(include_url=False):
        loc = user_location(tuple(error["loc"]), data)
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            tag = str((error.get("ctx") or {}).get("discriminator", "")).strip("'")
            if tag.isidentifier():
                loc = (*loc, tag)  # the field whose value picks the kind is what is wrong
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        else:
            message = error["msg"].removeprefix("Value error, ")
        key = (loc, message)
        if key not in seen:
            seen.add(key)
            out.append(key)
    return out


def document_problems(exc: ValidationError, data: Any) -> list[Problem]:
    """Every problem of a task document that failed `TaskSpec` validation, located in it."""
    return [
        Problem(format_location(loc, strip_tags=False), message)
        for loc, message in _messages(exc, data)
    ]


def prompt_ids(task: TaskSpec) -> list[str] | None:
    """The prompt ids the task's `prompt_agent` steps send (a step's id where it names
    none), or None when they cannot all be known before it runs: none is sent, or one is
    not a literal (a `<key>` placeholder, or not a string)."""
    out: list[str] = []
    for step in task.steps:
        if step.type != "prompt_agent":
            continue
        value = step.params.get("prompt_id")
        value = step.id if value is None else value
        if not isinstance(value, str) or PLACEHOLDER.search(value):
            return None
        out.append(value)
    return out or None


def solution_problems(task: TaskSpec) -> list[tuple[tuple[Any, ...], str]]:
    """Reference solution keys that match no prompt id: the oracle would never replay
    them (it looks its answer up by the prompt's id). Checked only when every prompt id is
    a literal (`prompt_ids`)."""
    if not task.solution:
        return []
    known = prompt_ids(task)
    if known is None:
        return []
    problems: list[tuple[tuple[Any, ...], str]] = []
    for key in task.solution:
        if key in known:
            continue
        message = (
            f"no prompt_agent step sends prompt_id {key!r}, so the oracle never replays this "
            f"solution (prompt ids: {', '.join(dict.fromkeys(known))})"
        )
        close = difflib.get_close_matches(key, known, n=1)
        if close:
            message += f"; did you mean {close[0]!r}?"
        problems.append((("solution", key), message))
    return problems


def check_task(
    task: TaskSpec, seed: dict[str, Any] | None = None, registry: Registry[type[Step]] = STEPS
) -> CheckedTask:
    """Build every step of `task`, collecting all problems and warnings (never raises)."""
    checked = CheckedTask()
    for loc, message in task.structure_problems():
        checked.problems.append(problem_at(task, loc, message))
    for loc, message in solution_problems(task):
        checked.problems.append(problem_at(task, loc, message))
    values = {**task.seed, **(seed or {})}
    for i, spec in enumerate(task.steps):
        try:
            cls = registry.get(spec.type)
        except RegistryError as exc:
            message = str(exc)
            if spec.type in NOT_BUILT_STEP_TYPES:
                message = (
                    f"not supported: {spec.type!r} is a step type of upstream AgentEnv that "
                    "is not built here"
                )
            checked.problems.append(problem_at(task, ("steps", i, "type"), message))
            continue
        if not (isinstance(cls, type) and issubclass(cls, Step)):
            message = f"{spec.type!r} is registered but is not a Step class"
            checked.problems.append(problem_at(task, ("steps", i, "type"), message))
            continue
        raw = fill_placeholders(
            {k: v for k, v in spec.params.items() if k not in cls.shell_fields}, values
        )
        for name in cls.shell_fields & spec.params.keys():
            raw[name] = fill_shell_placeholders(spec.params[name], values)
        ignored: list[str] = []
        refused = False
        for name, rule in cls.unhonoured.items():
            if name not in raw:
                continue
            value = raw.pop(name)
            if value is None or value in rule.honoured:
                continue
            where = ("steps", i, name)
            if rule.refuse:
                refused = True
                checked.problems.append(problem_at(task, where, f"not supported: {rule.reason}"))
            else:
                warning = problem_at(task, where, f"ignored: {rule.reason}")
                checked.warnings.append(warning)
                ignored.append(str(warning))
        try:
            params = cls.Params.model_validate(raw)
        except ValidationError as exc:
            for loc, message in _messages(exc, raw):
                if refused and not loc:
                    # a whole-step complaint (e.g. "give one of ...") that only follows from
                    # the refused fields: those already say what is wrong
                    continue
                checked.problems.append(problem_at(task, ("steps", i, *loc), message))
            continue
        step = cls(spec, params)
        step.ignored = ignored
        for loc, message in step.static_problems(task):
            checked.problems.append(problem_at(task, ("steps", i, *loc), message))
        checked.steps.append(step)
    checked.problems = in_document_order(checked.problems)
    return checked


def in_document_order(problems: list[Problem]) -> list[Problem]:
    """Problems sorted by the step they are in (the rest first), stable otherwise."""

    def step_index(problem: Problem) -> int:
        head = problem.path.partition("]")[0]
        if head.startswith("steps[") and head[6:].isdigit():
            return int(head[6:])
        return -1

    return sorted(problems, key=step_index)


def describe(problems: list[Problem]) -> str:
    """Problems as one message: the only one, or a count and one per line."""
    if len(problems) == 1:
        return str(problems[0])
    lines = "\n".join(f"  {p}" for p in problems)
    return f"{len(problems)} problems:\n{lines}"
