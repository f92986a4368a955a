"""Tools of the files service: a cloud drive of text files keyed by absolute path.

Folders are implicit (a file `/work/a.md` makes `/work` exist). Paths are checked: they are
absolute, made of letters, digits, dots, dashes and underscores, with no `..` parts.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from agentenv import ToolContext, ToolError, tool

MAX_BYTES = 1_000_000
_PART = re.compile(r"^[A-Za-z0-9._-]+$")
_ADDRESS = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _path(path: str, field: str = "path") -> str:
    clean = path.strip()
    parts = clean.split("/")
    if not clean.startswith("/") or clean == "/" or clean.endswith("/"):
        raise ToolError(f"{field}: {path!r} must be an absolute file path like /work/notes.md")
    if any(p in ("", ".", "..") or not _PART.match(p) for p in parts[1:]):
        raise ToolError(
            f"{field}: {path!r} may only use letters, digits, '.', '-' and '_' between "
            "slashes, and no '..'"
        )
    return clean


def _file(ctx: ToolContext, path: str) -> dict[str, Any]:
    found = ctx.state.get("files", _path(path))
    if found is None:
        raise ToolError(f"no file {path!r}; list_files shows what is there")
    return found


def _check_parents(ctx: ToolContext, path: str) -> None:
    """A file cannot live inside another file, nor replace a folder."""
    parts = path.split("/")
    for i in range(2, len(parts)):
        parent = "/".join(parts[:i])
        if ctx.state.has("files", parent):
            raise ToolError(f"{parent} is a file, not a folder")
    for record in ctx.state.list("files"):
        if record["path"].startswith(path + "/"):
            raise ToolError(f"{path} is a folder")


def _info(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in ("path", "size", "modified_at", "shared_with")}


@tool(kind="read", duration=2)
def list_files(ctx: ToolContext, folder: str = "/") -> dict[str, Any]:
    """List what a folder holds: its files (path, size, modified_at) and its sub-folders.

    Args:
        folder: An absolute folder path, e.g. / or /work.
    """
    prefix = "/" if folder.strip() in ("", "/") else _path(folder.rstrip("/"), "folder") + "/"
    files, folders = [], set()
    for record in ctx.state.list("files"):
        if not record["path"].startswith(prefix):
            continue
        rest = record["path"][len(prefix) :]
        if "/" in rest:
            folders.add(prefix + rest.split("/")[0])
        else:
            files.append(_info(record))
    if not files and not folders and prefix != "/":
        raise ToolError(f"no folder {folder!r}")
    files.sort(key=lambda f: f["path"])
    return {"folder": prefix.rstrip("/") or "/", "folders": sorted(folders), "files": files}


@tool(kind="read", duration=2)
def read_file(ctx: ToolContext, path: str) -> dict[str, Any]:
    """Read a file's content.

    Args:
        path: The file's absolute path, e.g. /work/roadmap-q2.md.
    """
    return _file(ctx, path)


@tool(kind="write", duration=4)
def write_file(
    ctx: ToolContext, path: str, content: str, overwrite: bool = False
) -> dict[str, Any]:
    """Create a file, or replace one when `overwrite` is true.

    Args:
        path: The absolute path, e.g. /personal/packing-list.md.
        content: The whole text of the file (at most 1 MB).
        overwrite: Replace the file if it exists (otherwise an existing file is an error).
    """
    clean = _path(path)
    size = len(content.encode("utf-8"))
    if size > MAX_BYTES:
        raise ToolError(f"the content is {size} bytes; the limit is {MAX_BYTES}")
    existing = ctx.state.get("files", clean)
    if existing is not None and not overwrite:
        raise ToolError(f"{clean} exists; pass overwrite=true to replace it")
    _check_parents(ctx, clean)
    record = {
        "path": clean,
        "content": content,
        "size": size,
        "modified_at": _stamp(ctx.now),
        "shared_with": existing["shared_with"] if existing else [],
    }
    return _info(ctx.state.put("files", record))


@tool(kind="write", duration=3)
def move_file(ctx: ToolContext, path: str, new_path: str) -> dict[str, Any]:
    """Move or rename a file. The target must not exist.

    Args:
        path: The file to move.
        new_path: Where it goes, e.g. /work/archive/roadmap-q1.md.
    """
    record = _file(ctx, path)
    target = _path(new_path, "new_path")
    if target == record["path"]:
        raise ToolError("new_path is the same as path")
    if ctx.state.has("files", target):
        raise ToolError(f"{target} exists already; delete or rename it first")
    _check_parents(ctx, target)
    ctx.state.delete("files", record["path"])
    return _info(ctx.state.insert("files", {**record, "path": target}))


@tool(kind="write", duration=2)
def delete_file(ctx: ToolContext, path: str) -> dict[str, Any]:
    """Delete a file for good.

    Args:
        path: The file to delete.
    """
    record = _file(ctx, path)
    ctx.state.delete("files", record["path"])
    return {"deleted": record["path"]}


@tool(kind="write", duration=3)
def share_file(ctx: ToolContext, path: str, email: str) -> dict[str, Any]:
    """Give someone read access to a file.

    Args:
        path: The file to share.
        email: The person's email address.
    """
    record = _file(ctx, path)
    address = email.strip().lower()
    if not _ADDRESS.match(address):
        raise ToolError(f"{email!r} is not an email address")
    if address in record["shared_with"]:
        raise ToolError(f"{record['path']} is already shared with {address}")
    shared = [*record["shared_with"], address]
    return _info(ctx.state.update("files", record["path"], {"shared_with": shared}))
