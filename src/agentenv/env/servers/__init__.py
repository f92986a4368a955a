"""Process environments: an environment whose tools live in a server process (issue 13).

`ServerRuntime` (runtime.py) holds a loaded environment's children; `remote_tools`
(tools.py) turns a server's tool list into our Tools; `mirror_into` (mirror.py) writes a
server's data plane into an instance's State. The backends (stdio.py, ...) start children.
"""

from agentenv.env.servers.base import (
    ROLE_META_KEY,
    SESSION_META_KEY,
    Child,
    ChildGone,
    ServerBackend,
    ServerError,
    ToolAnswer,
    ToolListing,
)
from agentenv.env.servers.mirror import collections_of, mirror_into
from agentenv.env.servers.runtime import ServerRuntime, default_log_dir
from agentenv.env.servers.tools import answer_value, remote_tool, remote_tools

__all__ = [
    "ROLE_META_KEY",
    "SESSION_META_KEY",
    "Child",
    "ChildGone",
    "ServerBackend",
    "ServerError",
    "ServerRuntime",
    "ToolAnswer",
    "ToolListing",
    "answer_value",
    "collections_of",
    "default_log_dir",
    "mirror_into",
    "remote_tool",
    "remote_tools",
]
