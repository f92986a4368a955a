"""What changed between two trees: files added, removed and changed, and a unified diff."""

from __future__ import annotations

import difflib

from pydantic import BaseModel, Field

from agentenv.state import Snapshot, State, diff
from agentenv.workspace.tree import Record, bytes_of, text_of


class TreeDiff(BaseModel):
    """Files added, removed and changed (sorted paths), and the text of a unified diff
    (binary files are named, not shown)."""

    added: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    changed: list[str] = Field(default_factory=list)
    patch: str = ""

    @property
    def empty(self) -> bool:
        """Whether the trees hold the same files."""
        return not (self.added or self.removed or self.changed)


def _lines(record: Record | None) -> list[str] | None:
    if record is None:
        return []
    text = text_of(record)
    return None if text is None else text.splitlines(keepends=True)


def _patch(path: str, before: Record | None, after: Record | None) -> str:
    old, new = _lines(before), _lines(after)
    if old is None or new is None:
        size = len(bytes_of(after)) if after is not None else 0
        return f"Binary files a/{path} and b/{path} differ ({size} bytes now)\n"
    lines = list(
        difflib.unified_diff(
            old,
            new,
            "/dev/null" if before is None else f"a/{path}",
            "/dev/null" if after is None else f"b/{path}",
        )
    )
    fixed = [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    ]
    return "".join(fixed)


def tree_diff(
    before: State | Snapshot, after: State | Snapshot, collection: str = "files"
) -> TreeDiff:
    """How the tree in `collection` differs from `before` to `after` (each a state or
    snapshot; the cost follows the number of changed files, not the tree's size)."""
    change = diff(before, after).collections.get(collection)
    if change is None:
        return TreeDiff()
    parts: list[str] = []
    old: dict[str, Record | None] = {}
    new: dict[str, Record | None] = {}
    for path, record in change.added.items():
        old[path], new[path] = None, record
    for path, record in change.removed.items():
        old[path], new[path] = record, None
    for path, record_change in change.changed.items():
        old[path], new[path] = record_change.before, record_change.after
    for path in sorted(old):
        parts.append(_patch(path, old[path], new[path]))
    return TreeDiff(
        added=sorted(change.added),
        removed=sorted(change.removed),
        changed=sorted(change.changed),
        patch="".join(parts),
    )
