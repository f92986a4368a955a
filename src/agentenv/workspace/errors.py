"""The one error of workspace tools: a ToolError, so a call that raises it fails with its
message and leaves the tree as it was."""

from __future__ import annotations

from agentenv.env.tool import ToolError


class WorkspaceError(ToolError):
    """A workspace operation refused or failed (a path outside the tree, no such file, an
    edit that matches nothing, a file over the size limit, ...)."""
