"""`Files`: the tree of a workspace as its tools see it, read from and written to the state.

Every path an agent gives goes through `resolve`: normalised, then followed through the
tree's symlinks (each hop checked), so a `..` or a link that leads out of the tree is a
WorkspaceError, never a read of the host.
"""

from __future__ import annotations

import posixpath
from typing import Any

from agentenv.state import State, StateView
from agentenv.workspace.errors import WorkspaceError
from agentenv.workspace.tree import DIRECTORY, FILE, SYMLINK, Record, clean_path, record_of

_MAX_HOPS = 40  # as the kernel's ELOOP


class Files:
    """The files of one tree (`collection` of `state`); `workdir` is where commands see it."""

    def __init__(self, state: State | StateView, collection: str, workdir: str | None) -> None:
        self.state = state
        self.collection = collection
        self.workdir = workdir

    def get(self, path: str) -> Record | None:
        """The record at an exact tree path, or None."""
        return self.state.get(self.collection, path)

    def tree_hash(self) -> str:
        """The tree's canonical hash (content and mode of every file; kept up to date by
        every write, so it costs the same for any tree size)."""
        return self.state.collection_hash(self.collection)

    def records(self) -> list[Record]:
        """Every file, in the tree's order."""
        return self.state.list(self.collection)

    def resolve(self, path: str, *, follow_last: bool = True) -> str:
        """The tree path `path` names, through the tree's symlinks."""
        target = clean_path(path, self.workdir)
        for _ in range(_MAX_HOPS):
            parts = target.split("/") if target else []
            for i in range(len(parts)):
                if i == len(parts) - 1 and not follow_last:
                    continue
                prefix = "/".join(parts[: i + 1])
                record = self.get(prefix)
                if record is not None and record["mode"] == SYMLINK:
                    link = str(record["content"])
                    joined = (
                        link
                        if link.startswith("/")
                        else posixpath.join(posixpath.dirname(prefix), link)
                    )
                    rest = "/".join(parts[i + 1 :])
                    try:
                        target = clean_path(
                            posixpath.join(joined, rest) if rest else joined, self.workdir
                        )
                    except WorkspaceError:
                        raise WorkspaceError(
                            f"{path!r} leads out of the workspace (through the symlink "
                            f"{prefix!r} -> {link!r})"
                        ) from None
                    break
            else:
                return target
        raise WorkspaceError(f"{path!r}: too many levels of symlinks")

    def is_folder(self, path: str) -> bool:
        """Whether files lie under `path` (a folder exists while it holds a file)."""
        if not path:
            return True
        record = self.get(path)
        if record is not None:
            return record["mode"] == DIRECTORY
        prefix = path + "/"
        return any(k.startswith(prefix) for k in self.state.keys(self.collection))

    def read(self, path: str) -> Record:
        """The file `path` names; WorkspaceError naming what is there instead."""
        resolved = self.resolve(path)
        record = self.get(resolved)
        if record is None or record["mode"] == DIRECTORY:
            if self.is_folder(resolved):
                raise WorkspaceError(f"{path!r} is a folder, not a file (list it with list_files)")
            raise WorkspaceError(f"no file {path!r} in the workspace")
        return record

    def write(self, path: str, data: bytes) -> tuple[Record, bool]:
        """Write `data` to the file `path` names (its mode kept; a new file is `100644`);
        the record and whether it is new."""
        resolved = self.resolve(path)
        if not resolved:
            raise WorkspaceError(f"{path!r} is the workspace's root folder, not a file")
        if self.is_folder(resolved):
            raise WorkspaceError(f"{path!r} is a folder, not a file")
        parts = resolved.split("/")
        for i in range(1, len(parts)):
            above = "/".join(parts[:i])
            held = self.get(above)
            if held is not None and held["mode"] == DIRECTORY:
                self.delete(above)  # an empty folder no longer: its file stands for it
            elif held is not None:
                raise WorkspaceError(f"cannot write {path!r}: {above!r} is a file, not a folder")
        old = self.get(resolved)
        record = record_of(resolved, data, old["mode"] if old is not None else FILE)
        self.put(record)
        return record, old is None

    def put(self, record: Record) -> None:
        """Store a file's record as it is."""
        self.state.put(self.collection, record)

    def delete(self, path: str) -> None:
        """Remove the file at an exact tree path (nothing if there is none)."""
        if self.state.has(self.collection, path):
            self.state.delete(self.collection, path)

    def apply(self, changes: dict[str, Any]) -> None:
        """Write what a command changed: path to its new record, or None where it was removed."""
        for path, record in changes.items():
            if record is None:
                self.delete(path)
            else:
                self.put(record)
