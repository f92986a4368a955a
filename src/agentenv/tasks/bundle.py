"""Bundles: folders of environments, tasks and agents, and the local catalog of tasks.

A bundle is a folder with any of `envs/<name>/`, `tasks/<name>.json|yaml`,
`agents/<name>/`, `evals/<name>.toml`, `skills/<name>/SKILL.md`, `artifacts/<name>/`, an
`aliases.toml` (the protocol's: `[envs] <folder> = ["<alias>", ...]`, more ids a task may
name an env by), `solutions/<task>.json|yaml` (ours: the reference solution of a task
whose file is the protocol's bare list of steps, which has no room for one) and a
README.md whose text is its description. A task is named `<bundle>/<task>`.

The catalog searches, in order: the folders in `AGENTENV_PATH` (os.pathsep-separated),
the current folder and its `bundles/` and `examples/bundles/`, and the examples that come
with a source checkout of agentenv.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agentenv.env.environment import Environment
from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import ENV_FILE_NAMES, is_upstream_folder, read_document
from agentenv.spec.task import SolutionTurn, TaskSpec
from agentenv.tasks.checking import Problem, describe, document_problems
from agentenv.tasks.context import TaskContext
from agentenv.tasks.step import StepError

TASK_SUFFIXES = (".json", ".yaml", ".yml")
ALIASES_FILE = "aliases.toml"
CONTAINER_FILES = ("Dockerfile", "server.py", "docker-compose.yml", "compose.yaml")


def load_task_spec(path: Path) -> TaskSpec:
    """Read and check a task document (a list of steps, or a document with `steps:`)."""
    data = read_document(path)
    if isinstance(data, dict) and "name" not in data:
        data = {**data, "name": path.stem}
    elif isinstance(data, list):
        data = {"name": path.stem, "steps": data}
    try:
        return TaskSpec.model_validate(data)
    except ValidationError as exc:
        raise TaskDocumentError(path, document_problems(exc, data)) from None


class TaskDocumentError(DocumentError):
    """A task document that is not a task: every problem, each with its path."""

    def __init__(self, file: Path, problems: list[Problem]) -> None:
        super().__init__(file, problems[0].path, problems[0].message)
        self.problems = problems
        if len(problems) > 1:
            self.args = (f"{file}: {describe(problems)}",)


_SOLUTION: TypeAdapter[dict[str, SolutionTurn]] = TypeAdapter(dict[str, SolutionTurn])


def _with_solution(spec: TaskSpec, path: Path) -> TaskSpec:
    """The task with the reference solution of a `solutions/` file."""
    data = read_document(path)
    try:
        solution = _SOLUTION.validate_python(data)
    except ValidationError as exc:
        raise DocumentError.from_validation(exc, path) from None
    return spec.model_copy(update={"solution": solution})


@dataclass(frozen=True)
class Bundle:
    """A bundle folder."""

    path: Path

    @property
    def name(self) -> str:
        """The folder's name."""
        return self.path.name

    @property
    def description(self) -> str:
        """The README's text, or ''."""
        readme = self.path / "README.md"
        return readme.read_text(encoding="utf-8") if readme.is_file() else ""

    def task_files(self) -> list[Path]:
        """The task documents, sorted by name."""
        folder = self.path / "tasks"
        if not folder.is_dir():
            return []
        return sorted(p for p in folder.iterdir() if p.suffix in TASK_SUFFIXES and p.is_file())

    def task_file(self, name: str) -> Path | None:
        """The document of the task called `name`, if any."""
        for path in self.task_files():
            if path.stem == name:
                return path
        return None

    def solution_file(self, task_name: str) -> Path | None:
        """`solutions/<task>.json|yaml`, if the bundle has one."""
        for suffix in TASK_SUFFIXES:
            path = self.path / "solutions" / f"{task_name}{suffix}"
            if path.is_file():
                return path
        return None

    def env_aliases(self) -> dict[str, str]:
        """`aliases.toml`'s env aliases, alias -> env folder name ({} without the file).
        DocumentError for a file that is not `[envs] <folder> = [<alias>, ...]`."""
        path = self.path / ALIASES_FILE
        if not path.is_file():
            return {}
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise DocumentError(path, "<document>", f"not valid TOML: {exc}") from None
        envs = data.get("envs", {})
        if not isinstance(envs, dict):
            raise DocumentError(path, "envs", "a table of <env folder> = [aliases]")
        out: dict[str, str] = {}
        for folder, aliases in envs.items():
            if isinstance(aliases, str):
                aliases = [aliases]
            if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                raise DocumentError(path, f"envs.{folder}", "a list of alias strings")
            for alias in aliases:
                out.setdefault(alias, folder)
        return out

    def env_folder(self, name: str) -> Path | None:
        """The folder `envs/<name>/` a task's env id names, directly or by an alias
        (whatever it holds), if any."""
        folder = self.path / "envs" / name
        if folder.is_dir():
            return folder
        aliased = self.env_aliases().get(name)
        if aliased is not None and (self.path / "envs" / aliased).is_dir():
            return self.path / "envs" / aliased
        return None

    def env_path(self, name: str) -> Path | None:
        """The folder of the bundle environment called `name` (or aliased so), if it
        holds an environment document."""
        folder = self.env_folder(name)
        if folder is not None and (
            any((folder / f).is_file() for f in ENV_FILE_NAMES) or is_upstream_folder(folder)
        ):
            return folder  # an upstream env folder (Dockerfile + server.py) runs as a process
        return None

    def resolve_env(self, ref: str) -> Environment | None:
        """A bundle environment by name or alias (None if the bundle has none by that
        name); DocumentError for a folder that is not an environment document, such as a
        container-built MCP server (not built here)."""
        path = self.env_path(ref)
        if path is not None:
            return Environment.load(path)
        folder = self.env_folder(ref)
        if folder is not None:
            raise DocumentError(folder, "<document>", unsupported_env_reason(folder))
        return None

    @staticmethod
    def is_bundle(path: Path) -> bool:
        """Whether a folder looks like a bundle (has tasks/ or envs/)."""
        return path.is_dir() and ((path / "tasks").is_dir() or (path / "envs").is_dir())


