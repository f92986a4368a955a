"""`WorkTree`: an instance's tree written out to a sandbox's folder, for commands to run on.

The state holds the tree; the folder is a copy kept in step with it, lazily. Before a
command, `sync` writes only the files whose record differs from what the folder is known
to hold (and removes the ones the state no longer has), so after a fork or a rollback the
folder follows at the cost of what changed. After a command, `scan` finds what it changed
by each file's `lstat` (a file whose size, mtime, inode and mode are as last seen is not
read again) and returns the new records; the caller writes them into the state, inside the
call's transaction. If that call then fails, the state is rolled back, and the next `sync`
puts the folder back as the state has it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import weakref
from pathlib import Path
from typing import Any

from agentenv.sandbox import Sandbox
from agentenv.workspace.errors import WorkspaceError
from agentenv.workspace.tree import (
    DIRECTORY,
    SYMLINK,
    Ignore,
    Record,
    bytes_of,
    folder_record,
    mode_of,
    record_of,
    walk,
)

_Signature = tuple[int, int, int, int]
_Fingerprint = tuple[str, str, str] | None  # mode, encoding, content; None: not in the state


def _signature(st: os.stat_result) -> _Signature:
    return (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ino)


def _fingerprint(record: Record) -> _Fingerprint:
    return (record["mode"], record.get("encoding", "utf-8"), record["content"])


class WorkTree:
    """The folder of one instance's tree, inside its sandbox."""

    def __init__(
        self,
        sandbox: Sandbox,
        ignore: Ignore,
        max_file_bytes: int,
        max_tree_bytes: int,
        *,
        owns_sandbox: bool = True,
    ) -> None:
        """`owns_sandbox`: the sandbox goes with the tree (closed, or collected)."""
        self.sandbox = sandbox
        self.root = sandbox.workspace
        self.ignore = ignore
        self.max_file_bytes = max_file_bytes
        self.max_tree_bytes = max_tree_bytes
        self.lock = asyncio.Lock()
        """Held by a command from `sync` to `scan`: one command at a time per folder."""
        self._known: dict[str, tuple[_Fingerprint, _Signature]] = {}
        self.synced: str | None = None
        """The tree hash the folder was last made to match (None: never synced)."""
        # The folder goes when the tree is dropped or collected, or at exit.
        self._finalizer = weakref.finalize(self, sandbox.destroy if owns_sandbox else _nothing)

    def close(self) -> None:
        """Remove the folder and its sandbox (idempotent)."""
        self._finalizer()

    def sync(self, records: list[Record]) -> int:
        """Make the folder hold exactly `records` (ignored paths aside); how many files were
        written or removed."""
        wanted = {r["path"]: r for r in records}
        touched = 0
        for path in [p for p in self._known if p not in wanted]:
            self._remove(path)
            del self._known[path]
            self._prune(path, wanted)
            touched += 1
        for path, record in wanted.items():
            print_ = _fingerprint(record)
            known = self._known.get(path)
            if known is not None and known[0] == print_:
                continue
            self._known[path] = (print_, self._write(path, record))
            touched += 1
        return touched

    def scan(self) -> dict[str, Record | None]:
        """What changed in the folder since it was last synced or scanned: path to its new
        record, or None for a removed file. WorkspaceError when a file or the whole tree is
        over its limit (the folder is still remembered as it is, so the next `sync` undoes
        it)."""
        self.synced = None  # until the caller has written the changes into the state
        changes: dict[str, Record | None] = {}
        seen: set[str] = set()
        total = 0
        too_big: list[str] = []
        for path, entry in walk(self.root, self.ignore, self._known):
            st = entry.stat(follow_symlinks=False)
            if not (
                stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode) or stat.S_ISDIR(st.st_mode)
            ):
                continue  # sockets, fifos, devices: not part of a tree
            seen.add(path)
            folder = stat.S_ISDIR(st.st_mode)
            st_size = 0 if folder else st.st_size
            total += st_size
            # An empty folder's mtime says nothing of its content (there is none).
            signature = (st.st_mode, 0, 0, st.st_ino) if folder else _signature(st)
            known = self._known.get(path)
            if known is not None and known[1] == signature:
                continue
            if st_size > self.max_file_bytes:
                self._known[path] = (None, signature)
                too_big.append(f"{path!r} ({st.st_size / 2**20:.1f} MiB)")
                continue
            record = self._read(path, entry, st)
            print_ = _fingerprint(record)
            if known is None or known[0] != print_:
                changes[path] = record
            self._known[path] = (print_, signature)
        for path in [p for p in self._known if p not in seen]:
            del self._known[path]
            changes[path] = None
        if too_big:
            raise WorkspaceError(
                f"the command left files over the workspace's {self.max_file_bytes / 2**20:g} "
                f"MiB limit for one file: {', '.join(too_big)}; its changes were not kept"
            )
        if total > self.max_tree_bytes:
            raise WorkspaceError(
                f"the command grew the workspace to {total / 2**20:.1f} MiB, over its "
                f"{self.max_tree_bytes / 2**20:g} MiB limit; its changes were not kept"
            )
        return changes

    def _read(self, path: str, entry: os.DirEntry[str], st: os.stat_result) -> Record:
        if stat.S_ISDIR(st.st_mode):
            return folder_record(path)
        if stat.S_ISLNK(st.st_mode):
            target = os.readlink(entry.path)
            return {"path": path, "mode": SYMLINK, "content": target, "encoding": "utf-8"}
        return record_of(path, Path(entry.path).read_bytes(), mode_of(st.st_mode))

    def _write(self, path: str, record: Record) -> _Signature:
        target = self.root / path
        self._clear_way(target)
        if record["mode"] == DIRECTORY:
            if target.is_symlink() or target.is_file():
                target.unlink()
            target.mkdir(exist_ok=True)
            st = target.lstat()
            return (st.st_mode, 0, 0, st.st_ino)
        if record["mode"] == SYMLINK:
            if target.is_symlink() or target.exists():
                target.unlink()
            os.symlink(str(record["content"]), target)
        else:
            if target.is_symlink():
                target.unlink()  # never write through a link the command left
            target.write_bytes(bytes_of(record))
            target.chmod(0o755 if record["mode"] != "100644" else 0o644)
        return _signature(target.lstat())

    def _clear_way(self, target: Path) -> None:
        """Make `target`'s folder exist as folders (a file or link in the way is removed)."""
        folder = target.parent
        chain: list[Path] = []
        while folder != self.root and folder != folder.parent:
            chain.append(folder)
            folder = folder.parent
        for part in reversed(chain):
            if part.is_symlink() or (part.exists() and not part.is_dir()):
                part.unlink()
            if not part.exists():
                part.mkdir()
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)

    def _prune(self, path: str, wanted: dict[str, Record]) -> None:
        """Remove the folders above a removed file that it leaves empty (unless the state
        has them as empty folders), so no stray folder is scanned back in."""
        parts = path.split("/")[:-1]
        while parts:
            folder = "/".join(parts)
            if folder in wanted:
                return
            try:
                (self.root / folder).rmdir()
            except OSError:
                return  # not empty (or gone): what is above it is not empty either
            parts.pop()

    def _remove(self, path: str) -> None:
        target = self.root / path
        try:
            if target.is_dir() and not target.is_symlink():
                target.rmdir()  # an empty folder's record; what is in it has records of its own
            else:
                target.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            pass  # a folder that is no longer empty: its files are synced by their records


def _nothing() -> None:
    pass


def describe(changes: dict[str, Any], before: set[str]) -> dict[str, list[str]]:
    """A command's changes as the bash tool reports them: added, modified, removed paths."""
    out: dict[str, list[str]] = {"added": [], "modified": [], "removed": []}
    for path in sorted(changes):
        if changes[path] is None:
            out["removed"].append(path)
        else:
            out["modified" if path in before else "added"].append(path)
    return out
