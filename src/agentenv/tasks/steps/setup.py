"""Setup steps: reset_env, load_artifact, run_code, snapshot_env (their sandbox forms are in
`steps.sandbox`).

`load_artifact` seeds records through the gateway's data plane (`data/add`), exactly as a
remote harness would; `reset_env` and `snapshot_env` use the gateway's state control.
`run_code` runs a local process and is NOT a sandbox (see its docstring).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from time import perf_counter
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from agentenv.env.tool import SYSTEM
from agentenv.gateway import GatewayError
from agentenv.sandbox._process import read_capped
from agentenv.spec.errors import DocumentError
from agentenv.spec.loader import read_document
from agentenv.spec.wire import DataPart, Part
from agentenv.tasks.context import TaskContext
from agentenv.tasks.step import STEPS, Step, StepError, Unhonoured

ARTIFACTS_FOLDER = "artifacts"


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- reset_env --------------------------------------------------------------------------


class ResetEnvParams(_Params):
    """Fields of `reset_env`."""

    env_id: str | None = Field(default=None, description="Default: the only deployed env.")


@STEPS.add_builtin
class ResetEnv(Step):
    """Put an environment's state back to its seed.

    Only the records are reset: the clock, registered triggers, tool-access rules, the
    trajectory and stored text/file parts stay as they are (use `sync_env_clock` and
    `modify_env_tool_access` for those).
    """

    type_name = "reset_env"
    Params = ResetEnvParams
    fail_task_on_error_default = False  # the protocol's default for this step

    async def run(self, ctx: TaskContext) -> Any:
        p: ResetEnvParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        try:
            await deployed.gateway.restore(SYSTEM, deployed.env.seed, instance=deployed.instance)
        except GatewayError as exc:
            raise StepError(f"env {deployed.env_id!r}: {exc}") from None
        return {"env_id": deployed.env_id, "state_hash": deployed.snapshot().hash()}


# -- load_artifact ----------------------------------------------------------------------


class ArtifactRef(_Params):
    """An artifact by id (upstream's `artifacts` entries); versions are not kept here."""

    id: str
    version: int | None = None


class LoadArtifactParams(_Params):
    """Fields of `load_artifact`: records into an env's data plane (exactly one of `parts`,
    `path` or `records`), or upstream's artifact by id (`artifact_id`, `artifacts`, or
    `artifact_from_step_id`) into a sandbox (`sandbox_name`) or a workspace env's tree."""

    artifact_id: str | None = Field(default=None, description="A bundle artifacts/<id>/ folder.")
    artifact_version: int | None = None
    artifacts: list[ArtifactRef] | None = None
    artifact_from_step_id: str | None = Field(
        default=None, description="What a collect_artifacts step gathered."
    )
    collected_artifacts_step_id: str | None = None
    destination_path: str | None = Field(
        default=None,
        description="Where the files go: default /loaded (a sandbox), the tree's root (an env).",
    )
    sandbox_name: str | None = None
    agent_name: str | None = Field(
        default=None, description="The agent's workspace: the workspace env it was deployed on."
    )

    env_id: str | None = Field(default=None, description="Default: the only deployed env.")
    parts: list[Part] | None = Field(default=None, description="A2A parts, as `data/add` takes.")
    path: str | None = Field(
        default=None,
        description="A JSON, YAML or JSONL file of `{collection: [records]}`, relative to the "
        "task's folder or the bundle's artifacts/ folder.",
    )
    records: dict[str, Any] | None = Field(
        default=None, description="Inline `{collection: [records]}`."
    )
    collection: str | None = Field(
        default=None,
        description="With `path`: the file holds a plain list of records for this collection.",
    )
    reset: bool = Field(default=False, description="Empty the env's data first (`data/reset`).")

    @property
    def by_id(self) -> bool:
        """Whether this loads an artifact by id (upstream's form) rather than records."""
        return any(
            getattr(self, n) is not None
            for n in (
                "artifact_id",
                "artifacts",
                "artifact_from_step_id",
                "collected_artifacts_step_id",
            )
        )

    @model_validator(mode="after")
    def _one_source(self) -> LoadArtifactParams:
        if self.by_id:
            sources = [
                n
                for n in (
                    "artifact_id",
                    "artifacts",
                    "artifact_from_step_id",
                    "collected_artifacts_step_id",
                )
                if getattr(self, n) is not None
            ]
            if len(sources) != 1 or any(
                getattr(self, n) is not None for n in ("parts", "path", "records")
            ):
                raise ValueError(
                    "give one artifact source (artifact_id, artifacts or artifact_from_step_id)"
                )
            if self.sandbox_name is None and self.env_id is None and self.agent_name is None:
                raise ValueError("name where to load it: sandbox_name, env_id or agent_name")
            return self
        if self.sandbox_name is not None or self.destination_path is not None:
            raise ValueError("a sandbox or destination_path takes an artifact by id (artifact_id)")
        given = [n for n in ("parts", "path", "records") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of 'parts', 'path' or 'records'")
        if self.collection is not None and self.path is None:
            raise ValueError("'collection' goes with 'path'")
        return self


def artifact_candidates(ctx: TaskContext, ref: str) -> list[Path]:
    """Where a relative artifact path is looked for, in order: the task's folder, its
    artifacts/ folder, and (for a task in `<bundle>/tasks/`) the bundle's artifacts/."""
    path = Path(ref)
    if path.is_absolute():
        return [path]
    base = ctx.base_dir
    out = [base / path, base / ARTIFACTS_FOLDER / path]
    if base.name == "tasks":
        out.append(base.parent / ARTIFACTS_FOLDER / path)
    return out


def _records_from_file(path: Path, collection: str | None) -> dict[str, Any]:
    try:
        data = read_document(path)
    except DocumentError as exc:
        raise StepError(str(exc)) from None
    if collection is not None:
        rows = data if isinstance(data, list) else [data]
        return {collection: rows}
    if isinstance(data, dict):
        return data
    if isinstance(data, list) and path.suffix == ".jsonl":
        merged: dict[str, list[Any]] = {}
        for i, line in enumerate(data):
            if not isinstance(line, dict):
                raise StepError(f"{path}: line {i + 1} is not an object {{collection: [records]}}")
            for coll, rows in line.items():
                merged.setdefault(coll, []).extend(rows if isinstance(rows, list) else [rows])
        return merged
    raise StepError(
        f"{path}: expected an object {{collection: [records]}} "
        "(or give 'collection' for a plain list of records)"
    )


@STEPS.add_builtin
class LoadArtifact(Step):
    """Seed an environment through its data plane (`data/add`), all or nothing.

    Data parts upsert records (`{collection: [records]}`); text and file parts are stored
    as they are and come back from `data/get`.
    """

    type_name = "load_artifact"
    Params = LoadArtifactParams
    unhonoured = {
        "urls": Unhonoured("downloading artifacts from URLs is not built", refuse=True),
        "container_name": Unhonoured("Docker containers are not available here", refuse=True),
        "env_step_id": Unhonoured("an env id is deployed once per task here"),
        "snapshot_after_load": Unhonoured("use a snapshot_env step", honoured=(False,)),
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: LoadArtifactParams = self.params  # type: ignore[assignment]
        if p.by_id:
            from agentenv.tasks.steps.sandbox import load_into

            try:
                return await load_into(ctx, p)
            except GatewayError as exc:
                raise StepError(str(exc)) from None
        deployed = ctx.env(p.env_id)
        source: str
        if p.parts is not None:
            parts = list(p.parts)
            source = "parts"
        elif p.records is not None:
            parts = [DataPart(kind="data", data=p.records)]
            source = "records"
        else:
            assert p.path is not None
            candidates = artifact_candidates(ctx, p.path)
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                tried = ", ".join(str(c) for c in candidates)
                raise StepError(f"no artifact file {p.path!r} (looked in: {tried})")
            parts = [DataPart(kind="data", data=_records_from_file(found, p.collection))]
            source = str(found)
        try:
            if p.reset:
                await deployed.gateway.data_reset(SYSTEM, instance=deployed.instance)
            written = await deployed.gateway.data_add(SYSTEM, parts, instance=deployed.instance)
        except GatewayError as exc:
            raise StepError(f"env {deployed.env_id!r}: {exc}") from None
        counts: dict[str, int] = {}
        for part in parts:
            if isinstance(part, DataPart):
                for coll, rows in part.data.items():
                    counts[coll] = counts.get(coll, 0) + (
                        len(rows) if isinstance(rows, list) else 1
                    )
        return {
            "env_id": deployed.env_id,
            "source": source,
            "records": written,
            "collections": counts,
            "parts": len(parts),
            "state_hash": deployed.snapshot().hash(),
        }


# -- run_code ---------------------------------------------------------------------------


class RunCodeParams(_Params):
    """Fields of `run_code` (its time limit is the step's `timeout_seconds`)."""

    code: str | None = Field(default=None, description="Python source, run with this Python.")
    script_artifact_id: str | None = Field(
        default=None,
        description="Upstream's: an artifact's script whose `run(input)` runs in a sandbox.",
    )
    script_artifact_version: int | None = None
    script_file: str | None = None
    entrypoint: str = "run"
    args: dict[str, Any] = Field(default_factory=dict)
    result_id: str | None = None
    sandbox_name: str | None = None
    env_id: str | None = None
    agent_name: str | None = None
    command: str | list[str] | None = Field(
        default=None,
        description="A command: a string runs through the shell, a list runs as it is.",
    )
    cwd: str | None = Field(default=None, description="Relative to the task's folder.")
    env_vars: dict[str, str] = Field(default_factory=dict)
    allow_failure: bool = Field(default=False, description="A non-zero exit is not an error.")
    max_output_chars: int = Field(default=10_000, ge=0)

    @model_validator(mode="after")
    def _one_program(self) -> RunCodeParams:
        given = [
            n for n in ("code", "command", "script_artifact_id") if getattr(self, n) is not None
        ]
        if len(given) != 1:
            raise ValueError("give exactly one of 'code', 'command' or 'script_artifact_id'")
        if self.script_artifact_id is None and (self.sandbox_name or self.script_file):
            raise ValueError("sandbox_name and script_file go with script_artifact_id")
        if isinstance(self.command, list) and not self.command:
            raise ValueError("'command' is an empty list")
        return self


def _text(head: bytes, dropped: bool, limit: int) -> tuple[str, bool]:
    text = head.decode("utf-8", "replace")
    if len(text) <= limit and not dropped:
        return text, False
    return text[:limit] + f"\n... [output cut at {limit} characters]", True


def _kill(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if os.name == "posix":
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - not POSIX
            proc.kill()


@STEPS.add_builtin
class RunCode(Step):
    """Run a Python snippet (`code`) or a command in a local subprocess; or upstream's
    script artifact (`script_artifact_id`: its `run(input)`, in a sandbox, see
    `steps.sandbox.run_script_artifact`).

    `code` and `command` ARE NOT A SANDBOX: the process runs as the current user, on this machine, with
    this process's environment variables (plus `env_vars`), and can read and write
    anything the user can. Run only task documents you trust. The step's
    `timeout_seconds` (default 300) bounds it; on a timeout the process and its children
    are killed. Exit code, stdout and stderr (cut to `max_output_chars`) are the output;
    a non-zero exit fails the step unless `allow_failure` is set.
    """

    type_name = "run_code"
    Params = RunCodeParams
    default_timeout = 300.0

    async def run(self, ctx: TaskContext) -> Any:
        p: RunCodeParams = self.params  # type: ignore[assignment]
        if p.script_artifact_id is not None:
            from agentenv.tasks.steps.sandbox import run_script_artifact

            timeout = self.spec.timeout_seconds or 600.0
            return await run_script_artifact(ctx, self.id, p, timeout)
        cwd = ctx.base_dir if p.cwd is None else ctx.base_dir / p.cwd
        if not cwd.is_dir():
            raise StepError(f"cwd {str(cwd)!r} is not a folder")
        env = {**os.environ, **p.env_vars}
        if ctx.run_dir is not None:
            env.setdefault("AGENTENV_RUN_DIR", str(ctx.run_dir))
        spawn: dict[str, Any] = {
            "cwd": cwd,
            "env": env,
            "stdin": asyncio.subprocess.DEVNULL,
            "stdout": asyncio.subprocess.PIPE,
            "stderr": asyncio.subprocess.PIPE,
            "start_new_session": os.name == "posix",
        }
        started = perf_counter()
        try:
            if p.code is not None:
                proc = await asyncio.create_subprocess_exec(sys.executable, "-c", p.code, **spawn)
            elif isinstance(p.command, str):
                proc = await asyncio.create_subprocess_shell(p.command, **spawn)
            else:
                assert p.command is not None
                proc = await asyncio.create_subprocess_exec(*p.command, **spawn)
        except OSError as exc:
            raise StepError(f"cannot start the process: {exc}") from None
        try:
            limit = p.max_output_chars * 4  # bytes: enough for that many UTF-8 characters
            (out, cut_out), (err, cut_err), _ = await asyncio.gather(
                read_capped(proc.stdout, limit), read_capped(proc.stderr, limit), proc.wait()
            )
        except BaseException:  # timed out or cancelled: leave nothing running
            _kill(proc)
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
            raise
        stdout, cut_out = _text(out, cut_out, p.max_output_chars)
        stderr, cut_err = _text(err, cut_err, p.max_output_chars)
        code = proc.returncode
        if code != 0 and not p.allow_failure:
            tail = (stderr or stdout).strip()[-1000:]
            raise StepError(f"exited with code {code}" + (f": {tail}" if tail else ""))
        return {
            "exit_code": code,
            "stdout": stdout,
            "stderr": stderr,
            "truncated": cut_out or cut_err,
            "duration_seconds": round(perf_counter() - started, 3),
        }


# -- snapshot_env -----------------------------------------------------------------------


class SnapshotEnvParams(_Params):
    """Fields of `snapshot_env`."""

    env_id: str | None = Field(default=None, description="Default: the only deployed env.")
    name: str | None = Field(
        default=None,
        validation_alias=AliasChoices("name", "snapshot_id"),
        description="Default: the step's id (the protocol spells it `snapshot_id`).",
    )


@STEPS.add_builtin
class SnapshotEnv(Step):
    """Keep a copy of an environment's state now, as `ctx.snapshots[name][env_id]`, for
    later verifiers (e.g. to compare before and after)."""

    type_name = "snapshot_env"
    Params = SnapshotEnvParams
    unhonoured = {
        "env_instance_id": Unhonoured("each env id has one instance in a task here"),
        "env_step_id": Unhonoured("an env id is deployed once per task here"),
        "gateway_url": Unhonoured("snapshots are of the task's own envs", refuse=True),
        "original_universe_artifact_id": Unhonoured("universe exports are not built"),
        "export_timeout_seconds": Unhonoured("a snapshot is an in-memory copy"),
        "include_env_trajectory": Unhonoured("the run folder keeps the trajectory"),
        "include_env_changes": Unhonoured("the run folder keeps the trajectory"),
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: SnapshotEnvParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        name = p.name or self.id
        snapshot = deployed.snapshot()
        ctx.snapshots.setdefault(name, {})[deployed.env_id] = snapshot
        return {"name": name, "env_id": deployed.env_id, "state_hash": snapshot.hash()}
