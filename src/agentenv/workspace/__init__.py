"""Workspace environments: a directory tree as state (one record per file), the file and
shell tools that work on it, and the folder each instance's commands run in.

`Workspace` is built from a document's `workspace:` block; `workspace_tools` are its
tools; `tree_diff` and `Files` read trees; see docs/workspaces.md.
"""

from agentenv.workspace.diff import TreeDiff, tree_diff
from agentenv.workspace.disk import WorkTree
from agentenv.workspace.errors import WorkspaceError
from agentenv.workspace.files import Files
from agentenv.workspace.globs import glob_match
from agentenv.workspace.runtime import Workspace
from agentenv.workspace.tools import workspace_tools
from agentenv.workspace.tree import Ignore, bytes_of, read_folder, record_of, text_of

__all__ = [
    "Files",
    "Ignore",
    "TreeDiff",
    "WorkTree",
    "Workspace",
    "WorkspaceError",
    "bytes_of",
    "glob_match",
    "read_folder",
    "record_of",
    "text_of",
    "tree_diff",
    "workspace_tools",
]
