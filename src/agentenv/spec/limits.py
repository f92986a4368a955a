"""The limits every JSON value that crosses a transport is held to.

Deeply nested JSON is valid JSON and hostile input: `json`, pydantic and our own walkers
recurse on it, so a few hundred levels in they raise `RecursionError` (a 500 if nobody
catches it) and a few thousand in they can take the process down. Every route that reads a
body, and `Gateway.call` for arguments that arrive in-process, refuse values nested deeper
than `MAX_JSON_DEPTH` with a 400 / invalid-arguments error that says so.

64 levels is far past what any tool schema in the field declares (MCP's own examples stay
under 10) and far below where anything in the stack recurses into trouble.
"""

from __future__ import annotations

import re
from typing import Any

MAX_JSON_DEPTH = 64
"""How deep a JSON value may nest: each object or array is one level."""

BODY_DEPTH = 2 * MAX_JSON_DEPTH
"""How deep a whole request body (or MCP message) may nest. Twice the value limit, so a
body wrapping arguments that are too deep still parses and the gateway refuses them as a
recorded `invalid_arguments` call, on REST and MCP alike."""

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKETS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[{]}")


def depth_message(limit: int = MAX_JSON_DEPTH) -> str:
    """The one wording of a nesting refusal, on every transport."""
    return f"JSON nested deeper than {limit} levels"


def raw_too_deep(raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether JSON text nests objects/arrays deeper than `limit`, found without parsing it.

    Fast for the common case: a body with no more than `limit` brackets cannot nest past
    it, and counting them is done in C. Otherwise strings are skipped (a bracket inside one
    is not structure) and the bracket skeleton is measured, unterminated nesting included.
    """
    if isinstance(raw, str):
        # Counted before encoding: callers check every result and record text this way.
        if raw.count("[") + raw.count("{") <= limit:
            return False
        data = raw.encode("utf-8", "surrogatepass")
    else:
        if raw.count(b"[") + raw.count(b"{") <= limit:
            return False
        data = raw
    skeleton = _without_strings(data).translate(_BRACKETS, _NOT_BRACKETS)
    depth = 0
    # Peel innermost pairs: each pass removes one level, all in C.
    while skeleton:
        if depth >= limit:
            return True
        peeled = skeleton.replace(b"()", b"")
        if len(peeled) == len(skeleton):
            # Unbalanced (`)))(((`): what is left open still nests, and a parser would
            # recurse into it before it found the text malformed.
            opened = max(skeleton.count(b"("), skeleton.count(b")"))
            return depth + opened > limit
        skeleton = peeled
        depth += 1
    return False


def _without_strings(data: bytes) -> bytes:
    """`data` with every JSON string emptied (a bracket inside a string is not structure)."""
    return _STRING.sub(b'""', data) if b'"' in data else data


def value_depth_path(value: Any, limit: int = MAX_JSON_DEPTH) -> list[str | int] | None:
    """Where a parsed value first nests deeper than `limit` (a path of keys and indexes),
    or None if it does not. Iterative, so it cannot itself recurse too deep."""
    stack: list[tuple[Any, int, list[str | int]]] = [(value, 1, [])]
    while stack:
        node, depth, path = stack.pop()
        if isinstance(node, dict):
            children: Any = node.items()
        elif isinstance(node, (list, tuple)):
            children = enumerate(node)
        else:
            continue
        if depth > limit:
            return path
        for key, child in children:
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, depth + 1, [*path, key]))
    return None


def value_too_deep(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether a parsed value nests deeper than `limit`."""
    return value_depth_path(value, limit) is not None


__all__ = [
    "BODY_DEPTH",
    "MAX_JSON_DEPTH",
    "depth_message",
    "raw_too_deep",
    "value_depth_path",
    "value_too_deep",
]