def unsupported_env_reason(folder: Path) -> str:
    """Why an env folder with no environment document cannot be deployed."""
    found = [name for name in CONTAINER_FILES if (folder / name).is_file()]
    if "server.py" in found and "Dockerfile" not in found:
        return (
            "a server.py with no Dockerfile: an upstream environment folder holds both "
            "(and a requirements.txt); add them, or write an env.yaml with a server: block"
        )
    if found:
        return (
            f"a container-built MCP server ({', '.join(found)}): deploying those is not "
            f"supported here; an environment is a document ({' / '.join(ENV_FILE_NAMES)})"
        )
    return f"no environment document ({' / '.join(ENV_FILE_NAMES)}) in this folder"


def catalog_env_path(ref: str, paths: list[Path] | None = None) -> Path | None:
    """An environment of the local catalog: `envs/<ref>/` beside or inside a folder on
    the search path, or a bundle's env of that name (first found)."""
    if not ref or "/" in ref or ref.startswith("."):
        return None
    folders = paths if paths is not None else search_path()
    for folder in folders:
        for candidate in (folder / "envs" / ref, folder.parent / "envs" / ref):
            if any((candidate / f).is_file() for f in ENV_FILE_NAMES):
                return candidate
    for bundle in iter_bundles(folders):
        found = bundle.env_path(ref)
        if found is not None:
            return found
    return None


def search_path() -> list[Path]:
    """Where bundles are looked for, in order."""
    paths = [Path(p) for p in os.environ.get("AGENTENV_PATH", "").split(os.pathsep) if p]
    cwd = Path.cwd()
    paths += [cwd, cwd / "bundles", cwd / "examples" / "bundles"]
    checkout = Path(__file__).resolve().parents[3] / "examples" / "bundles"
    paths.append(checkout)
    seen: list[Path] = []
    for p in paths:
        resolved = p.resolve()
        if resolved not in seen and resolved.is_dir():
            seen.append(resolved)
    return seen


