"""The built-in tools of a workspace environment, each an ordinary `Tool`.

The file tools read and write the tree in the state (a transaction per call, like any
tool); `bash` writes the tree out to the instance's sandbox folder, runs the command there
and writes back what it changed. What they return is what a coding agent expects: file text,
exit codes, output marked where it was cut.
"""

from __future__ import annotations

import re
from typing import Any

from agentenv.env.tool import Tool, ToolContext
from agentenv.workspace.disk import describe
from agentenv.workspace.errors import WorkspaceError
from agentenv.workspace.globs import glob_match
from agentenv.workspace.runtime import Workspace
from agentenv.workspace.tree import DIRECTORY, SYMLINK, bytes_of, text_of

_LIST_CAP = 1000
_LINE_CAP = 2000  # characters of one line shown by search_files


def workspace_tools(workspace: Workspace) -> list[Tool]:
    """The tools the document asks for, with the roles it gives each."""
    makers = {
        "bash": _bash,
        "read_file": _read_file,
        "write_file": _write_file,
        "edit_file": _edit_file,
        "list_files": _list_files,
        "search_files": _search_files,
    }
    out: list[Tool] = []
    for name, roles in workspace.spec.tool_roles().items():
        fn, kind = makers[name](workspace)
        built = Tool.from_function(fn, name=name, kind=kind)
        out.append(built.with_options(roles=roles, source=f"workspace:{name}"))
    return out


def _text(record: dict[str, Any], path: str) -> str:
    text = text_of(record)
    if text is None:
        raise WorkspaceError(
            f"{path!r} is a binary file ({len(bytes_of(record))} bytes); inspect it with bash"
        )
    return text


def _bash(ws: Workspace) -> tuple[Any, str]:
    async def bash(ctx: ToolContext, command: str, timeout: float | None = None) -> dict[str, Any]:
        """Run a shell command in the workspace (its folder is the working directory).

        Args:
            command: The command line, run by `bash -c`.
            timeout: Seconds before it is killed (at most the workspace's limit).
        """
        limit = ws.limits.timeout if timeout is None else min(max(timeout, 0.1), ws.limits.timeout)
        files = ws.files(ctx)
        async with ws.tree(ctx) as tree:
            result = await tree.sandbox.exec(
                ["bash", "-c", command], timeout=limit, env=ws.spec.sandbox.env or None
            )
            changes = tree.scan()
            existed = {p for p in changes if files.get(p) is not None}
            files.apply(changes)
            tree.synced = files.tree_hash()  # the folder and the state agree now
        out: dict[str, Any] = {
            "exit_code": result.exit_code,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "changed": describe(changes, existed),
        }
        if result.timed_out:
            out["timed_out"] = True
            out["stderr"] += f"\n[killed: the command ran past its {limit:g} s timeout]"
        if result.truncated:
            out["truncated"] = True
            cap = ws.limits.output_bytes
            out["stderr"] += f"\n[output cut: each stream keeps its first {cap} bytes]"
        return out

    return bash, "write"


def _read_file(ws: Workspace) -> tuple[Any, str]:
    def read_file(
        ctx: ToolContext, path: str, start_line: int | None = None, end_line: int | None = None
    ) -> str:
        """Read a text file of the workspace, whole or a range of its lines.

        Args:
            path: The file, relative to the workspace.
            start_line: The first line to return (1-based).
            end_line: The last line to return (inclusive).
        """
        text = _text(ws.files(ctx).read(path), path)
        if start_line is None and end_line is None:
            return text
        lines = text.splitlines(keepends=True)
        first = 1 if start_line is None else start_line
        last = len(lines) if end_line is None else end_line
        if first > len(lines):
            raise WorkspaceError(f"{path!r} has {len(lines)} lines; line {first} is past its end")
        if first < 1 or last < first:
            raise WorkspaceError(f"no lines {first}..{last}: lines count from 1, in order")
        return "".join(lines[first - 1 : last])

    return read_file, "read"


