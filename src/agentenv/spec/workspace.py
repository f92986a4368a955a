"""The `workspace:` block of an environment document: a directory tree as state.

```yaml
workspace:
  seed: {folder: repo}                  # or {git: repo, commit: v1}, or files: {path: text}
  sandbox: {provider: bwrap, timeout: 30}
  tools: [bash, read_file, write_file, edit_file, list_files, search_files]
  ignore: ["__pycache__/", "*.pyc"]
```

The tree is held as records of one collection (`files`, keyed by path), so it forks,
hashes, diffs and rolls back as record state does; see docs/workspaces.md.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

WorkspaceToolName = Literal[
    "bash", "read_file", "write_file", "edit_file", "list_files", "search_files"
]
WORKSPACE_TOOLS: tuple[WorkspaceToolName, ...] = (
    "bash",
    "read_file",
    "write_file",
    "edit_file",
    "list_files",
    "search_files",
)
"""The built-in workspace tools, in the order they are listed."""

DEFAULT_IGNORE = ("__pycache__/", "*.pyc", ".pytest_cache/", ".mypy_cache/", ".ruff_cache/")


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class WorkspaceSeedSpec(_Block):
    """Where the tree starts: a folder, a git repository at a commit, inline files, or a
    folder with inline files on top. Paths are relative to the document's folder."""

    folder: str | None = Field(default=None, description="A folder copied as the tree.")
    git: str | None = Field(
        default=None,
        description="A git repository (a folder or URL git can clone); the tree at `commit` "
        "is taken, without its `.git` history.",
    )
    commit: str = Field(default="HEAD", description="With `git`: a commit, tag or branch.")
    files: dict[str, str] = Field(
        default_factory=dict, description="Inline files, path to text (on top of a folder)."
    )

    @model_validator(mode="after")
    def _one_source(self) -> WorkspaceSeedSpec:
        if self.folder is not None and self.git is not None:
            raise ValueError("give 'folder' or 'git', not both")
        return self


class WorkspaceSandboxSpec(_Block):
    """Where `bash` runs: a sandbox provider (`agent-env sandbox providers`) and limits."""

    provider: str = Field(default="local", description="A sandbox provider's name.")
    network: bool = Field(default=False, description="Whether commands may reach the network.")
    workdir: str | None = Field(
        default=None,
        description="The absolute path commands see the tree at (`/app`, `/workspace`); "
        "providers that can place it only (bwrap, docker).",
    )
    timeout: float = Field(default=60.0, gt=0, description="Seconds per command, at most.")
    memory_mb: int = Field(default=2048, gt=0, description="Address space per process, MiB.")
    processes: int = Field(default=256, gt=0, description="Processes per sandbox user.")
    output_bytes: int = Field(default=30_000, gt=0, description="Output kept per stream.")
    env: dict[str, str] = Field(default_factory=dict, description="Variables for commands.")


class WorkspaceSpec(_Block):
    """A workspace environment's tree, sandbox and built-in tools."""

    seed: WorkspaceSeedSpec = Field(default_factory=WorkspaceSeedSpec)
    sandbox: WorkspaceSandboxSpec = Field(default_factory=WorkspaceSandboxSpec)
    tools: list[WorkspaceToolName] | dict[WorkspaceToolName, list[str] | None] = Field(
        default_factory=lambda: list(WORKSPACE_TOOLS),
        description="The built-in tools to serve: a list (every role gets them), or a map "
        "of tool to the roles that get it (null: every role).",
    )
    collection: str = Field(
        default="files", pattern=r"^[A-Za-z0-9_-]+$", description="The collection of the tree."
    )
    ignore: list[str] = Field(
        default_factory=lambda: list(DEFAULT_IGNORE),
        description="Paths not kept in the state (a trailing / names a folder at any depth; "
        "otherwise a glob on the file name or path).",
    )
    max_file_mb: float = Field(
        default=16, gt=0, description="Largest file the tree keeps; a bigger one fails the call."
    )
    max_tree_mb: float = Field(
        default=256, gt=0, description="Largest tree; a call that grows it past this fails."
    )

    @field_validator("tools")
    @classmethod
    def _no_repeats(
        cls, value: list[str] | dict[str, list[str] | None]
    ) -> list[str] | dict[str, list[str] | None]:
        if isinstance(value, list) and len(set(value)) != len(value):
            raise ValueError("a tool is named twice")
        return value

    def tool_roles(self) -> dict[str, tuple[str, ...] | None]:
        """The tools to serve, each with its roles (None: every role)."""
        if isinstance(self.tools, list):
            return {name: None for name in self.tools}
        return {
            name: tuple(roles) if roles is not None else None for name, roles in self.tools.items()
        }
