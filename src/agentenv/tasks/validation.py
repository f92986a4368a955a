"""Validating task files as `agent-env validate` does: the document, every step, what
the steps name in their bundle (environments, verifier scripts), and what their state
checks name in those environments (`tasks.env_fields`), all problems at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from agentenv.env.environment import Environment
from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import load_environment_spec, read_document
from agentenv.spec.task import TaskSpec, fill_placeholders
from agentenv.tasks.bundle import Bundle, catalog_env_path, unsupported_env_reason
from agentenv.tasks.checking import (
    CheckedTask,
    Problem,
    check_task,
    document_problems,
    in_document_order,
    problem_at,
)
from agentenv.tasks.context import TaskContext
from agentenv.tasks.env_fields import env_problems
from agentenv.tasks.step import StepError
from agentenv.tasks.verify_script import find_script


@dataclass
class FileReport:
    """What validating one task file found."""

    path: Path
    steps: int = 0
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem (warnings are not problems)."""
        return not self.problems


def looks_like_task(path: Path) -> bool:
    """Whether a file holds a task: a list of steps, or a document with `steps`."""
    try:
        data = read_document(path)
    except DocumentError:
        return path.parent.name == "tasks"
    return isinstance(data, list) or (isinstance(data, dict) and "steps" in data)


def _spec(path: Path, report: FileReport) -> TaskSpec | None:
    try:
        data = read_document(path)
    except DocumentError as exc:
        report.problems.append(Problem(exc.path, exc.problem))
        return None
    if isinstance(data, list):
        data = {"name": path.stem, "steps": data}
    elif isinstance(data, dict):
        data = {"name": path.stem, **data}
    else:
        report.problems.append(Problem("<document>", "a task is a list of steps or {steps: [...]}"))
        return None
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        report.problems += document_problems(exc, data)
        return None


def bundle_problems(spec: TaskSpec, path: Path, bundle: Bundle | None) -> list[Problem]:
    """What the steps name that is not there: environments (by id, alias, path or the
    catalog) and verifier scripts."""
    out: list[Problem] = []
    ctx = TaskContext(task=spec, base_dir=path.parent)
    for i, step in enumerate(spec.steps):
        params = step.params
        if step.type == "deploy_env":
            field_name = "env" if isinstance(params.get("env"), str) else "env_id"
            ref = params.get(field_name)
            if isinstance(ref, str) and "<" not in ref:
                problem = _env_problem(ref, path.parent, bundle)
                if problem:
                    out.append(problem_at(spec, ("steps", i, field_name), problem))
        if step.type == "env_outcome_verifier":
            artifact = params.get("file_artifact_id")
            if isinstance(artifact, str) and "<" not in artifact:
                try:
                    find_script(ctx, artifact)
                except StepError as exc:
                    out.append(problem_at(spec, ("steps", i, "file_artifact_id"), str(exc)))
    return out


def _env_problem(ref: str, base: Path, bundle: Bundle | None) -> str | None:
    try:
        if bundle is not None:
            if bundle.env_path(ref) is not None:
                return None
            folder = bundle.env_folder(ref)
            if folder is not None:
                return f"not supported: environment {ref!r} is {unsupported_env_reason(folder)}"
    except DocumentError as exc:
        return str(exc)
    if (base / ref).exists() or catalog_env_path(ref) is not None:
        return None
    return (
        f"no environment {ref!r} (not in the bundle's envs/ or aliases.toml, no such path, "
        "not in the local catalog)"
    )


def _env_path(ref: str, base: Path, bundle: Bundle | None) -> Path | None:
    """Where the environment a deploy step names is, as `deploy_env` finds it (None: not
    found, which `bundle_problems` reports)."""
    try:
        found = bundle.env_path(ref) if bundle is not None else None
    except DocumentError:
        return None
    if found is not None:
        return found
    if (base / ref).exists():
        return base / ref
    return catalog_env_path(ref)


def env_field_problems(
    spec: TaskSpec,
    path: Path,
    bundle: Bundle | None,
    seed: dict[str, Any] | None = None,
    *,
    fields: bool = True,
) -> list[Problem]:
    """Every environment the task's `deploy_env` steps deploy, found where the runner
    finds it and loaded: one that does not load is a problem at its step, with the
    environment document's own error (its file and path). With `fields`, also what the
    task's state checks name that the environments they grade cannot have
    (`tasks.env_fields`). A process environment (a `server:` block) is not started to
    find out: only its document is checked. One that is not found is `bundle_problems`'
    to report."""
    values = {**spec.seed, **(seed or {})}
    out: list[Problem] = []
    loaded: dict[Path, Environment | str | None] = {}  # one load per document
    try:
        for i, step in enumerate(spec.steps):
            if step.type != "deploy_env":
                continue
            params = fill_placeholders(step.params, values)
            env_id, ref = params.get("env_id"), params.get("env") or params.get("env_id")
            if not isinstance(env_id, str) or not isinstance(ref, str):
                continue
            where = _env_path(ref, path.parent, bundle)
            if where is None:
                continue
            key = where.resolve()
            if key not in loaded:
                loaded[key] = _load(where)
            env = loaded[key]
            if isinstance(env, str):
                field_name = "env" if isinstance(step.params.get("env"), str) else "env_id"
                message = f"environment {ref!r} does not load: {env}"
                out.append(problem_at(spec, ("steps", i, field_name), message))
            elif env is not None and fields:
                out += env_problems(spec, env_id, env, seed)
    finally:
        for env in loaded.values():
            if isinstance(env, Environment):
                env.close()
    return out


def _load(where: Path) -> Environment | str | None:
    """The environment at `where`; its document error as text when it does not load; None
    for a process environment (its document loads, but it is not started here)."""
    try:
        env_spec, file = load_environment_spec(where)
        if env_spec.server is not None or any(c.server for c in env_spec.compose):
            return None
        return Environment.from_spec(env_spec, file)
    except DocumentError as exc:
        return str(exc)


def validate_task_file(path: Path, bundle: Bundle | None = None) -> FileReport:
    """Every problem of one task file (document, steps, bundle references)."""
    report = FileReport(path)
    if bundle is None and path.parent.name == "tasks" and Bundle.is_bundle(path.parent.parent):
        bundle = Bundle(path.parent.parent)
    spec = _spec(path, report)
    if spec is None:
        return report
    report.steps = len(spec.steps)
    checked: CheckedTask = check_task(spec)
    report.problems += checked.problems
    report.warnings += checked.warnings
    report.problems += bundle_problems(spec, path, bundle)
    # state checks are judged only when they parse and every environment is there
    report.problems += env_field_problems(spec, path, bundle, fields=not report.problems)
    report.problems = in_document_order(report.problems)
    return report


def validate_bundle(path: Path) -> list[FileReport]:
    """Every task file of a bundle folder."""
    bundle = Bundle(path)
    return [validate_task_file(p, bundle) for p in bundle.task_files()]
