"""Synthesized tasks as a dataset: task documents, provenance, splits, the bundle on disk.

The output is a bundle `agent-env run` and `agent-env rollout` take as it is:

```
<out>/
  README.md              what this is (the bundle's description)
  envs/<env>/            a copy of the environment's folder: the bundle stands alone
  tasks/<env>-00001.yaml one task per file
  splits.json            {"train": [names], "dev": [...], "test": [...]}
  report.json            acceptance rate, why candidates were dropped, knobs, seed
  graph.json             the tool graph the walks were sampled on
```

Splits are by **environment and walk ancestry**: a task's ancestry is a digest of the
environment's name and the first call of its reference walk. Two walks share a prefix
only if they share their first call, so every task whose walk shares a prefix with
another's lands in the same split: no test task shares a reference walk prefix with a
training task. A group's split depends on its digest alone, so adding tasks never
moves old ones. Nothing in the output depends on the wall clock or on the machine:
the same seed writes the same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import yaml

from agentenv import __version__
from agentenv.env.environment import Environment
from agentenv.spec.errors import DocumentError
from agentenv.state import canonical_json

GENERATOR = f"agentenv-synth/1 (agentenv {__version__})"
SPLITS = ("train", "dev", "test")
DEFAULT_RATIOS = (0.8, 0.1, 0.1)
REPORT_FILE = "report.json"
ENV_ID = "env"
PROMPT_ID = "main"
AGENT = "solver"
_OURS = ("README.md", REPORT_FILE, "splits.json", "graph.json")


class SynthError(Exception):
    """A synthesis run that cannot start or cannot write its output."""


def env_folders(env: Environment) -> list[tuple[Path, str]]:
    """The folders an environment is made of, each with its path relative to the
    environment's own folder: its folder (`.`), then those of the children it composes
    (`../services/email`) that lie outside it."""
    if env.source is None:
        return []
    home = env.source.parent.resolve()
    out = [(home, ".")]
    pending = [child for _, child in env.children]
    while pending:
        child = pending.pop(0)
        pending += [c for _, c in child.children]
        if child.source is None:
            continue
        folder = child.source.parent.resolve()
        if folder == home or home in folder.parents or any(folder == f for f, _ in out):
            continue
        out.append((folder, os.path.relpath(folder, home)))
    return out


def env_hash(env: Environment) -> str:
    """A digest of the environment's folders (every file but caches), else of its
    seed and tool schemas: the environment's version as the tasks were made on it."""
    h = hashlib.sha256()
    folders = env_folders(env)
    for folder, rel in folders:
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not _cache(p)):
            name = Path(rel, path.relative_to(folder)).as_posix()
            h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    if not folders:
        tools = {n: [t.input_schema, t.kind] for n, t in sorted(env.tools.items())}
        h.update(canonical_json({"seed": env.seed.hash(), "tools": tools}).encode())
    return f"sha256:{h.hexdigest()[:16]}"


def _cache(path: Path) -> bool:
    return "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo")


def ancestry(env_name: str, first_call: dict[str, Any]) -> str:
    """The digest that groups walks sharing a prefix (they share their first call)."""
    text = env_name + "\0" + canonical_json(first_call)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def assign_split(ancestry_hex: str, ratios: tuple[float, float, float] = DEFAULT_RATIOS) -> str:
    """train, dev or test, from the ancestry digest alone."""
    u = int(ancestry_hex[:8], 16) / 2**32
    total = sum(ratios)
    edge = 0.0
    for name, share in zip(SPLITS, ratios, strict=True):
        edge += share / total
        if u < edge:
            return name
    return SPLITS[-1]


def parse_ratios(text: str) -> tuple[float, float, float]:
    """`0.8,0.1,0.1` or `80/10/10` -> shares of train, dev and test."""
    parts = [p for p in text.replace("/", ",").split(",") if p.strip()]
    try:
        values = tuple(float(p) for p in parts)
    except ValueError:
        raise SynthError(f"split must be three numbers like 0.8,0.1,0.1, got {text!r}") from None
    if len(values) != 3 or any(v < 0 for v in values) or sum(values) <= 0:
        raise SynthError(f"split must be three non-negative numbers like 0.8,0.1,0.1, got {text!r}")
    return values  # type: ignore[return-value]


