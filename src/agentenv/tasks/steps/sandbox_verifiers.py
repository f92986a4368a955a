"""Verifiers that run in sandboxes: verify_sandbox and run_container_unit_tests_verifier.

Both take upstream's fields. Where upstream probes an agent's container, ours probe the
workspace environment the agent worked in (or `env_id`'s, our addition): its tree as it is
at the verifier, written to a fresh sandbox, so a verifier never runs in the folder the
agent left (nothing it started is still running there) and cannot change the env's state.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from agentenv.grading.aggregate import aggregate_rows
from agentenv.grading.score import Score
from agentenv.tasks.context import TaskContext
from agentenv.tasks.sandboxes import DeployedSandbox
from agentenv.tasks.step import STEPS, Step, StepError, Unhonoured
from agentenv.tasks.steps.sandbox import env_sandbox, workspace_env
from agentenv.tasks.steps.verification import VerifierParams

_HANDLED = ("probe_file_exists", "probe_dir_exists", "probe_file_contains", "bash_cmd_succeeds")


async def _target(
    ctx: TaskContext,
    step_id: str,
    sandbox_name: str | None,
    agent_name: str | None,
    env_id: str | None,
) -> DeployedSandbox:
    if sandbox_name:
        return ctx.sandbox(sandbox_name)
    return await env_sandbox(ctx, workspace_env(ctx, agent_name, env_id), f"verify-{step_id}")


class VerifySandboxParams(VerifierParams):
    """Fields of `verify_sandbox` (upstream's; `env_id` is ours)."""

    criteria: list[dict[str, Any]] = Field(default_factory=list)
    sandbox_name: str | None = None
    agent_name: str | None = None
    env_id: str | None = Field(default=None, description="Ours: probe this workspace env's tree.")
    base_dir: str = "/app"
    shell_timeout_seconds: float = Field(default=120, gt=0)
    score_aggregator: Literal["all_pass", "any_pass", "weighted_average"] | None = "all_pass"  # type: ignore[assignment]

    @field_validator("sandbox_name", "agent_name", "env_id")
    @classmethod
    def _blank_is_unset(cls, value: str | None) -> str | None:
        return value or None


async def _criterion(
    box: DeployedSandbox, c: dict[str, Any], base: str, timeout: float
) -> tuple[bool, str]:
    kind = c.get("type")
    if kind in ("probe_file_exists", "probe_dir_exists"):
        paths = c.get("paths") or []
        if not paths:
            return False, "no paths specified"
        test = (lambda p: p.exists()) if kind == "probe_file_exists" else (lambda p: p.is_dir())
        missing = []
        for path in paths:
            try:
                ok = test(box.host_path(str(path), base))
            except StepError:
                ok = False
            if not ok:
                missing.append(path)
        return (not missing), (f"Missing: {missing}" if missing else "All paths exist")
    if kind == "probe_file_contains":
        paths = c.get("paths") or []
        expected = c.get("expected", c.get("value"))
        if not paths or not isinstance(expected, str):
            return False, "needs paths and expected"
        try:
            text = box.host_path(str(paths[0]), base).read_text(errors="replace")
            found = re.search(expected, text) is not None
        except (OSError, StepError) as exc:
            return False, f"cannot read {paths[0]!r}: {exc}"
        except re.error as exc:
            return False, f"expected is not a regular expression: {exc}"
        return found, f"{'contains' if found else 'does not contain'} {expected!r}"
    command = c.get("bash_cmd")
    if not command:
        return False, "no bash_cmd"
    result = await box.run(str(command), cwd=base, timeout=timeout)
    if result.timed_out:
        return False, f"timed out after {timeout:g} s"
    return result.exit_code == 0, f"exit={result.exit_code}; stderr={result.stderr[:200]}"


@STEPS.add_builtin
class VerifySandbox(Step):
    """Probe files and run commands in a sandbox: upstream's four criterion kinds
    (`probe_file_exists`, `probe_dir_exists`, `probe_file_contains` (a regex search of the
    first path), `bash_cmd_succeeds`); others are skipped rows (for response verifiers)."""

    type_name = "verify_sandbox"
    Params = VerifySandboxParams
    is_verifier = True
    default_timeout = 900.0

    async def run(self, ctx: TaskContext) -> Any:
        p: VerifySandboxParams = self.params  # type: ignore[assignment]
        box = await _target(ctx, self.id, p.sandbox_name, p.agent_name, p.env_id)
        rows: list[dict[str, Any]] = []
        for i, criterion in enumerate(p.criteria):
            row = {**criterion, "criterion_index": i}
            if criterion.get("type") not in _HANDLED:
                rows.append(
                    {
                        **row,
                        "skipped": True,
                        "justification": f"type {criterion.get('type')!r} not handled by verify_sandbox",
                    }
                )
                continue
            ok, why = await _criterion(box, criterion, p.base_dir, p.shell_timeout_seconds)
            rows.append(
                {
                    **row,
                    "id": criterion.get("criterion", f"criterion {i}"),
                    "score": 1.0 if ok else 0.0,
                    "result": ok,
                    "justification": why,
                    "skipped": False,
                }
            )
        value = aggregate_rows(rows, p.score_aggregator or "all_pass")
        return Score(
            score=value, passed=value >= 1.0, details={"results": rows, "sandbox": box.name}
        )


class UnitTestsParams(VerifierParams):
    """Fields of `run_container_unit_tests_verifier` (upstream's; `env_id` is ours)."""

    command: str
    sandbox_name: str | None = None
    container_name: str | None = Field(
        default=None, description="Upstream's Docker container; here the sandbox itself runs it."
    )
    env_id: str | None = Field(default=None, description="Ours: test this workspace env's tree.")
    agent_name: str | None = None
    setup_commands: list[str] = Field(default_factory=list)
    timeout_sec: float = Field(default=300, gt=0)
    env_vars: dict[str, str] = Field(default_factory=dict)
    result_paths: list[str] = Field(default_factory=list)
    reward_path: str | None = None
    load: dict[str, str] = Field(
        default_factory=dict,
        description="Ours: artifacts to put in the sandbox first, artifact id to inside folder "
        "(the hidden tests, kept from the agent).",
    )

    @model_validator(mode="after")
    def _names(self) -> UnitTestsParams:
        for key in self.env_vars:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
                raise ValueError(f"env_vars: {key!r} is not a variable name")
        if self.reward_path and self.reward_path not in self.result_paths:
            self.result_paths.append(self.reward_path)
        return self


def _reward(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        value = text.strip()
    if isinstance(value, bool):
        return None
    try:
        return min(1.0, max(0.0, float(str(value).strip())))
    except ValueError:
        return None


@STEPS.add_builtin
class RunContainerUnitTestsVerifier(Step):
    """Run a test command in a sandbox. With `reward_path` (Harbor's
    `/logs/verifier/reward.txt`) the score is the number in that file, clamped to [0, 1]
    (deleted before the run, so a reward the agent left is not graded; its exit code does
    not count); without it, exit 0 scores 1."""

    type_name = "run_container_unit_tests_verifier"
    Params = UnitTestsParams
    is_verifier = True
    default_timeout = 1800.0
    shell_fields = frozenset({"command", "setup_commands"})
    unhonoured = {"user": Unhonoured("commands run as this machine's user", honoured=("root",))}

    async def run(self, ctx: TaskContext) -> Any:
        from agentenv.tasks.steps.sandbox import artifact_files

        p: UnitTestsParams = self.params  # type: ignore[assignment]
        box = await _target(ctx, self.id, p.sandbox_name, p.agent_name, p.env_id)
        for artifact, folder in p.load.items():
            for name, path in artifact_files(ctx, artifact).items():
                target = box.host_path(f"{folder.rstrip('/')}/{name}")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(path.read_bytes())
                target.chmod(path.stat().st_mode & 0o777)
        env = {**p.env_vars}
        for key, value in ctx.seed.items():
            name = str(key).upper()
            if re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) and name not in ("PATH", "HOME"):
                env.setdefault(name, str(value))
        for command in p.setup_commands:
            done = await box.run(command, timeout=p.timeout_sec, env=env)
            if not done.ok:
                raise StepError(
                    f"setup command {command!r} failed (exit {done.exit_code}): {done.stderr[-500:]}"
                )
        if p.reward_path:
            reward_file = box.host_path(p.reward_path)
            reward_file.unlink(missing_ok=True)
            reward_file.parent.mkdir(parents=True, exist_ok=True)
        result = await box.run(p.command, timeout=p.timeout_sec, env=env)
        extracted: dict[str, Any] = {}
        for path in p.result_paths:
            try:
                text = box.host_path(path).read_text()
            except (OSError, StepError):
                extracted[path] = None
                continue
            try:
                extracted[path] = json.loads(text)
            except ValueError:
                extracted[path] = text
        details: dict[str, Any] = {
            "command": p.command,
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "stdout_head": result.stdout[:500],
            "stderr_head": result.stderr[:500],
            "extracted_files": extracted,
        }
        if p.reward_path:
            raw = extracted.get(p.reward_path)
            reward = _reward(
                raw if isinstance(raw, str) else json.dumps(raw) if raw is not None else None
            )
            if result.timed_out:
                reward = None  # a test run cut short earns nothing, whatever it wrote (as Harbor)
            message = (
                f"reward={reward} (exit_code={result.exit_code} timed_out={result.timed_out})"
                if reward is not None
                else f"timed out after {p.timeout_sec:g} s: no reward"
                if result.timed_out
                else f"reward file {p.reward_path!r} missing or non-numeric (exit_code={result.exit_code})"
            )
            value = reward or 0.0
            rows = [{"id": "reward", "score": value, "result": value >= 1.0, "message": message}]
        else:
            value = 1.0 if result.ok else 0.0
            message = f"exit_code={result.exit_code} timed_out={result.timed_out}"
            rows = [{"id": "exit_code", "score": value, "result": result.ok, "message": message}]
        return Score(score=value, passed=value >= 1.0, details={**details, "results": rows})
