"""A directory tree as records: one record per file, keyed by its path.

A record is `{"path": "src/app.py", "mode": "100644", "content": "...", "encoding": "utf-8"}`:
`mode` is git's (`100644` a file, `100755` an executable one, `120000` a symlink whose
`content` is its target, `040000` an empty folder), and `content` is the text, or base64
where the bytes are not UTF-8 (`encoding: base64`). A folder that holds anything is not a
record of its own: it exists while something is in it (as in git); an empty folder is one,
since programs rely on them (`mkdir -p out`). Only the executable bit of a mode is kept, so a tree hashes the same on every
machine. Paths are relative, `/`-separated and normalised (no `.`, `..` or empty parts).
"""

from __future__ import annotations

import base64
import fnmatch
import os
import re
import stat
import subprocess
import tempfile
from collections.abc import Container, Iterable, Sequence
from pathlib import Path
from typing import Any

from agentenv.workspace.errors import WorkspaceError

FILE = "100644"
EXECUTABLE = "100755"
SYMLINK = "120000"
DIRECTORY = "040000"

Record = dict[str, Any]


def record_of(path: str, data: bytes, mode: str = FILE) -> Record:
    """The record of a file holding `data` (text where it is UTF-8, else base64)."""
    try:
        return {"path": path, "mode": mode, "content": data.decode("utf-8"), "encoding": "utf-8"}
    except UnicodeDecodeError:
        encoded = base64.b64encode(data).decode("ascii")
        return {"path": path, "mode": mode, "content": encoded, "encoding": "base64"}


def bytes_of(record: Record) -> bytes:
    """The bytes a record holds."""
    if record.get("encoding") == "base64":
        return base64.b64decode(record["content"])
    return str(record["content"]).encode("utf-8")


def text_of(record: Record) -> str | None:
    """A record's text, or None for binary content."""
    return record["content"] if record.get("encoding", "utf-8") == "utf-8" else None


def folder_record(path: str) -> Record:
    """The record of an empty folder."""
    return {"path": path, "mode": DIRECTORY, "content": "", "encoding": "utf-8"}


def mode_of(st_mode: int) -> str:
    """git's mode for a file's `st_mode`."""
    if stat.S_ISLNK(st_mode):
        return SYMLINK
    if stat.S_ISDIR(st_mode):
        return DIRECTORY
    return EXECUTABLE if st_mode & 0o111 else FILE


class Ignore:
    """Which paths a tree does not keep: `name/` is a folder of that name at any depth;
    other patterns are globs matched against the file's name and its whole path."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(patterns)
        self._folders = {p.rstrip("/") for p in patterns if p.endswith("/")}
        globs = [p for p in patterns if not p.endswith("/")]
        self._glob = re.compile("|".join(fnmatch.translate(g) for g in globs)) if globs else None

    def folder(self, name: str) -> bool:
        """Whether a folder of this name is skipped."""
        return name in self._folders

    def __call__(self, path: str) -> bool:
        """Whether the file at `path` is skipped."""
        parts = path.split("/")
        if self._folders.intersection(parts[:-1]):
            return True
        if self._glob is None:
            return False
        return bool(self._glob.match(parts[-1]) or self._glob.match(path))


def read_folder(root: Path, ignore: Ignore, max_file_bytes: int | None = None) -> list[Record]:
    """Every file under `root` as records, sorted by path (special files are skipped)."""
    out: list[Record] = []
    for path, entry in walk(root, ignore):
        st = entry.stat(follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            out.append(folder_record(path))
        elif stat.S_ISLNK(st.st_mode):
            out.append(
                {
                    "path": path,
                    "mode": SYMLINK,
                    "content": os.readlink(entry.path),
                    "encoding": "utf-8",
                }
            )
        elif stat.S_ISREG(st.st_mode):
            if max_file_bytes is not None and st.st_size > max_file_bytes:
                raise WorkspaceError(
                    f"{path!r} is {st.st_size / 2**20:.1f} MiB, over the workspace's "
                    f"{max_file_bytes / 2**20:g} MiB limit for one file"
                )
            out.append(record_of(path, Path(entry.path).read_bytes(), mode_of(st.st_mode)))
    out.sort(key=lambda r: r["path"])
    return out


def walk(
    root: Path, ignore: Ignore, known: Container[str] = ()
) -> Iterable[tuple[str, os.DirEntry[str]]]:
    """(relative path, entry) of every file, symlink and empty folder under `root`, not
    following links and skipping ignored paths (a path in `known` is not checked again)."""
    stack: list[tuple[str, str, os.DirEntry[str] | None]] = [("", str(root), None)]
    while stack:
        prefix, folder, own = stack.pop()
        with os.scandir(folder) as scanner:
            entries = list(scanner)
        if not entries and own is not None:
            yield prefix[:-1], own
            continue
        for entry in entries:
            path = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if not ignore.folder(entry.name):
                    stack.append((path + "/", entry.path, entry))
            elif path in known or not ignore(path):
                yield path, entry


def read_git(repo: str, commit: str, ignore: Ignore, cwd: Path) -> list[Record]:
    """The tree of a git repository at `commit`, without its history (a fresh clone's
    working tree)."""
    source = repo if "://" in repo or repo.startswith("git@") else str((cwd / repo).resolve())
    with tempfile.TemporaryDirectory(prefix="agentenv-git-") as scratch:
        clone = Path(scratch) / "tree"
        for argv in (
            ["git", "clone", "--quiet", "--no-checkout", source, str(clone)],
            ["git", "-C", str(clone), "checkout", "--quiet", commit],
        ):
            try:
                done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            except FileNotFoundError:
                raise WorkspaceError("a git seed needs git on PATH") from None
            if done.returncode != 0:
                raise WorkspaceError(
                    f"{' '.join(argv[:2] + argv[-2:])} failed: {done.stderr.strip()[-300:]}"
                )
        return read_folder(clone, Ignore([*ignore.patterns, ".git/"]))


def clean_path(path: str, workdir: str | None = None) -> str:
    """`path` as a tree path: relative to the tree's root (an absolute path must lie under
    `workdir`, where commands see the tree), normalised; WorkspaceError when it leaves it."""
    given = path
    root = (workdir or "").rstrip("/")
    if root and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    elif path.startswith("/"):
        where = f" (the workspace is {workdir})" if workdir else " (give a path relative to it)"
        raise WorkspaceError(f"{given!r} is outside the workspace{where}")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise WorkspaceError(f"{given!r} is outside the workspace")
            parts.pop()
            continue
        parts.append(part)
    return "/".join(parts)
