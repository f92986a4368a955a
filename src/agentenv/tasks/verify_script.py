"""Verifier scripts: an artifact's `async def verify(mcp_url)`, run against a deployed env.

This is the protocol's `env_outcome_verifier` with `file_artifact_id`: the script gets
the environment's MCP URL, calls tools there like any MCP client, and returns result
rows `[{id, result, description}]` (optionally `score` and `weight`).

The script runs in a child Python process (`$AGENTENV_VERIFY_PYTHON`, default this
one; under MCP SDK 2.x the child lends the SDK the 1.x spellings the protocol's scripts
use), never in ours: a script that blocks, crashes or loops cannot take the run with it,
and the step's timeout ends it. For the time it runs, the env's gateway is served on a
free 127.0.0.1 port; a caller with no credentials there acts as the env's default role
(not the control plane), as the protocol's role-less call does. Its calls go through
`Gateway.call` and are recorded in the trajectory under the principal `verifier`. The
server stops when the script ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from agentenv.env.tool import Principal
from agentenv.gateway.auth import Authenticator, AuthError
from agentenv.gateway.errors import DEFAULT_INSTANCE
from agentenv.tasks.context import DeployedEnv, TaskContext
from agentenv.tasks.step import StepError

VERIFY_PYTHON = "AGENTENV_VERIFY_PYTHON"
SCRIPT_NAME = "verify.py"
VERIFIER_PRINCIPAL = "verifier"
_MARK = "@@agentenv-verify-results@@"
MAX_OUTPUT = 1_000_000

# Runs in the child: load the script, call verify(url), print the rows after a marker.
# The protocol's scripts are written for the MCP SDK 1.x; under 2.x the child first gives
# the SDK back the two 1.x spellings they use (a 3-tuple from streamable_http_client, and
# camelCase result fields), in that child process only.
_CHILD = f"""
import asyncio, contextlib, importlib.metadata, importlib.util, inspect, json, sys
path, url = sys.argv[1], sys.argv[2]
try:
    major = int(importlib.metadata.version("mcp").split(".")[0])
except Exception:
    major = 0
if major >= 2:
    import mcp.client.streamable_http as http_module
    import mcp.types as mcp_types
    plain = http_module.streamable_http_client

    @contextlib.asynccontextmanager
    async def three_tuple(*args, **kwargs):
        async with plain(*args, **kwargs) as streams:
            yield (*streams, lambda: None) if len(streams) == 2 else streams

    http_module.streamable_http_client = three_tuple
    for old, new in (("isError", "is_error"), ("structuredContent", "structured_content")):
        if not hasattr(mcp_types.CallToolResult, old):
            setattr(mcp_types.CallToolResult, old, property(lambda self, n=new: getattr(self, n)))
spec = importlib.util.spec_from_file_location("agentenv_verify_script", path)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
verify = getattr(module, "verify", None)
if not callable(verify):
    sys.exit("the script defines no verify(mcp_url) function")
