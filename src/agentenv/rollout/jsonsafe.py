"""Why a value cannot be written as JSON, and text that always can be.

An episode's record holds whatever its agents and tools produced, so it can hold anything:
a lone surrogate (`"\\ud800"`, which UTF-8 cannot encode), nesting a few hundred levels
deep (past what the serialiser follows), an object that is not JSON at all. The store and
the exporters must go on past such a record. These helpers find what broke and where (a
field path), and write text that can always be encoded. They run only after a
serialisation has failed, or on export, so they cost the hot path nothing.
"""

from __future__ import annotations

import json
from datetime import date, datetime, time
from enum import Enum
from typing import Any

from pydantic import BaseModel

from agentenv.spec.limits import MAX_JSON_DEPTH, depth_message

Path = list[str | int]

_PLAIN = (bool, int, float, datetime, date, time, Enum)
_SHOWN_LEVELS = 8


def _surrogate(text: str) -> str | None:
    """The first character of `text` that UTF-8 cannot encode (a lone surrogate), if any."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None


def first_problem(value: Any, limit: int = MAX_JSON_DEPTH) -> tuple[Path, str] | None:
    """Where `value` holds something JSON cannot carry, and what: a lone surrogate in a
    string or a key, a key or value of a type that is not JSON; failing those, its deepest
    point when it nests deeper than `limit`. None if nothing is found. Iterative (a value
    nested thousands of levels deep cannot make it recurse)."""
    deepest: tuple[int, Path] = (0, [])
    stack: list[tuple[Any, Path, int]] = [(value, [], 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            bad = _surrogate(node)
            if bad is not None:
                return path, f"a lone surrogate U+{ord(bad):04X}"
            continue
        if node is None or isinstance(node, _PLAIN):
            continue
        children: list[tuple[Any, Any]]
        if isinstance(node, BaseModel):
            children = [(name, getattr(node, name, None)) for name in type(node).model_fields]
            children += list((node.__pydantic_extra__ or {}).items())
        elif isinstance(node, dict):
            children = list(node.items())
            for key, _ in children:
                if isinstance(key, str):
                    bad = _surrogate(key)
                    if bad is not None:
                        return [*path, key], f"a lone surrogate U+{ord(bad):04X} in a key"
                elif not (key is None or isinstance(key, (bool, int, float))):
                    return path, f"a key of type {type(key).__name__} (not JSON)"
        elif isinstance(node, (list, tuple)):
            children = list(enumerate(node))
        else:
            return path, f"a value of type {type(node).__name__} (not JSON)"
        depth += 1
        if depth > deepest[0]:
            deepest = (depth, path)
        for key, child in reversed(children):  # depth first, in order
            stack.append((child, [*path, key], depth))
    if deepest[0] > limit:
        return deepest[1], f"{depth_message(limit)} ({deepest[0]} levels)"
    return None


def format_path(path: Path) -> str:
    """`prompts[0].response`; a long path shows its first levels and how many follow."""
    shown = path[:_SHOWN_LEVELS]
    out = ""
    for part in shown:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            out += f".{part}" if out else part
        else:
            out += f"[{safe_text(json.dumps(str(part), ensure_ascii=False))}]"
    if len(path) > len(shown):
        out += f"... ({len(path) - len(shown)} levels more)"
    return out or "<root>"


def describe_problem(value: Any, exc: BaseException | None = None) -> str:
    """What cannot be serialised in `value` and where (`<what> at <path>`); when nothing
    is found, the serialiser's own error."""
    found = first_problem(value)
    if found is not None:
        path, what = found
        return safe_text(f"{what} at {format_path(path)}")
    if exc is None:
        return "no value found that JSON cannot carry"
    return error_text(exc)


def error_text(exc: BaseException) -> str:
    """An exception as one line: a validation error as its first few errors with their
    fields (`PromptEntry: response: Input should be a valid string`), anything else as
    `<type>: <message>`. Always valid UTF-8."""
    errors = getattr(exc, "errors", None)
    if callable(errors):
        try:
            found = errors()
            shown = [
                f"{'.'.join(str(p) for p in e.get('loc', ())) or '<root>'}: {e.get('msg', '')}"
                for e in found[:3]
            ]
            more = f"; and {len(found) - 3} more" if len(found) > 3 else ""
            title = getattr(exc, "title", None)
            head = f"{title}: " if isinstance(title, str) else ""
            return safe_text(head + "; ".join(shown) + more)
        except Exception:  # an error that cannot describe itself: its own text will do
            pass
    text = str(exc).splitlines()[0] if str(exc) else ""
    if len(text) > 300:
        text = text[:300] + "..."
    return safe_text(f"{type(exc).__name__}: {text}")


def safe_text(text: str) -> str:
    """`text` with every lone surrogate written as its escape (`\\ud800`): always valid
    UTF-8, and the text shows where it was changed."""
    if _surrogate(text) is None:
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def json_text(value: Any, *, indent: int | None = None) -> str:
    """`value` as JSON text that can always be encoded as UTF-8: non-ASCII characters as
    they are, unless the value holds a lone surrogate, then everything non-ASCII as `\\u`
    escapes (lossless: a reader gets the same strings back)."""
    text = json.dumps(value, ensure_ascii=False, indent=indent)
    if _surrogate(text) is None:
        return text
    return json.dumps(value, ensure_ascii=True, indent=indent)


__all__ = [
    "describe_problem",
    "error_text",
    "first_problem",
    "format_path",
    "json_text",
    "safe_text",
]