def _write_file(ws: Workspace) -> tuple[Any, str]:
    def write_file(ctx: ToolContext, path: str, content: str) -> dict[str, Any]:
        """Write a file of the workspace (created, with its folders, if it is new).

        Args:
            path: The file, relative to the workspace.
            content: The whole new text of the file.
        """
        data = content.encode("utf-8")
        if len(data) > ws.max_file_bytes:
            raise WorkspaceError(
                f"{len(data)} bytes is over the workspace's {ws.spec.max_file_mb:g} MiB limit"
            )
        record, created = ws.files(ctx).write(path, data)
        return {"path": record["path"], "bytes": len(data), "created": created}

    return write_file, "write"


def _edit_file(ws: Workspace) -> tuple[Any, str]:
    def edit_file(
        ctx: ToolContext, path: str, old_string: str, new_string: str, replace_all: bool = False
    ) -> dict[str, Any]:
        """Replace an exact string in a file: it must occur once (or set replace_all).

        Args:
            path: The file, relative to the workspace.
            old_string: The text to replace, exactly as it is in the file.
            new_string: The text to put in its place.
            replace_all: Replace every occurrence instead of requiring exactly one.
        """
        if not old_string:
            raise WorkspaceError("old_string is empty: say what to replace")
        files = ws.files(ctx)
        text = _text(files.read(path), path)
        count = text.count(old_string)
        if count == 0:
            raise WorkspaceError(f"old_string does not occur in {path!r}; nothing was changed")
        if count > 1 and not replace_all:
            raise WorkspaceError(
                f"old_string occurs {count} times in {path!r}; give more context to make it "
                "unique, or set replace_all; nothing was changed"
            )
        files.write(path, text.replace(old_string, new_string).encode("utf-8"))
        return {"path": files.resolve(path), "replacements": count}

    return edit_file, "write"


def _list_files(ws: Workspace) -> tuple[Any, str]:
    def list_files(ctx: ToolContext, pattern: str = "**", path: str = ".") -> dict[str, Any]:
        """List the workspace's files under a folder whose paths match a glob.

        Args:
            pattern: A glob on paths relative to `path` (`*` within a folder, `**` across folders).
            path: The folder to list, relative to the workspace.
        """
        files = ws.files(ctx)
        folder = files.resolve(path)
        held = files.get(folder) if folder else None
        if held is not None and held["mode"] != DIRECTORY:
            raise WorkspaceError(f"{path!r} is a file, not a folder")
        prefix = folder + "/" if folder else ""
        shown = {SYMLINK: lambda r: " -> " + str(r["content"]), DIRECTORY: lambda r: "/"}
        found = [
            r["path"] + (shown[r["mode"]](r) if r["mode"] in shown else "")
            for r in files.records()
            if r["path"].startswith(prefix) and glob_match(pattern, r["path"][len(prefix) :])
        ]
        found.sort()
        return {
            "files": found[:_LIST_CAP],
            "count": len(found),
            "truncated": len(found) > _LIST_CAP,
        }

    return list_files, "read"


def _search_files(ws: Workspace) -> tuple[Any, str]:
    def search_files(
        ctx: ToolContext,
        pattern: str,
        glob: str = "**",
        ignore_case: bool = False,
        max_results: int = 100,
    ) -> dict[str, Any]:
        """Search the workspace's text files for lines matching a regular expression.

        Args:
            pattern: A Python regular expression.
            glob: Only files whose paths match this glob.
            ignore_case: Match regardless of case.
            max_results: The most matching lines to return.
        """
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            raise WorkspaceError(
                f"pattern {pattern!r} is not a regular expression: {exc}"
            ) from None
        matches: list[dict[str, Any]] = []
        total = 0
        for record in sorted(ws.files(ctx).records(), key=lambda r: r["path"]):
            text = text_of(record)
            if (
                text is None
                or record["mode"] in (SYMLINK, DIRECTORY)
                or not glob_match(glob, record["path"])
            ):
                continue
            for number, line in enumerate(text.splitlines(), 1):
                if regex.search(line):
                    total += 1
                    if len(matches) < max_results:
                        matches.append(
                            {"path": record["path"], "line": number, "text": line[:_LINE_CAP]}
                        )
        return {"matches": matches, "count": total, "truncated": total > len(matches)}

    return search_files, "read"