params = inspect.signature(verify).parameters
required = [n for n, p in params.items() if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
if len(required) > 1:
    sys.exit("verify() takes " + ", ".join(required) + ": only verify(mcp_url) is supported here (not the run context)")
result = verify(url)
if inspect.isawaitable(result):
    async def wait(awaitable):
        return await awaitable
    result = asyncio.run(wait(result))
print({_MARK!r} + json.dumps(result, default=str))
"""


class ResultRow(BaseModel):
    """One row a verifier script returns (the protocol's; more keys are kept)."""

    model_config = ConfigDict(extra="allow")

    id: str
    result: bool
    description: str = ""
    score: float | None = Field(default=None, ge=0, le=1)
    weight: float | None = None


_ROWS: TypeAdapter[list[ResultRow]] = TypeAdapter(list[ResultRow])


class _Anonymous(Authenticator):
    """Who a caller of the verifier's server is: with no credentials, the env's default
    role under the name `verifier`; never the control plane."""

    def __init__(self, default_role: str) -> None:
        super().__init__(None, trusted_local=False, default_role=default_role)

    def principal(self, role_header: str | None, authorization: str | None) -> Principal:
        """The verifier, as the default role (a role header names another role)."""
        if authorization:
            raise AuthError("the verifier's server takes no credentials")
        role = (role_header or "").strip() or self.default_role
        if role in ("", "default"):
            role = self.default_role
        return Principal(role=role, name=VERIFIER_PRINCIPAL, admin=False)


def script_candidates(ctx: TaskContext, artifact_id: str) -> list[Path]:
    """Where an artifact's verifier script is looked for, in order: the bundle's (or the
    task folder's) `artifacts/<id>/verify.py`, then `artifacts/<id>.py`."""
    base = ctx.base_dir
    roots = [base / "artifacts"]
    if base.name == "tasks":
        roots.insert(0, base.parent / "artifacts")
    out = []
    for root in roots:
        out += [root / artifact_id / SCRIPT_NAME, root / f"{artifact_id}.py"]
    return out


def find_script(ctx: TaskContext, artifact_id: str) -> Path:
    """The verifier script of `file_artifact_id`; StepError listing where it looked. An
    artifact folder with one Python file and no verify.py uses that file."""
    if not artifact_id or "/" in artifact_id or artifact_id.startswith("."):
        raise StepError(f"file_artifact_id {artifact_id!r} is not an artifact name")
    candidates = script_candidates(ctx, artifact_id)
    for path in candidates:
        if path.is_file():
            return path
        folder = path.parent
        if path.name == SCRIPT_NAME and folder.is_dir():
            scripts = sorted(folder.glob("*.py"))
            if len(scripts) == 1:
                return scripts[0]
    tried = ", ".join(str(c) for c in candidates)
    raise StepError(f"no verifier script for artifact {artifact_id!r} (looked in: {tried})")


async def _serve(ctx: TaskContext, deployed: DeployedEnv) -> Any:
    import uvicorn

    from agentenv.serve.background import BackgroundServer
    from agentenv.serve.rest import create_app

    auth = _Anonymous(deployed.env.default_role)

    def build(port: int) -> uvicorn.Server:
        app = create_app(deployed.gateway, auth=auth, loopback=True)
        config = uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="warning", access_log=False
        )
        return uvicorn.Server(config)

    return await BackgroundServer.start(build, host="127.0.0.1")


def _last_error(stderr: str) -> str:
    """The line of a traceback that says what went wrong (the last `SomeError: ...`)."""
    lines = [line.strip(" |+-") for line in stderr.splitlines()]
    lines = [line for line in lines if line]
    for line in reversed(lines):
        head = line.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Exit")) or head.endswith("Group"):
            return line
    return lines[-1] if lines else ""


def mcp_path(instance: str) -> str:
    """The MCP endpoint of an instance on a served gateway."""
    return "/mcp" if instance == DEFAULT_INSTANCE else f"/instances/{instance}/mcp"


async def run_script(ctx: TaskContext, deployed: DeployedEnv, script: Path) -> list[dict[str, Any]]:
    """Serve the env, run the script's verify(mcp_url) in a child process, and return
    its rows; StepError for a script that fails or returns something else."""
    python = os.environ.get(VERIFY_PYTHON) or sys.executable
    script = script.resolve()
    server = await _serve(ctx, deployed)
    try:
        url = server.url + mcp_path(deployed.instance)
        try:
            proc = await asyncio.create_subprocess_exec(
                python,
                "-c",
                _CHILD,
                str(script),
                url,
                cwd=script.parent,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise StepError(f"cannot start {python!r} for {script}: {exc}") from None
        try:
            out, err = await proc.communicate()
        except BaseException:  # the step timed out or was cancelled: leave nothing running
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            with contextlib.suppress(Exception):
                await asyncio.shield(proc.wait())
            raise
    finally:
        await server.stop()
    stdout = out[:MAX_OUTPUT].decode("utf-8", "replace")
    stderr = err[:MAX_OUTPUT].decode("utf-8", "replace").strip()
    if proc.returncode != 0:
        tail = _last_error(stderr) or f"exit code {proc.returncode}"
        raise StepError(f"{script}: verify() failed: {tail}")
    line = next((x for x in reversed(stdout.splitlines()) if x.startswith(_MARK)), None)
    if line is None:
        raise StepError(f"{script}: verify() returned nothing readable")
    try:
        rows = _ROWS.validate_python(json.loads(line[len(_MARK) :]))
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0]
        raise StepError(
            f"{script}: verify() must return a list of {{id, result, description}}: {first}"
        ) from None
    if not rows:
        raise StepError(f"{script}: verify() returned no result rows")
    return [r.model_dump(exclude_none=True) for r in rows]
