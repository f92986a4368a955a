"""Reading documents from disk: YAML or JSON files, or a folder that holds one."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agentenv.spec.environment import EnvironmentSpec
from agentenv.spec.errors import DocumentError, format_location
from agentenv.state import CollectionInfo

ENV_FILE_NAMES = ("env.yaml", "env.yml", "env.json", "environment.yaml", "environment.json")


def find_environment_file(path: str | Path) -> Path:
    """The document file for a path that is either the file or the folder holding it."""
    path = Path(path)
    if path.is_dir():
        for name in ENV_FILE_NAMES:
            if (path / name).is_file():
                return path / name
        raise DocumentError(path, "<document>", f"no {' / '.join(ENV_FILE_NAMES)} in this folder")
    if not path.exists():
        raise DocumentError(path, "<document>", "no such file or folder")
    return path


def read_document(path: Path) -> Any:
    """Parse a YAML or JSON file (by extension; YAML is a superset, so it is the fallback)."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DocumentError(path, "<document>", f"cannot read: {exc.strerror}") from None
    try:
        if path.suffix == ".json":
            return json.loads(text)
        if path.suffix == ".jsonl":
            # "\n" only: str.splitlines also splits at U+2028 and kin, kept raw in JSON strings
            return [json.loads(line) for line in text.split("\n") if line.strip()]
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(path, f"line {exc.lineno}", f"invalid JSON: {exc.msg}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "<document>"
        raise DocumentError(path, where, f"invalid YAML: {getattr(exc, 'problem', exc)}") from None


def parse_environment_spec(data: Any, file: str | Path | None = None) -> EnvironmentSpec:
    """Validate parsed data as an environment document; seed files resolve against `file`."""
    if not isinstance(data, dict):
        raise DocumentError(file, "<document>", f"expected a mapping, got {type(data).__name__}")
    try:
        spec = EnvironmentSpec.model_validate(data)
    except ValidationError as exc:
        error = DocumentError.from_validation(exc, file, data=data)
        if isinstance(data.get("triggers"), list) and error.path.startswith("triggers.triggers"):
            # The list form is shorthand for a registration; point at what the user wrote.
            error = DocumentError(
                file, error.path[len("triggers.") :], error.problem, more=error.more
            )
        raise error from None
    problems = spec.reference_problems()
    if problems:
        loc, message = problems[0]
        raise DocumentError(file, format_location(loc), message, more=len(problems) - 1)
    base = Path(file).parent if file else Path.cwd()
    spec.seed = {
        name: _seed_records(spec, name, rows, base, file) for name, rows in spec.seed.items()
    }
    return spec


def is_upstream_folder(path: Path) -> bool:
    """Whether `path` is an upstream AgentEnv environment folder with no document of ours
    (a `server.py` and a `Dockerfile`, no env.yaml and kin)."""
    return (
        path.is_dir()
        and (path / "server.py").is_file()
        and (path / "Dockerfile").is_file()
        and not any((path / name).is_file() for name in ENV_FILE_NAMES)
    )


def upstream_folder_document(path: Path) -> dict[str, Any]:
    """The document an upstream environment folder stands for: its server run from the
    folder, named after it."""
    name = re.sub(r"[^A-Za-z0-9._-]", "-", path.resolve().name).lstrip("._-") or "env"
    return {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": name,
        "server": {"folder": "."},
    }


def load_environment_spec(path: str | Path) -> tuple[EnvironmentSpec, Path]:
    """Load and check an environment document; returns it with the file it came from. An
    upstream environment folder with no document reads as `server: {folder: .}`, its file
    being `<folder>/env.yaml` (which need not exist; it anchors relative paths)."""
    if is_upstream_folder(Path(path)):
        folder = Path(path).resolve()
        file = folder / ENV_FILE_NAMES[0]
        return parse_environment_spec(upstream_folder_document(folder), file), file
    file = find_environment_file(path)
    return parse_environment_spec(read_document(file), file), file


def _seed_records(
    spec: EnvironmentSpec,
    name: str,
    rows: list[dict[str, Any]] | str,
    base: Path,
    file: str | Path | None,
) -> list[dict[str, Any]]:
    where = f"seed.{name}"
    if isinstance(rows, str):
        seed_file = base / rows
        if not seed_file.is_file():
            raise DocumentError(file, where, f"seed file {rows!r} not found (looked in {base})")
        rows = read_document(seed_file)
        if isinstance(rows, dict) and name in rows:
            rows = rows[name]
        if not isinstance(rows, list):
            raise DocumentError(seed_file, "<document>", "expected a list of records")
    collection = spec.state[name]
    # The store's compiled check accepts exactly what jsonschema accepts, much faster; a
    # record it does not accept goes to jsonschema, which says why (seed files can be big).
    info = CollectionInfo.create(collection.key, collection.record_schema)
    validator, fast = info.validator, info.check
    seen: set[str] = set()
    for i, record in enumerate(rows):
        at = f"{where}[{i}]"
        if not isinstance(record, dict):
            raise DocumentError(
                file, at, f"expected a record (mapping), got {type(record).__name__}"
            )
        if record.get(collection.key) is None:
            raise DocumentError(file, at, f"missing key field {collection.key!r}")
        key = str(record[collection.key])
        if key in seen:
            raise DocumentError(file, f"{at}.{collection.key}", f"duplicate key {key!r}")
        seen.add(key)
        if validator is not None and (fast is None or not fast(record)):
            error = next(iter(validator.iter_errors(record)), None)
            if error is not None:
                raise DocumentError(file, format_location([at, *error.path]), error.message)
    return rows
