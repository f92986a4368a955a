"""The `server:` block: an environment whose tools live in a server process (issue 13).

An environment document with `server:` instead of `tools:` is a process environment: an
MCP server over stdio (`command`), one over Streamable HTTP or an AgentEnv environment
server (`url`), or an upstream AgentEnv environment folder (`folder`: a `Dockerfile`, a
`server.py` and a `requirements.txt`), run here as a local process in a virtualenv of its
own. The gateway in front of it is ours: roles, tool access, clock, triggers, trajectory.
See docs/process-envs.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Isolation = Literal["process", "reset", "shared"]
"""How the instances of a process environment are kept apart:

- `process`: each instance has a server process of its own, taken from a warm pool of
  pre-started ones (the default for servers we start);
- `reset`: instances reuse processes one after another; between them the child's data plane
  is emptied (`data/reset`) and seeded again (`data/add`);
- `shared`: every instance talks to one server (the only choice for a `url` we did not start).
"""

BackendName = str
"""A backend's registered name: `stdio`, `http`, `agentenv`, `folder`, or a plugin's."""


class ServerSpec(BaseModel):
    """Where an environment's tools are served from, and how its processes live."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    backend: BackendName | None = Field(
        default=None,
        description="The backend by name; inferred when unset: `command` is stdio, `folder` "
        "is folder, `url` is agentenv when the server has a card, http otherwise.",
    )
    command: list[str] | None = Field(
        default=None,
        description="stdio: the program and its arguments. `{workspace}` in any of them, or in "
        "`args`, `env` and `cwd`, is the instance's workspace folder.",
    )
    args: list[str] = Field(default_factory=list, description="stdio: more arguments.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Variables for the process (stdio and folder), on top of a minimal "
        "inherited set (PATH, HOME, LANG, ...). `${NAME}` takes NAME from our environment.",
    )
    cwd: str | None = Field(default=None, description="The process's folder (default: workspace).")
    url: str | None = Field(
        default=None, description="http/agentenv: the server's base URL or its MCP endpoint."
    )
    headers: dict[str, str] = Field(
        default_factory=dict, description="http/agentenv: headers sent on every request."
    )
    token: str | None = Field(
        default=None, description="http/agentenv: a bearer token (`${NAME}` reads a variable)."
    )
    folder: str | None = Field(
        default=None,
        description="An upstream environment folder (Dockerfile, server.py, requirements.txt), "
        "relative to this document.",
    )
    docker: bool = Field(
        default=False,
        description="folder: build and run its Dockerfile with Docker instead of a local "
        "virtualenv (needs a Docker daemon).",
    )
    python: str | None = Field(
        default=None,
        description="folder: the interpreter its virtualenv is made from (default: this one).",
    )
    workspace: str | None = Field(
        default=None,
        description="A folder copied afresh for each server process (relative to this "
        "document); without it each process gets an empty one.",
    )
    prepare: list[list[str]] = Field(
        default_factory=list,
        description="Commands run in the fresh workspace before the server starts "
        "(e.g. [[git, init], [git, commit, --allow-empty, -m, init]]).",
    )
    isolation: Isolation | None = Field(
        default=None,
        description="process | reset | shared; default `process` for servers we start, "
        "`shared` for a `url`.",
    )
    pool: int = Field(
        default=2, ge=0, le=256, description="process/reset: processes kept started and ready."
    )
    startup_timeout: float = Field(
        default=60.0, gt=0, description="Seconds a server may take to start and answer."
    )
    call_timeout: float = Field(
        default=120.0, gt=0, description="Seconds a tool call may take (a tool's own wins)."
    )
    mirror: bool = Field(
        default=True,
        description="Where the server has a data plane, read `data/get` after each write call "
        "into the instance's state, so state checks, diffs and hashes see the server's data.",
    )
    read_tools: list[str] = Field(
        default_factory=list,
        description="Tools that only read (besides those the server marks `readOnlyHint`).",
    )

    @field_validator("command")
    @classmethod
    def _non_empty(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not value[0].strip()):
            raise ValueError("a command needs at least the program to run")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> ServerSpec:
        sources = [k for k in ("command", "url", "folder") if getattr(self, k) is not None]
        if len(sources) != 1 and self.backend in (None, "stdio", "http", "agentenv", "folder"):
            raise ValueError(
                "a server needs exactly one of 'command', 'url' or 'folder'"
                + (f" (has {', '.join(sources)})" if sources else "")
            )
        if self.url is not None and self.isolation == "process" and not self.folder:
            raise ValueError(
                "isolation 'process' needs a server we start ('command' or 'folder'); "
                "a 'url' is shared, or 'reset' through its data plane"
            )
        return self

    @property
    def backend_name(self) -> BackendName:
        """The backend this spec names or implies (`url` implies `http` until its card says
        otherwise; the backend registry makes that call)."""
        if self.backend:
            return self.backend
        if self.command is not None:
            return "stdio"
        if self.folder is not None:
            return "folder"
        return "http"

    @property
    def isolation_mode(self) -> Isolation:
        """The isolation in force: the declared one, else `process` or `shared`."""
        if self.isolation is not None:
            return self.isolation
        return "shared" if self.url is not None else "process"
