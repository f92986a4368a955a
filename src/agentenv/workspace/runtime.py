"""`Workspace`: the live side of a workspace environment (a document with `workspace:`).

One per loaded environment. It holds the seed tree (records), the sandbox settings, and
makes each instance's `WorkTree` on its first command, kept in the instance's resources
(`ToolContext.resources`) and removed when the instance is dropped or collected. A call
with no instance (a tool invoked directly) gets a folder for that call alone.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from agentenv.env.tool import ToolContext
from agentenv.sandbox import SandboxError, SandboxLimits, SandboxProvider, sandbox_provider
from agentenv.spec.workspace import WorkspaceSpec
from agentenv.workspace.disk import WorkTree
from agentenv.workspace.errors import WorkspaceError
from agentenv.workspace.files import Files
from agentenv.workspace.tree import Ignore, Record, read_folder, read_git

_MIB = 2**20


class Workspace:
    """A workspace environment's tree, sandbox settings and per-instance folders."""

    def __init__(self, spec: WorkspaceSpec, base: Path) -> None:
        """Read the seed tree (`base` anchors its relative paths) and find the provider;
        WorkspaceError (or SandboxError) when either cannot be had."""
        self.spec = spec
        self.collection = spec.collection
        self.ignore = Ignore(spec.ignore)
        self.max_file_bytes = int(spec.max_file_mb * _MIB)
        self.max_tree_bytes = int(spec.max_tree_mb * _MIB)
        box = spec.sandbox
        self.limits = SandboxLimits(
            timeout=box.timeout,
            memory_mb=box.memory_mb,
            processes=box.processes,
            output_bytes=box.output_bytes,
            file_size_mb=max(1, int(spec.max_file_mb) + 1),
            cpu_seconds=max(1, int(box.timeout) + 1),
        )
        self.provider: SandboxProvider = sandbox_provider(box.provider)
        self.seed = self._read_seed(base)

    @property
    def workdir(self) -> str | None:
        """Where commands see the tree, when the document fixes it."""
        return self.spec.sandbox.workdir

    def _read_seed(self, base: Path) -> list[Record]:
        seed = self.spec.seed
        records: dict[str, Record] = {}
        if seed.folder is not None:
            folder = (base / seed.folder).resolve()
            if not folder.is_dir():
                raise WorkspaceError(f"seed folder {seed.folder!r}: no such folder (in {base})")
            for record in read_folder(folder, self.ignore, self.max_file_bytes):
                records[record["path"]] = record
        elif seed.git is not None:
            for record in read_git(seed.git, seed.commit, self.ignore, base):
                records[record["path"]] = record
        staged = Files(_Scratch(records), "", None)
        for path, text in seed.files.items():
            staged.write(path, text.encode("utf-8"))
        return [records[p] for p in sorted(records)]

    def files(self, ctx: ToolContext) -> Files:
        """The tree of the instance a call runs on."""
        return Files(ctx.state, self.collection, self.workdir)

    def new_tree(self) -> WorkTree:
        """A fresh, empty folder in a new sandbox."""
        try:
            sandbox = self.provider.create(
                self.limits, network=self.spec.sandbox.network, workdir=self.workdir
            )
        except SandboxError as exc:
            raise WorkspaceError(str(exc)) from None
        return WorkTree(sandbox, self.ignore, self.max_file_bytes, self.max_tree_bytes)

    @asynccontextmanager
    async def tree(self, ctx: ToolContext) -> AsyncIterator[WorkTree]:
        """The instance's folder, synced to the call's state and held for one command."""
        resources = ctx.resources
        key = f"workspace:{id(self)}"
        tree = resources.get(key) if resources is not None else None
        if tree is None:
            tree = self.new_tree()
            if resources is not None:
                resources[key] = tree
        try:
            async with tree.lock:
                files = self.files(ctx)
                current = files.tree_hash()
                if tree.synced != current:  # a fork, a rollback or a file tool changed it
                    tree.sync(files.records())
                    tree.synced = current
                yield tree
        finally:
            if resources is None:
                tree.close()


class _Scratch:
    """The few state methods `Files` needs, over a plain dict (seed building)."""

    def __init__(self, records: dict[str, Record]) -> None:
        self._records = records

    def get(self, collection: str, key: str) -> Record | None:
        return self._records.get(key)

    def keys(self, collection: str) -> list[str]:
        return list(self._records)

    def put(self, collection: str, record: Record) -> Record:
        self._records[record["path"]] = record
        return record

    def has(self, collection: str, key: str) -> bool:
        return key in self._records

    def delete(self, collection: str, key: str) -> Record:
        return self._records.pop(key)
