"""Harbor (Terminal-Bench) task directories, run as our tasks.

A Harbor task is a folder: `instruction.md` (the prompt), `task.toml` (timeouts and
metadata), `environment/Dockerfile` (its build context beside it), `solution/solve.sh` (the
reference solution) and `tests/test.sh` (writes a reward to `/logs/verifier/reward.txt`).

Without Docker, the environment is built on this machine: the Dockerfile's `WORKDIR`,
`COPY`/`ADD` (of local files), `ENV`/`ARG` and `RUN` lines run in a bwrap sandbox whose
working folder is the `WORKDIR` (default `/app`), and the folder they leave becomes a
workspace environment's seed tree. The host stands in for the base image (`FROM` is noted,
not pulled): a `RUN` that installs packages passes only when the host already has every
one of them, and anything we cannot honour (a `COPY --from`, a remote `ADD`, a `COPY`
outside the `WORKDIR`, a `RUN` that fails) refuses the task with the line that needs it.

The task becomes: deploy the workspace env, prompt the agent with the instruction, and
grade with `run_container_unit_tests_verifier` running `bash /tests/test.sh` over the
agent's tree with the task's `tests/` at `/tests` (the agent never sees them), scored by
the reward file. The oracle's solution is one `bash` call running `solve.sh`.
"""

from __future__ import annotations

import atexit
import json
import shlex
import shutil
import subprocess
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentenv.sandbox import BwrapProvider
from agentenv.spec.errors import DocumentError
from agentenv.spec.task import TaskSpec

INSTRUCTION = "instruction.md"
TASK_TOML = "task.toml"
REWARD_PATH = "/logs/verifier/reward.txt"
_INSTALLERS = {"apt-get", "apt", "apk", "yum", "dnf"}


def is_harbor_task(path: Path) -> bool:
    """Whether a folder is a Harbor task directory."""
    return (path / INSTRUCTION).is_file() and (path / TASK_TOML).is_file()


def harbor_tasks(path: Path) -> list[Path]:
    """The Harbor task directories a folder is or holds (one level down)."""
    if is_harbor_task(path):
        return [path]
    return sorted(p for p in path.iterdir() if p.is_dir() and is_harbor_task(p))


