"""Validating task files as `agent-env validate` does: the document, every step, and what
the steps name in their bundle (environments, verifier scripts), all problems at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import read_document
from agentenv.spec.task import TaskSpec
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
    report.problems = in_document_order(report.problems + bundle_problems(spec, path, bundle))
    return report


def validate_bundle(path: Path) -> list[FileReport]:
    """Every task file of a bundle folder."""
    bundle = Bundle(path)
    return [validate_task_file(p, bundle) for p in bundle.task_files()]