def iter_bundles(paths: list[Path] | None = None) -> Iterator[Bundle]:
    """Every bundle on the search path (a folder on the path, or its sub-folders)."""
    seen: set[str] = set()
    for folder in paths if paths is not None else search_path():
        candidates = [folder] if Bundle.is_bundle(folder) else sorted(folder.iterdir())
        for candidate in candidates:
            if Bundle.is_bundle(candidate) and candidate.name not in seen:
                seen.add(candidate.name)
                yield Bundle(candidate)


def find_bundle(name: str, paths: list[Path] | None = None) -> Bundle | None:
    """The first bundle called `name` on the search path."""
    for bundle in iter_bundles(paths):
        if bundle.name == name:
            return bundle
    return None


class TaskNotFound(LookupError):
    """No task by that name on the search path."""


def _no_bundle(name: str, bundle_name: str) -> TaskNotFound:
    """The refusal of a catalog name whose bundle is not found: what was searched, and,
    for a name that is (or looks like) a task file, the call that loads one."""
    if Path(name).is_file():
        return TaskNotFound(
            f"{name!r} is a file, not a catalog name '<bundle>/<task>': "
            "load a task file with Task.load(path)"
        )
    if name.startswith(("/", ".", "~")) or name.endswith(TASK_SUFFIXES):
        return TaskNotFound(
            f"no task file {name!r}, and it is not a catalog name '<bundle>/<task>' "
            "(Task.load(path) loads a task file)"
        )
    folders = ", ".join(str(p) for p in search_path()) or "none"
    variable = os.environ.get("AGENTENV_PATH") or "unset"
    return TaskNotFound(
        f"no bundle {bundle_name!r} on the search path (searched, in order: {folders}); "
        f"add folders with AGENTENV_PATH ({os.pathsep!r}-separated, searched first; "
        f"now {variable}), or load a task file with Task.load(path)"
    )


@dataclass(frozen=True)
class Task:
    """A task ready to run: its document, and where its environments are found."""

    spec: TaskSpec
    name: str
    bundle: Bundle | None = None
    file: Path | None = None

    @classmethod
    def get(cls, name: str) -> Task:
        """A task by catalog name, `<bundle>/<task>` (see `agentenv task list`)."""
        bundle_name, sep, task_name = name.partition("/")
        if not sep:
            if Path(name).is_file() or name.endswith(TASK_SUFFIXES):
                raise _no_bundle(name, bundle_name)
            raise TaskNotFound(f"task names are '<bundle>/<task>', got {name!r}")
        bundle = find_bundle(bundle_name) if bundle_name else None
        if bundle is None:
            raise _no_bundle(name, bundle_name)
        path = bundle.task_file(task_name)
        if path is None:
            known = ", ".join(p.stem for p in bundle.task_files()) or "none"
            raise TaskNotFound(f"bundle {bundle_name!r} has no task {task_name!r} (tasks: {known})")
        return cls.load(path, bundle=bundle)

    @classmethod
    def load(cls, path: str | Path, *, bundle: Bundle | None = None) -> Task:
        """A task from its document; a task inside `<bundle>/tasks/` knows its bundle."""
        path = Path(path)
        if bundle is None and path.parent.name == "tasks" and Bundle.is_bundle(path.parent.parent):
            bundle = Bundle(path.parent.parent)
        spec = load_task_spec(path)
        if bundle is not None and not spec.solution:
            solution = bundle.solution_file(path.stem)
            if solution is not None:
                spec = _with_solution(spec, solution)
        name = f"{bundle.name}/{path.stem}" if bundle else spec.name
        return cls(spec=spec, name=name, bundle=bundle, file=path)

    def context(self, **kwargs: Any) -> TaskContext:
        """A fresh TaskContext for one run of this task."""
        bundle = self.bundle

        def resolve(ref: str) -> Any:
            if bundle is None:
                return None
            try:
                return bundle.resolve_env(ref)
            except DocumentError as exc:
                raise StepError(str(exc)) from None

        base = self.file.parent if self.file else Path.cwd()
        return TaskContext(task=self.spec, base_dir=base, env_resolver=resolve, **kwargs)
