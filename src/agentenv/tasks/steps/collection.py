"""Collection steps: collect_artifacts (its file form is in `steps.sandbox`).

`collect_artifacts` gathers what a run produced (each env's state, each env's trajectory,
the prompts and answers) into `ctx.artifacts[<step id>]`, and, when the run has a run
folder, writes it there as files:

    <run_dir>/artifacts/<name>/<env_id>.state.json        {collection: [records]}
    <run_dir>/artifacts/<name>/<env_id>.trajectory.jsonl  the records (GET /trajectory?format=records)
    <run_dir>/artifacts/<name>/prompts.json               [{prompt_id, prompt, response, ...}]
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agentenv.tasks.context import PromptRecord, TaskContext
from agentenv.tasks.step import STEPS, Step, Unhonoured

Artifact = Literal["state", "trajectory", "prompts"]
ALL_ARTIFACTS: list[Artifact] = ["state", "trajectory", "prompts"]
ARTIFACTS_FOLDER = "artifacts"


class CollectArtifactsParams(BaseModel):
    """Fields of `collect_artifacts`."""

    model_config = ConfigDict(extra="forbid")

    env_id: str | None = Field(default=None, description="One env (or use env_ids).")
    env_ids: list[str] | None = Field(default=None, description="Default: every deployed env.")
    which: Artifact | list[Artifact] = Field(
        default_factory=lambda: list(ALL_ARTIFACTS),
        description="What to collect: state, trajectory, prompts (default: all three).",
    )
    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Folder under <run_dir>/artifacts/; default: the step's id.",
    )
    sandbox_name: str | None = Field(default=None, description="Files from this sandbox.")
    agent_name: str | None = Field(
        default=None, description="Files from the workspace env the agent works in."
    )
    base_path: str | None = Field(
        default=None, description="Files under this folder (upstream's default: /app/artifact)."
    )
    artifact_paths: list[str] | None = None
    exclude_basenames: list[str] = Field(default_factory=list)
    artifacts_key: str = "expected_artifacts"

    @property
    def of_files(self) -> bool:
        """Whether this collects files (upstream's form) rather than states and records."""
        return any(
            getattr(self, n) is not None
            for n in ("sandbox_name", "agent_name", "base_path", "artifact_paths")
        )

    @model_validator(mode="after")
    def _one_env_field(self) -> CollectArtifactsParams:
        if self.env_id is not None and self.env_ids is not None:
            raise ValueError("give 'env_id' or 'env_ids', not both")
        return self

    def kinds(self) -> list[Artifact]:
        """`which` as a list without repeats, in the order given."""
        items = [self.which] if isinstance(self.which, str) else self.which
        return list(dict.fromkeys(items))


def prompt_json(record: PromptRecord) -> dict[str, Any]:
    """A prompt record as JSON data."""
    return {
        "prompt_id": record.prompt_id,
        "agent_name": record.agent_name,
        "prompt": record.prompt,
        "response": record.response,
        "error": record.error,
        "started": record.started.isoformat(),
        "ended": record.ended.isoformat() if record.ended else None,
        "start_seq": record.start_seq,
        "end_seq": record.end_seq,
    }


def _file_name(env_id: str) -> str:
    """An env id as a safe file name (ids are free text: no separators, no leading dot)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", env_id).lstrip(".") or "_"


def _write(path: Path, text: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return str(path)


@STEPS.add_builtin
class CollectArtifacts(Step):
    """Gather state, trajectories and prompts into `ctx.artifacts` and the run folder; or,
    with upstream's file fields (`sandbox_name`, `agent_name`, `base_path`,
    `artifact_paths`), files from a sandbox or a workspace env's tree
    (`steps.sandbox.collect_files`)."""

    type_name = "collect_artifacts"
    Params = CollectArtifactsParams
    unhonoured = {
        "manifest_step_id": Unhonoured(
            "a manifest from an agent's structured output is not built", refuse=True
        ),
        "container_name": Unhonoured("Docker containers are not available here", refuse=True),
        "universe_id_suffix": Unhonoured("collected files are kept under the step's id"),
    }

    async def run(self, ctx: TaskContext) -> Any:
        p: CollectArtifactsParams = self.params  # type: ignore[assignment]
        if p.of_files:
            from agentenv.tasks.steps.sandbox import collect_files

            return await collect_files(ctx, self.id, p)
        if p.env_id is not None:
            env_ids = [p.env_id]
        elif p.env_ids is not None:
            env_ids = list(p.env_ids)
        else:
            env_ids = list(ctx.envs)
        envs = [ctx.env(e) for e in env_ids]  # StepError for an env that is not deployed
        kinds = p.kinds()
        name = p.name or self.id
        folder = ctx.run_dir / ARTIFACTS_FOLDER / name if ctx.run_dir is not None else None
        collected: dict[str, Any] = {}
        summary: dict[str, Any] = {"name": name, "env_ids": env_ids}
        files: list[str] = []

        if "state" in kinds:
            states = {d.env_id: d.snapshot().to_dict() for d in envs}
            collected["state"] = states
            summary["state"] = {
                d.env_id: {
                    "state_hash": d.snapshot().hash(),
                    "records": {c: len(rows) for c, rows in states[d.env_id].items()},
                }
                for d in envs
            }
            if folder is not None:
                for env_id, data in states.items():
                    text = json.dumps(data, indent=2, ensure_ascii=False)
                    files.append(_write(folder / f"{_file_name(env_id)}.state.json", text))
        if "trajectory" in kinds:
            trajectories = {}
            for d in envs:
                trajectory = d.gateway.instance(d.instance).trajectory
                trajectories[d.env_id] = [r.to_json() for r in trajectory]
                if folder is not None:
                    path = folder / f"{_file_name(d.env_id)}.trajectory.jsonl"
                    files.append(_write(path, trajectory.to_jsonl()))
            collected["trajectory"] = trajectories
            summary["trajectory"] = {e: {"records": len(r)} for e, r in trajectories.items()}
        if "prompts" in kinds:
            prompts = [prompt_json(r) for r in ctx.prompts.values()]
            collected["prompts"] = prompts
            summary["prompts"] = {"count": len(prompts), "ids": [x["prompt_id"] for x in prompts]}
            if folder is not None:
                text = json.dumps(prompts, indent=2, ensure_ascii=False)
                files.append(_write(folder / "prompts.json", text))

        ctx.artifacts[name] = collected
        summary["files"] = files
        return summary