def task_document(
    *,
    name: str,
    env: Environment,
    role: str,
    description: str,
    prompt: str,
    distractors: dict[str, list[dict[str, Any]]],
    clock_step: dict[str, Any] | None,
    checks: list[dict[str, Any]],
    gold_replay: bool,
    response_checks: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    response: str,
    metadata: dict[str, Any],
) -> dict[str, Any]:
    """A task document (what `tasks/<name>.yaml` holds)."""
    steps: list[dict[str, Any]] = [
        {"id": "deploy", "type": "deploy_env", "env_id": ENV_ID, "env": env.name}
    ]
    if distractors:
        steps.append(
            {"id": "distractors", "type": "load_artifact", "env_id": ENV_ID, "records": distractors}
        )
    if clock_step is not None:
        steps.append({"id": "clock", "type": "sync_env_clock", "env_id": ENV_ID, **clock_step})
    steps.append(
        {
            "id": "agent",
            "type": "deploy_agent",
            "agent_name": AGENT,
            "role": role,
            "env_ids": [ENV_ID],
        }
    )
    steps.append(
        {
            "id": "ask",
            "type": "prompt_agent",
            "prompt_id": PROMPT_ID,
            "agent_name": AGENT,
            "prompt": prompt,
        }
    )
    if checks or gold_replay:
        outcome: dict[str, Any] = {
            "id": "outcome",
            "type": "env_outcome_verifier",
            "env_id": ENV_ID,
        }
        if checks:
            outcome["checks"] = checks
        if gold_replay:
            outcome["gold_replay"] = {"prompt_id": PROMPT_ID}
        steps.append(outcome)
    if response_checks:
        steps.append(
            {
                "id": "answer",
                "type": "agent_prompt_response_verifier",
                "prompt_id": PROMPT_ID,
                "checks": response_checks,
            }
        )
    return {
        "name": name,
        "description": description,
        "steps": steps,
        "solution": {PROMPT_ID: {"calls": calls, "response": response}},
        "metadata": metadata,
    }


class _Dumper(yaml.SafeDumper):
    """The pure-Python safe dumper (the same bytes on every machine), no `&id` aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(document: dict[str, Any]) -> str:
    """YAML text of a document."""
    return yaml.dump(
        document,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=100,
    )


def readme(env: Environment, report: dict[str, Any]) -> str:
    """The bundle's README (its description)."""
    splits = ", ".join(f"{k} {v}" for k, v in report["splits"].items())
    return (
        f"# {env.name} (synthesized tasks)\n\n"
        f"{report['accepted']} verifiable tasks synthesized by `agent-env synth tasks` from the "
        f"`{env.name}` environment ({report['env']['hash']}), seed {report['seed']}, "
        f"knobs {canonical_json(report['knobs'])}. Splits: {splits}.\n\n"
        "Every task passed its verifier trials: the reference solution scores 1.0, doing "
        "nothing scores 0, and every strict prefix of the solution scores below 1.0. "
        "See report.json for the acceptance rate and why candidates were dropped, and each "
        "task's `metadata` for its provenance (environment, generator, seed, knobs, walk).\n\n"
        f"Run them: `agent-env run <this folder> --agent oracle`.\n"
    )


def prepare_output(out: Path, env: Environment, *, force: bool = False) -> None:
    """Make `out` ready: empty, or a previous synthesis output (replaced), or `force`."""
    if env.source is None:
        raise SynthError("the environment has no document folder to copy into the bundle")
    folder = env.source.parent.resolve()
    target = out.resolve()
    if target == folder or folder in target.parents:
        raise SynthError(f"--out {out} is inside the environment's folder {folder}")
    envs = (out / "envs").resolve()
    for _, rel in env_folders(env)[1:]:
        placed = Path(os.path.normpath(envs / env.name / rel))
        if envs not in placed.parents or (placed.parent == envs and placed.name == env.name):
            raise SynthError(
                f"the environment composes {rel!r}, which cannot be placed inside the bundle's "
                "envs/ folder; move it next to the environment's folder"
            )
    if out.exists() and not out.is_dir():
        raise SynthError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not (out / REPORT_FILE).is_file() and not force:
            raise SynthError(
                f"--out {out} is not empty and holds no earlier synthesis output; "
                "choose another folder or pass --force"
            )
        for name in ("tasks", "envs"):
            if (out / name).is_dir():
                shutil.rmtree(out / name)
        for name in _OURS:
            if (out / name).is_file():
                (out / name).unlink()


def write_bundle(
    out: Path,
    env: Environment,
    tasks: list[tuple[str, str]],
    report: dict[str, Any],
    splits: dict[str, list[str]],
    graph: dict[str, Any] | None,
) -> None:
    """Write the bundle: the env copy, `tasks/<name>.yaml` (name, YAML text), the
    manifest files. Call `prepare_output` first."""
    assert env.source is not None
    out.mkdir(parents=True, exist_ok=True)
    env_dir = out / "envs" / env.name
    for folder, rel in env_folders(env):
        shutil.copytree(
            folder,
            Path(os.path.normpath(env_dir / rel)),
            ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"),
            dirs_exist_ok=True,
        )
    try:
        Environment.load(env_dir)
    except DocumentError as exc:
        raise SynthError(f"the environment's folder does not load once copied: {exc}") from None
    (out / "tasks").mkdir(exist_ok=True)
    for name, text in tasks:
        (out / "tasks" / f"{name}.yaml").write_text(text, encoding="utf-8")
    write_report(out, report)
    (out / "splits.json").write_text(_json(splits), encoding="utf-8")
    if graph is not None:
        (out / "graph.json").write_text(_json(graph), encoding="utf-8")
    (out / "README.md").write_text(readme(env, report), encoding="utf-8")


def write_report(out: Path, report: dict[str, Any]) -> None:
    """Write (or rewrite) `report.json`, e.g. a partial one when a run stops early."""
    out.mkdir(parents=True, exist_ok=True)
    (out / REPORT_FILE).write_text(_json(report), encoding="utf-8")


def _json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False) + "\n"
