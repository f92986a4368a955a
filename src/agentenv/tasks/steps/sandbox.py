"""Sandbox steps: deploy_sandbox, teardown_sandboxes, snapshot_agent_state; and the
sandbox side of load_artifact, run_code and collect_artifacts
(`setup` and `collection` hand those over here when a step names a sandbox, an artifact by
id, or files).

Sandboxes are found by `sandbox_name`, as upstream's are. An "agent's container" (a step
naming `agent_name`, or neither a sandbox nor an env) is, here, the workspace of the
environment the agent was deployed on: agents run in this process, and the workspace is
where their commands ran. Artifacts are the bundle's `artifacts/<name>/` folders (a folder
of one file is that file); what `collect_artifacts` gathers goes under the run folder's
`artifacts/<step id>/` (or a temporary folder) and later `load_artifact` steps can load it
with `artifact_from_step_id`.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from agentenv.env.tool import SYSTEM
from agentenv.sandbox import SANDBOXES, SandboxLimits
from agentenv.spec.wire import DataPart
from agentenv.tasks.context import DeployedEnv, TaskContext
from agentenv.tasks.sandboxes import DeployedSandbox
from agentenv.tasks.step import STEPS, Step, StepError, Unhonoured
from agentenv.workspace import WorkspaceError, WorkTree, record_of
from agentenv.workspace.tree import Ignore, clean_path, walk


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- finding things ----------------------------------------------------------------------


def workspace_env(ctx: TaskContext, agent_name: str | None, env_id: str | None) -> DeployedEnv:
    """The workspace environment a step means: `env_id`'s, else the one the agent (or the
    task's only agent) was deployed on that has a workspace."""
    if env_id is not None:
        deployed = ctx.env(env_id)
    else:
        agent = ctx.agent(agent_name if agent_name in ctx.agents else None)
        found = [e for e in agent.env_ids if ctx.env(e).env.workspace is not None]
        if len(found) != 1:
            raise StepError(
                f"agent {agent.name!r} works in {len(found)} workspace environments "
                f"({', '.join(found) or 'none'}); name the env_id or a sandbox_name"
            )
        deployed = ctx.env(found[0])
    if deployed.env.workspace is None:
        raise StepError(f"env {deployed.env_id!r} has no workspace (files) to work on")
    return deployed


async def env_sandbox(ctx: TaskContext, deployed: DeployedEnv, name: str) -> DeployedSandbox:
    """A fresh sandbox holding a workspace env's tree as it is now, at the env's workdir
    (`/app` when it names none); removed when the task run ends."""
    workspace = deployed.env.workspace
    assert workspace is not None
    box = DeployedSandbox.create(
        name,
        workspace.spec.sandbox.provider,
        workspace.limits,
        network=workspace.spec.sandbox.network,
        workdir=workspace.workdir or "/app",
    )
    tree = WorkTree(
        box.sandbox,
        workspace.ignore,
        workspace.max_file_bytes,
        workspace.max_tree_bytes,
        owns_sandbox=False,
    )
    tree.sync(deployed.snapshot().fork().list(workspace.collection))

    async def cleanup() -> None:
        box.destroy()

    ctx.cleanups.append(cleanup)
    return box


def artifact_files(ctx: TaskContext, artifact_id: str) -> dict[str, Path]:
    """An artifact's files by their paths inside it: `artifacts/<id>/` of the task or its
    bundle (a folder, or a single file)."""
    from agentenv.tasks.steps.setup import artifact_candidates

    candidates = artifact_candidates(ctx, artifact_id)
    for candidate in candidates:
        if candidate.is_file():
            return {candidate.name: candidate}
        if candidate.is_dir():
            return {
                path: Path(entry.path)
                for path, entry in sorted(
                    walk(candidate, Ignore(["__pycache__/", "artifact.toml"]))
                )
            }
    tried = ", ".join(str(c) for c in candidates)
    raise StepError(f"no artifact {artifact_id!r} (looked in: {tried})")


def collected_files(ctx: TaskContext, step_id: str) -> dict[str, Path]:
    """What an earlier collect_artifacts step gathered."""
    collected = ctx.artifacts.get("collected_artifacts", {})
    if step_id not in collected:
        raise StepError(
            f"step {step_id!r} collected no artifacts (is it a collect_artifacts step?)"
        )
    return {name: Path(path) for name, path in collected[step_id]["artifacts"].items()}


# -- deploy_sandbox ------------------------------------------------------------------------


