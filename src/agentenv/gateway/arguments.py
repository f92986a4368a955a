"""How a call's arguments are refused: nesting past the limit, and pydantic's verdict as
one message (what `Gateway.call` records and every transport shows)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from agentenv.spec.limits import depth_message, value_depth_path

_CONTAINERS = (dict, list)


def too_deep(args: dict[str, Any]) -> str | None:
    """Why `args` nest past the limit (what and where), or None; flat arguments, the common
    case, cost one pass over their values."""
    for value in args.values():
        if type(value) in _CONTAINERS:
            path = value_depth_path(args)
            if path is None:
                return None
            parts = list(map(str, path))
            where = ".".join(parts)
            if len(parts) > 12:  # a path 64 levels deep says no more than its ends do
                where = f"{'.'.join(parts[:6])}...{'.'.join(parts[-3:])}"
            return f"{where}: {depth_message()}"
    return None


def argument_errors(tool: str, exc: ValidationError) -> str:
    """Pydantic's verdict on a call's arguments as one message naming each field."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "arguments"
        msg = "unknown argument" if err["type"] == "extra_forbidden" else err["msg"]
        if err["type"] == "missing":
            msg = "missing required argument"
        parts.append(f"{loc}: {msg}")
    return f"invalid arguments for {tool!r}: " + "; ".join(parts)