@dataclass
class Build:
    """What building a Harbor environment gave: the tree, its workdir, its variables."""

    tree: Path
    workdir: str = "/app"
    env: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _instructions(dockerfile: Path) -> list[tuple[int, str, str]]:
    """(line number, INSTRUCTION, rest) of a Dockerfile, continuations joined."""
    out: list[tuple[int, str, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(dockerfile.read_text().splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        pending += line
        word, _, rest = pending.strip().partition(" ")
        out.append((start, word.upper(), rest.strip()))
        pending = ""
    return out


def _words(rest: str) -> list[str]:
    if rest.startswith("["):
        try:
            value = json.loads(rest)
        except ValueError:
            value = None
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return value
    return shlex.split(rest)


def _env_pairs(rest: str) -> dict[str, str]:
    words = shlex.split(rest)
    if words and "=" not in words[0]:  # the old form: ENV KEY value with spaces
        return {words[0]: " ".join(words[1:])}
    return dict(w.split("=", 1) for w in words if "=" in w)


def _missing_packages(command: str) -> tuple[bool, list[str]]:
    """Whether a RUN line installs packages, and those the host lacks."""
    words = shlex.split(command.replace("&&", " && ").replace(";", " ; "))
    installs = False
    missing: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word in _INSTALLERS and i + 1 < len(words) and words[i + 1] in ("install", "add"):
            installs = True
            j = i + 2
            while j < len(words) and words[j] not in ("&&", ";", "||"):
                if not words[j].startswith("-"):
                    name = words[j].split("=")[0]
                    found = (
                        subprocess.run(["dpkg", "-s", name], capture_output=True).returncode == 0
                    )
                    if not found and shutil.which(name) is None:
                        missing.append(name)
                j += 1
            i = j
        elif word in ("pip", "pip3") and i + 1 < len(words) and words[i + 1] == "install":
            installs = True
            j = i + 2
            while j < len(words) and words[j] not in ("&&", ";", "||"):
                if not words[j].startswith("-"):
                    name = words[j].split("==")[0].split(">=")[0]
                    probe = ["python3", "-m", "pip", "show", "-q", name]
                    if subprocess.run(probe, capture_output=True).returncode != 0:
                        missing.append(name)
                j += 1
            i = j
        else:
            i += 1
    return installs, missing


def _without_installs(command: str) -> str:
    """A RUN line with its package installs (all satisfied here) replaced by `true`."""
    import re

    parts = re.split(r"(&&|\|\||;)", command)
    out = []
    for part in parts:
        words = part.split()
        installer = len(words) > 1 and (
            (words[0] in _INSTALLERS and words[1] in ("install", "add", "update"))
            or (words[0] in ("pip", "pip3") and words[1] == "install")
        )
        out.append(" true " if installer else part)
    return "".join(out)


def _refuse(task: Path, line: int, text: str, why: str) -> DocumentError:
    return DocumentError(task / "environment" / "Dockerfile", f"line {line}", f"{text!r}: {why}")


async def build_environment(task: Path) -> Build:
    """Run a Harbor task's Dockerfile on this machine (see the module's docstring)."""
    from agentenv.tasks.sandboxes import DeployedSandbox

    context = task / "environment"
    dockerfile = context / "Dockerfile"
    tree = Path(tempfile.mkdtemp(prefix=f"agentenv-harbor-{task.name}-"))
    atexit.register(shutil.rmtree, tree, True)
    if not dockerfile.is_file():
        return Build(tree=tree, notes=["no environment/Dockerfile: an empty /app"])
    steps = _instructions(dockerfile)
    workdir = next((_words(r)[0] for _, w, r in steps if w == "WORKDIR"), "/app")
    if BwrapProvider.unavailable() is not None:
        raise DocumentError(
            dockerfile,
            "",
            f"building a Harbor environment needs bwrap here: {BwrapProvider.unavailable()}",
        )
    box = DeployedSandbox.create(f"build-{task.name}", "bwrap", workdir=workdir)
    build = Build(tree=tree, workdir=workdir)
    cwd = workdir
    try:
        for line, word, rest in steps:
            text = f"{word} {rest}"
            if word == "FROM":
                build.notes.append(f"FROM {rest}: this machine stands in for the image")
            elif word == "WORKDIR":
                target = _words(rest)[0]
                target = target if target.startswith("/") else f"{cwd.rstrip('/')}/{target}"
                if target != workdir and not target.startswith(workdir.rstrip("/") + "/"):
                    raise _refuse(
                        task, line, text, f"a second WORKDIR outside {workdir} is not built"
                    )
                box.host_path(target).mkdir(parents=True, exist_ok=True)
                cwd = target
            elif word in ("ENV", "ARG"):
                pairs = _env_pairs(rest)
                if word == "ARG":
                    pairs = {k: v for k, v in pairs.items() if v}
                build.env.update(pairs)
            elif word in ("COPY", "ADD"):
                words = [
                    w
                    for w in _words(rest)
                    if not w.startswith("--chown") and not w.startswith("--chmod")
                ]
                if any(w.startswith("--") for w in words):
                    raise _refuse(
                        task,
                        line,
                        text,
                        "COPY flags such as --from (multi-stage builds) need Docker",
                    )
                *sources, dest = words
                if any("://" in s for s in sources):
                    raise _refuse(task, line, text, "ADD of a URL needs the network; not built")
                dest_abs = dest if dest.startswith("/") else f"{cwd.rstrip('/')}/{dest}"
                if dest_abs != workdir and not dest_abs.startswith(workdir.rstrip("/") + "/"):
                    raise _refuse(
                        task,
                        line,
                        text,
                        f"only files under the WORKDIR ({workdir}) become the tree",
                    )
                for source in sources:
                    _copy(
                        context,
                        source,
                        box.host_path(dest_abs),
                        dest.endswith("/") or len(sources) > 1,
                        task,
                        line,
                        text,
                    )
            elif word == "RUN":
                command = " ".join(_words(rest)) if rest.startswith("[") else rest
                installs, missing = _missing_packages(command)
                if installs and missing:
                    raise _refuse(
                        task,
                        line,
                        text,
                        f"installs {', '.join(missing)}, which this machine lacks (needs Docker)",
                    )
                if installs:
                    build.notes.append(f"line {line}: packages already on this machine")
                    command = _without_installs(command)
                done = await box.run(command, cwd=cwd, env=build.env, timeout=600)
                if not done.ok:
                    raise _refuse(
                        task,
                        line,
                        text,
                        f"failed here (exit {done.exit_code}): {done.stderr.strip()[-300:]}",
                    )
            else:
                build.notes.append(f"line {line}: {word} is not needed here")
        shutil.copytree(box.sandbox.workspace, tree, symlinks=True, dirs_exist_ok=True)
    finally:
        box.destroy()
    return build


def _copy(
    context: Path, source: str, dest: Path, into: bool, task: Path, line: int, text: str
) -> None:
    matches = (
        sorted(context.glob(source)) if any(c in source for c in "*?[") else [context / source]
    )
    for path in matches:
        resolved = path.resolve()
        if context.resolve() not in [resolved, *resolved.parents]:
            raise _refuse(task, line, text, f"{source!r} is outside the build context")
        if not path.exists():
            raise _refuse(task, line, text, f"no {source!r} in environment/")
        if path.is_dir():
            shutil.copytree(path, dest, symlinks=True, dirs_exist_ok=True)
        else:
            target = dest / path.name if into or dest.is_dir() else dest
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def _toml(task: Path) -> dict[str, Any]:
    try:
        return tomllib.loads((task / TASK_TOML).read_text())
    except tomllib.TOMLDecodeError as exc:
        raise DocumentError(task / TASK_TOML, "", f"not TOML: {exc}") from None


def _env_document(task: Path, build: Build, seed: str, agent_timeout: float) -> dict[str, Any]:
    return {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": _name(task.name),
        "description": f"Harbor task {task.name}, built from environment/Dockerfile",
        "workspace": {
            "seed": {"folder": seed},
            "sandbox": {
                "provider": "bwrap",
                "workdir": build.workdir,
                "timeout": agent_timeout,
                "env": build.env,
            },
        },
    }


def _task_document(
    task: Path, config: dict[str, Any], build: Build, env_ref: str, tests_ref: str
) -> dict[str, Any]:
    """The task: deploy the env, prompt with the instruction, grade with the tests."""
    if not (task / "tests" / "test.sh").is_file():
        raise DocumentError(task, "tests/test.sh", "a Harbor task needs tests/test.sh")
    agent_timeout = float(config.get("agent", {}).get("timeout_sec", 600))
    verifier_timeout = float(config.get("verifier", {}).get("timeout_sec", 600))
    solve = task / "solution" / "solve.sh"
    solution: dict[str, Any] = {}
    if solve.is_file():
        solution = {
            "main": {
                "calls": [{"tool": "bash", "args": {"command": solve.read_text()}}],
                "response": "Done: ran the reference solution.",
            }
        }
    steps = [
        {"id": "deploy", "type": "deploy_env", "env_id": "task", "env": env_ref},
        {"id": "agent", "type": "deploy_agent", "agent_name": "agent", "env_ids": ["task"]},
        {
            "id": "solve",
            "type": "prompt_agent",
            "prompt_id": "main",
            "agent_name": "agent",
            "prompt": (task / INSTRUCTION).read_text(),
            "timeout_seconds": agent_timeout,
        },
        {
            "id": "tests",
            "type": "run_container_unit_tests_verifier",
            "env_id": "task",
            "load": {tests_ref: "/tests"},
            "command": "bash /tests/test.sh",
            "reward_path": REWARD_PATH,
            "timeout_sec": verifier_timeout,
        },
    ]
    metadata = {"harbor": {"source": task.name, "notes": build.notes, **config.get("metadata", {})}}
    return {
        "name": _name(task.name),
        "description": f"Harbor task {task.name}",
        "steps": steps,
        "solution": solution,
        "metadata": metadata,
    }


async def harbor_task_spec(task: Path) -> TaskSpec:
    """Our task document for a Harbor task directory (its environment built, see
    `build_environment`); DocumentError naming what cannot be honoured."""
    task = task.resolve()
    config = _toml(task)
    agent_timeout = float(config.get("agent", {}).get("timeout_sec", 600))
    build = await build_environment(task)
    env_file = build.tree.parent / f"{build.tree.name}.yaml"
    document = _env_document(task, build, str(build.tree), agent_timeout)
    env_file.write_text(yaml.safe_dump(document, sort_keys=False))
    atexit.register(env_file.unlink, True)
    spec = _task_document(task, config, build, str(env_file), str(task / "tests"))
    return TaskSpec.model_validate(spec)


async def import_harbor_task(task: Path, bundle: Path) -> Path:
    """Write a Harbor task into a bundle, to run and edit as ours: `envs/<name>/` (the
    built tree and its environment.yaml), `artifacts/<name>-tests/` (the held-back tests)
    and `tasks/<name>.yaml` (with the reference solution). The task file's path."""
    task = task.resolve()
    config = _toml(task)
    name = _name(task.name)
    agent_timeout = float(config.get("agent", {}).get("timeout_sec", 600))
    build = await build_environment(task)
    env_dir = bundle / "envs" / name
    if env_dir.exists() or (bundle / "tasks" / f"{name}.yaml").exists():
        raise DocumentError(bundle, name, "the bundle already has a task or env of this name")
    shutil.copytree(build.tree, env_dir / "tree", symlinks=True)
    document = _env_document(task, build, "tree", agent_timeout)
    (env_dir / "environment.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    shutil.copytree(task / "tests", bundle / "artifacts" / f"{name}-tests", symlinks=True)
    spec = _task_document(task, config, build, name, f"{name}-tests")
    TaskSpec.model_validate(spec)  # what we write must load
    out = bundle / "tasks" / f"{name}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(spec, sort_keys=False, allow_unicode=True))
    return out


def _name(text: str) -> str:
    cleaned = "".join(c if c.isalnum() or c in "._-" else "-" for c in text).strip("-.")
    return cleaned or "harbor-task"