class NetworkPolicy(_Params):
    """Upstream's network policy: `allow_all`, or an allowlist (not built here)."""

    mode: Literal["allow_all", "allowlist"] = "allow_all"
    allow_hosts: list[str] = Field(default_factory=list)
    allow_cidrs: list[str] = Field(default_factory=list)


class DeploySandboxParams(_Params):
    """Fields of `deploy_sandbox` (upstream's)."""

    sandbox_name: str
    sandbox_mode: Literal["vm", "container"]
    sandbox_type: str | None = Field(
        default=None,
        description="Ours (local, bwrap, plugins) or a fallback chain 'a,b'; upstream's "
        "'local' is this machine (bwrap when installed).",
    )
    image: str | None = None
    port: int | None = None
    memory_mb: int = 8192
    env_vars: dict[str, str] | None = None
    network_policy: NetworkPolicy | None = Field(
        default=None, description="None: no network (ours); allow_all: the host's network."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)
    timeout_seconds_per_command: float = Field(default=600, gt=0, description="Ours.")


_SIZING = "a sandbox here is a folder and namespaces on this machine; it has no size or lifetime"


@STEPS.add_builtin
class DeploySandbox(Step):
    """Make a sandbox other steps use by its `sandbox_name`: its working folder is `/app`,
    with `/loaded`, `/tests`, `/logs`, `/solution` and `/output` beside it. VM mode only;
    container mode needs Docker."""

    type_name = "deploy_sandbox"
    Params = DeploySandboxParams
    unhonoured = {
        name: Unhonoured(_SIZING)
        for name in ("cpu", "disk_size_gb", "ttl_seconds", "exposed_ports", "boot_mode")
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: DeploySandboxParams = self.params  # type: ignore[assignment]
        if p.sandbox_name in ctx.sandboxes:
            raise StepError(f"a sandbox named {p.sandbox_name!r} is already deployed")
        if p.sandbox_mode == "container":
            if "docker" not in SANDBOXES.names() or SANDBOXES.get("docker").unavailable():
                raise StepError("container mode needs Docker, which is not available here")
            if not p.image or not p.port:
                raise StepError("container mode needs 'image' and 'port'")
        if p.network_policy is not None and p.network_policy.mode == "allowlist":
            raise StepError(
                "network allowlists are not built; use allow_all, or no policy (no network)"
            )
        limits = SandboxLimits(timeout=p.timeout_seconds_per_command, memory_mb=p.memory_mb)
        box = DeployedSandbox.create(
            p.sandbox_name, p.sandbox_type, limits, network=p.network_policy is not None
        )
        ctx.sandboxes[p.sandbox_name] = box

        async def cleanup() -> None:
            box.destroy()

        ctx.cleanups.append(cleanup)
        return {
            "sandbox_name": p.sandbox_name,
            "sandbox_mode": "vm",
            "sandbox_type": box.sandbox_type,
            "workdir": box.workdir,
        }


# -- teardown_sandboxes --------------------------------------------------------------------


class TeardownParams(_Params):
    """Fields of `teardown_sandboxes` (upstream's)."""

    sandbox_names: list[str] = Field(default_factory=list)
    agent_names: list[str] = Field(default_factory=list)
    env_ids: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _something(self) -> TeardownParams:
        if not (self.sandbox_names or self.agent_names or self.env_ids):
            raise ValueError("name sandbox_names, agent_names or env_ids")
        return self


@STEPS.add_builtin
class TeardownSandboxes(Step):
    """Remove sandboxes now rather than at the end of the run; names not deployed are
    skipped. Agents and envs run in this process and have no sandbox of their own to stop:
    they are reported as skipped."""

    type_name = "teardown_sandboxes"
    Params = TeardownParams
    fail_task_on_error_default = False

    def static_problems(self, task: Any) -> list[tuple[tuple[Any, ...], str]]:
        """Upstream refuses `fail_task_on_error: true` here."""
        if self.spec.fail_task_on_error:
            return [(("fail_task_on_error",), "teardown_sandboxes never fails its task")]
        return []

    async def run(self, ctx: TaskContext) -> Any:
        p: TeardownParams = self.params  # type: ignore[assignment]
        torn: list[str] = []
        skipped = [*p.agent_names, *p.env_ids]
        for name in p.sandbox_names:
            box = ctx.sandboxes.get(name)
            if box is None or box.destroyed:
                skipped.append(name)
                continue
            box.destroy()
            torn.append(name)
        return {"torn_down": torn, "skipped": skipped}


# -- load_artifact / run_code in a sandbox ----------------------------------------------------


async def load_into(ctx: TaskContext, params: Any) -> dict[str, Any]:
    """`load_artifact` with an artifact by id (or from a collect step) into a sandbox, or
    into a workspace env's tree (through the gateway's data plane)."""
    if params.artifact_from_step_id or params.collected_artifacts_step_id:
        files = collected_files(
            ctx, params.artifact_from_step_id or params.collected_artifacts_step_id
        )
        source = params.artifact_from_step_id or params.collected_artifacts_step_id
    else:
        ids = [a.id for a in params.artifacts] if params.artifacts else [params.artifact_id]
        files = {}
        for artifact in ids:
            files.update(artifact_files(ctx, artifact))
        source = ",".join(ids)
    if params.sandbox_name is None and (params.env_id is not None or params.agent_name is not None):
        deployed = workspace_env(ctx, params.agent_name, params.env_id)
        workspace = deployed.env.workspace
        assert workspace is not None
        try:
            prefix = clean_path(params.destination_path or "", workspace.workdir)
        except WorkspaceError as exc:
            raise StepError(f"destination_path: {exc}") from None
        records = [
            record_of(f"{prefix}/{name}" if prefix else name, path.read_bytes())
            for name, path in files.items()
        ]
        parts = [DataPart(kind="data", data={workspace.collection: records})]
        await deployed.gateway.data_add(SYSTEM, parts, instance=deployed.instance)
        return {
            "env_id": deployed.env_id,
            "source": source,
            "files": sorted(r["path"] for r in records),
        }
    box = ctx.sandbox(params.sandbox_name)
    destination = (params.destination_path or "/loaded").rstrip("/") or "/"
    written = []
    for name, path in files.items():
        target = box.host_path(f"{destination}/{name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        target.chmod(path.stat().st_mode & 0o777)
        written.append(f"{destination}/{name}")
    return {
        "sandbox_name": box.name,
        "source": source,
        "destination_path": destination,
        "files": written,
    }


_RUNNER = """\
import importlib.util, json, sys
run_dir, entry, script = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path[:0] = [run_dir]
spec = importlib.util.spec_from_file_location("script", f"{run_dir}/{script}")
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open(f"{run_dir}/input.json") as f:
    given = json.load(f)
out = getattr(module, entry)(given)
with open(f"{run_dir}/output.json", "w") as f:
    json.dump(out, f)
"""


async def run_script_artifact(ctx: TaskContext, step_id: str, params: Any, timeout: float) -> Any:
    """`run_code` of a script artifact: `run(input)` in a sandbox (the named one, or a fresh
    one), its JSON result kept under `script_results[result_id]`."""
    files = {
        n: p for n, p in artifact_files(ctx, params.script_artifact_id).items() if n.endswith(".py")
    }
    if not files:
        raise StepError(f"artifact {params.script_artifact_id!r} holds no .py file")
    entry = params.script_file or (next(iter(files)) if len(files) == 1 else "run.py")
    if entry not in files:
        raise StepError(
            f"script {entry!r} is not in artifact {params.script_artifact_id!r} ({', '.join(files)})"
        )
    if params.sandbox_name is not None:
        box = ctx.sandbox(params.sandbox_name)
    else:
        box = DeployedSandbox.create(f"run_code-{step_id}", None)

        async def cleanup() -> None:
            box.destroy()

        ctx.cleanups.append(cleanup)
    run_dir = f"/output/run_code/{step_id}"
    host = box.host_path(run_dir)
    host.mkdir(parents=True, exist_ok=True)
    for name, path in files.items():
        (host / name).parent.mkdir(parents=True, exist_ok=True)
        (host / name).write_bytes(path.read_bytes())
    (host / "runner.py").write_text(_RUNNER)
    given: dict[str, Any] = {
        "args": params.args,
        "results": ctx.artifacts.get("script_results", {}),
    }
    if params.env_id is not None:
        deployed = ctx.env(params.env_id)
        served = deployed.served
        given["env"] = {
            "id": deployed.env_id,
            "url": getattr(served, "url", None),
            "mcp_url": getattr(served, "mcp_url", None),
        }
    (host / "input.json").write_text(json.dumps(given))
    result = await box.run(
        f"python3 {run_dir}/runner.py {run_dir} {params.entrypoint} {entry}", timeout=timeout
    )
    if result.timed_out:
        raise StepError(f"script {entry!r} ran past {timeout:g} s")
    if result.exit_code != 0:
        raise StepError(f"script {entry!r} exited {result.exit_code}: {result.stderr[-1500:]}")
    try:
        value = json.loads((host / "output.json").read_text())
    except (OSError, ValueError) as exc:
        raise StepError(f"script {entry!r} returned no JSON result: {exc}") from None
    result_id = params.result_id or step_id
    ctx.artifacts.setdefault("script_results", {})[result_id] = value
    return {"result_id": result_id, "result": value, "sandbox_name": box.name}


# -- collect_artifacts (files) ------------------------------------------------------------


async def collect_files(ctx: TaskContext, step_id: str, p: Any) -> dict[str, Any]:
    """`collect_artifacts` of files: `artifact_paths` relative to `base_path` (or absolute),
    else every file under `base_path`, from a sandbox or a workspace env's tree (`env_id`,
    or the agent's), copied to the run folder's `artifacts/<step id>/`; a missing file is
    skipped and listed. Later steps load the set with `artifact_from_step_id`."""
    base = (p.base_path or "/app/artifact").rstrip("/") or "/"
    if p.sandbox_name is not None:
        box = ctx.sandbox(p.sandbox_name)
    else:
        deployed = workspace_env(ctx, p.agent_name, p.env_id)
        box = await env_sandbox(ctx, deployed, f"collect-{step_id}")
    wanted = list(p.artifact_paths or [])
    seeded = ctx.seed.get(p.artifacts_key)
    if isinstance(seeded, str) and seeded.strip():
        wanted = [s.strip() for s in seeded.split(",") if s.strip()]
    found: dict[str, Path] = {}
    if wanted:
        for entry in wanted:
            path = box.host_path(entry, base)
            if path.is_file():
                found[entry.lstrip("/")] = path
    else:
        root = box.host_path(base)
        if root.is_dir():
            for rel, entry in sorted(walk(root, Ignore([]))):
                if Path(rel).name not in p.exclude_basenames and Path(entry.path).is_file():
                    found[rel] = Path(entry.path)
    if ctx.run_dir is not None:
        out_dir = ctx.run_dir / "artifacts" / step_id
    else:
        out_dir = Path(tempfile.mkdtemp(prefix="agentenv-collected-"))
    kept: dict[str, str] = {}
    for name, path in found.items():
        target = out_dir / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
        kept[name] = str(target)
    universe = {"id": step_id, "path": str(out_dir)} if kept else None
    record = {"artifacts": kept, "file_artifact_universe": universe}
    ctx.artifacts.setdefault("collected_artifacts", {})[step_id] = record
    missing = [w for w in wanted if w.lstrip("/") not in found]
    return {**record, "missing": missing}


# -- snapshot_agent_state --------------------------------------------------------------------


class SnapshotAgentParams(_Params):
    """Fields of `snapshot_agent_state` (upstream's)."""

    prompt_id: str
    agent_name: str | None = Field(default=None, validation_alias=AliasChoices("agent_name"))
    artifact_id: str | None = None
    env_id: str | None = None
    universe_artifact_id: str | None = None


@STEPS.add_builtin
class SnapshotAgentState(Step):
    """Keep what an agent had after a prompt, as upstream's two objects: `trajectory` (the
    prompt's messages and response) and `workspace` (the states of the envs it worked on,
    files included), under the run folder's `agent_snapshots/<artifact_id>/`."""

    type_name = "snapshot_agent_state"
    Params = SnapshotAgentParams

    async def run(self, ctx: TaskContext) -> Any:
        p: SnapshotAgentParams = self.params  # type: ignore[assignment]
        record = ctx.prompts.get(p.prompt_id)
        if record is None:
            raise StepError(
                f"no prompt {p.prompt_id!r} has run (snapshot_agent_state follows a prompt_agent)"
            )
        agent = ctx.agent(record.agent_name)
        artifact_id = p.artifact_id or f"{self.id}-agent-state"
        folder = (
            (ctx.run_dir or Path(tempfile.mkdtemp(prefix="agentenv-snap-")))
            / "agent_snapshots"
            / artifact_id
        )
        folder.mkdir(parents=True, exist_ok=True)
        trajectory = {
            "prompt_id": p.prompt_id,
            "agent_name": agent.name,
            "prompt": record.prompt,
            "messages": record.messages,
            "response": record.response,
        }
        env_ids = [p.env_id] if p.env_id else agent.env_ids
        workspace = {e: ctx.env(e).snapshot().to_dict() for e in env_ids}
        (folder / "trajectory").write_text(json.dumps(trajectory, indent=1, default=str))
        (folder / "workspace").write_text(json.dumps(workspace, indent=1))
        entry = {
            "id": artifact_id,
            "path": str(folder),
            "source_agent_name": agent.name,
            "capture_step_id": self.id,
        }
        ctx.artifacts.setdefault("agent_snapshots", []).append(entry)
        return entry
