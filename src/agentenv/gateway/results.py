"""CallResult: what `Gateway.call` returns, and its wire forms; the encoding of a result.

A result the gateway answers with as a success must be one every transport can carry:
REST's `json.dumps`, MCP's pydantic JSON, UTF-8 on every wire, the nesting limit of
`spec.limits`. `encode_result` proves it while the call's transaction is still open, so a
result that fails is the call's `invalid_result` error (state rolled back, call recorded)
rather than an error in a transport after the write was kept.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from agentenv.spec.limits import MAX_JSON_DEPTH, depth_message, raw_too_deep, value_depth_path
from agentenv.spec.wire import CallError, StepResult, TextContent

_MAX_VISITS = 100_000  # the search for what is wrong gives up past this many values


class InvalidResult(Exception):
    """A tool's result that some transport could not carry (the call's `invalid_result`)."""


def encode_result(value: Any) -> str:
    """The text of a result (`content[0].text`): the string itself, or its JSON.

    Raises InvalidResult, saying what is wrong and where, for a value JSON cannot carry
    (a set, an object, NaN), one nested deeper than `MAX_JSON_DEPTH`, or text holding a
    lone surrogate (not UTF-8). The common case costs the `json.dumps` plus two C scans.
    """
    if _DUMPS is not None and not isinstance(value, str):
        # The common case in one step: plain JSON, few brackets, ASCII (else `_encode`).
        try:
            chunks = _DUMPS(value, 0)
        except (TypeError, ValueError, RecursionError):
            pass
        else:
            text = chunks[0] if len(chunks) == 1 else "".join(chunks)
            if text.isascii() and text.count("[") + text.count("{") <= MAX_JSON_DEPTH:
                return text
    try:
        return _encode(value)
    except _Unsendable as exc:
        raise InvalidResult(
            "the tool's result cannot be sent: " + _what_is_wrong(value, exc.cause, "result")
        ) from None


def unsendable(value: Any, root: str) -> str | None:
    """Why `value` could not travel as JSON on every transport, naming the place from
    `root` (e.g. `parts[0].data.tickets[3].name holds a lone surrogate ...`); None if it
    can. For values that will be sent later (stored records), checked when they arrive."""
    try:
        _encode(value)
    except _Unsendable as exc:
        return _what_is_wrong(value, exc.cause, root)
    return None


class _Unsendable(Exception):
    def __init__(self, cause: BaseException | None) -> None:
        self.cause = cause


def _make_dumps() -> Any:
    """`json.dumps(value, ensure_ascii=False, allow_nan=False)` without building an encoder
    per call (most of a small dump's cost): the same C encoder, made once. It skips the
    circular-reference check; anything it refuses is dumped again by `json.dumps` itself,
    so errors (and their messages) are json's own."""
    from json import encoder as _json

    if _json.c_make_encoder is None:  # not CPython's C encoder: json.dumps it is
        return None
    default = json.JSONEncoder().default
    return _json.c_make_encoder(
        None, default, _json.encode_basestring, None, ": ", ", ", False, False, False
    )


_DUMPS = _make_dumps()


def _dumps(value: Any) -> str:
    if _DUMPS is not None:
        try:
            chunks = _DUMPS(value, 0)
        except (TypeError, ValueError, RecursionError):
            pass  # json.dumps below raises what json raises, with its message
        else:
            return chunks[0] if len(chunks) == 1 else "".join(chunks)
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


def _encode(value: Any) -> str:
    if isinstance(value, str):
        text = value
    else:
        try:
            text = _dumps(value)
        except (TypeError, ValueError, RecursionError) as exc:
            raise _Unsendable(exc) from None
        # Fewer brackets than the limit cannot nest past it: counted in C, no walk.
        if raw_too_deep(text):
            raise _Unsendable(None)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise _Unsendable(None) from None
    return text


def _what_is_wrong(value: Any, exc: BaseException | None, root: str) -> str:
    """The first bad value found and its path from `root`."""
    deep = value_depth_path(value)
    if deep is not None:
        return f"{_path(deep, root)} is {depth_message()}"
    found = _first_bad(value)
    if found is not None:
        return f"{_path(found[0], root)} {found[1]}"
    return f"it is not JSON ({exc})" if exc is not None else "it is not JSON"


def _first_bad(value: Any) -> tuple[list[str | int], str] | None:
    # Only on the failure path. Depth is already known to be within the limit, so this
    # walk cannot recurse into a cycle; shared subtrees are bounded by _MAX_VISITS.
    stack: list[tuple[Any, list[str | int]]] = [(value, [])]
    visits = 0
    while stack and visits < _MAX_VISITS:
        node, path = stack.pop()
        visits += 1
        problem = _scalar_problem(node)
        if problem is not None:
            return path, problem
        if isinstance(node, dict):
            for key, child in reversed(node.items()):
                if not isinstance(key, str | int | float | bool) and key is not None:
                    return path, f"has a key of type {type(key).__name__} (keys must be strings)"
                key_problem = _scalar_problem(key)
                if key_problem is not None:
                    return path, f"has a key that {key_problem}"
                stack.append((child, [*path, key]))
        elif isinstance(node, list | tuple):
            stack.extend((child, [*path, i]) for i, child in reversed(list(enumerate(node))))
        elif not isinstance(node, str | int | float | bool) and node is not None:
            return path, f"is of type {type(node).__name__}, which JSON cannot carry"
    return None


def _scalar_problem(node: Any) -> str | None:
    if isinstance(node, str):
        if not node.isascii():
            try:
                node.encode("utf-8")
            except UnicodeEncodeError as exc:
                return (
                    f"holds a lone surrogate ({node[exc.start]!r} at character {exc.start}), "
                    "which is not UTF-8"
                )
        return None
    if isinstance(node, float) and not math.isfinite(node):
        return f"is {node!r}, which JSON cannot carry"
    return None


def _path(parts: list[str | int], root: str) -> str:
    if len(parts) > 12:  # a path 64 levels deep says no more than its ends do
        return f"{_path(parts[:6], root)}...{_path(parts[-3:], '')}"
    out = root
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out += f"[{part}]"
        else:
            out += f".{part}" if str(part).isidentifier() else f"[{part!a}]"
    return out


def safe_text(message: str) -> str:
    """`message` with any lone surrogate written as its escape (`\\ud800`), so that an
    error message quoting bad input can itself be sent on every transport."""
    if message.isascii():
        return message
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


@dataclass(slots=True)
class CallResult:
    """The outcome of one tool call. `ok` is False for every kind of failure."""

    ok: bool
    value: Any
    text: str
    error: CallError | None
    changelog_id: int
    seq: int
    state_hash: str

    @property
    def denied(self) -> bool:
        """Whether access rules refused the call."""
        return self.error is not None and self.error.kind == "denied"

    @property
    def structured(self) -> dict[str, Any] | None:
        """MCP's `structuredContent`: the result if it is an object, else `{"result": ...}`."""
        if self.error is not None:
            return None
        return self.value if isinstance(self.value, dict) else {"result": self.value}

    def to_step_result(self) -> StepResult:
        """The protocol's answer to a `call_tool` step."""
        return StepResult(
            content=[TextContent(text=self.text)],
            isError=not self.ok,
            structuredContent=self.structured,
            changelog_id=self.changelog_id,
            error=self.error,
        )

    def to_wire(self) -> dict[str, Any]:
        """`to_step_result()` as JSON data, built directly (this is the hot path of /step)."""
        body: dict[str, Any] = {
            "content": [{"type": "text", "text": self.text}],
            "isError": not self.ok,
            "structuredContent": self.structured,
            "changelog_id": self.changelog_id,
        }
        if self.error is not None:
            body["error"] = {"kind": self.error.kind, "message": self.error.message}
        return body
