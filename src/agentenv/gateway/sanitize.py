"""Make a trajectory record's values JSON that every reader can encode and parse.

A record holds what callers and tools gave: over the wire that is JSON, but JSON text can
spell a lone surrogate (`"\\ud800"`, which UTF-8 cannot encode), and in-process callers can
pass NaN, infinities, values nested thousands of levels deep, cycles, or Python objects
JSON has no form for. One such record used to make every later `GET /trajectory` of its
instance fail. So `clean_fields` makes each record safe as it is appended, and says what it
changed in the record's `sanitized` list, one `{path, what}` per replaced value:

- `path`: a JSON Pointer (RFC 6901) into the record: `/args/text`, `/result/items/3`, `/tool`,
  `/error/message`, `/detail`;
- `what`: `lone_surrogate` (each surrogate code point became U+FFFD), `nan`, `infinity` or
  `-infinity` (the number became `null`), `too_deep` (a container nested deeper than
  `MAX_JSON_DEPTH` became the string `TOO_DEEP`), `circular` (a container holding itself
  became `CIRCULAR`), `not_json` (a Python value JSON has no form for became its `repr`, cut
  at `REPR_CHARS`), or `more` (past `MAX_NOTES` notes, one last note: more values under that
  path were replaced too).

Dict keys that are numbers, booleans or None become strings silently, as `json` does.

The common record is small plain JSON, so the check is one C-level encode of every value
and string of the record together (`json`'s C encoder, no circular check, NaN refused), an
O(1) ASCII test of the text, and a C-level bracket count; only a record that fails it is
walked, iteratively (it cannot recurse too deep itself).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from operator import itemgetter
from typing import Any, Literal

from typing_extensions import TypedDict

from agentenv.spec.limits import MAX_JSON_DEPTH, depth_message, raw_too_deep

MAX_NOTES = 32
"""The most `{path, what}` notes one record keeps (then one `more`)."""
REPR_CHARS = 1000
"""How much of a non-JSON value's `repr` is kept."""
REPLACEMENT = "\ufffd"
"""What each surrogate code point of a string becomes."""
TOO_DEEP = f"<cut: {depth_message(MAX_JSON_DEPTH)}>"
"""What a container nested deeper than `MAX_JSON_DEPTH` becomes."""
CIRCULAR = "<cut: a container that holds itself>"
"""What a container found inside itself becomes."""

What = Literal[
    "lone_surrogate", "nan", "infinity", "-infinity", "too_deep", "circular", "not_json", "more"
]
TEXT_FIELDS = ("tool", "role", "principal", "session", "trigger_id", "event", "detail")
"""The record's string fields that come from callers (checked like values)."""


class Sanitized(TypedDict):
    """One value of a record that was replaced so that the record stays JSON."""

    path: str
    what: What


_SURROGATE = re.compile("[\ud800-\udfff]")


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _make_encoder() -> Any:
    from json import encoder as _json

    if _json.c_make_encoder is not None:  # CPython: the whole encode runs in C
        return _json.c_make_encoder(
            None, _not_json, _json.encode_basestring, None, ":", ",", False, False, False
        )
    fallback = json.JSONEncoder(ensure_ascii=False, allow_nan=False, check_circular=False)
    return lambda value, _level: [fallback.encode(value)]


ENCODE = _ENCODE = _make_encoder()
"""value, 0 -> list of str chunks (compact JSON, non-ASCII kept). Raises on NaN/inf
(ValueError), non-JSON (TypeError), a cycle or very deep nesting (RecursionError)."""


def encode(value: Any) -> str:
    """`value` as compact JSON text (non-ASCII kept), strictly: NaN and non-JSON refused."""
    return "".join(_ENCODE(value, 0))


_CALL_VALUES = itemgetter("args", "result", "tool", "role", "principal", "session")
"""What a call record's fields hold from callers (the gateway passes every one of them)."""


def quick_size(fields: dict[str, Any], *, result_clean: bool = False) -> int | None:
    """The JSON size of a record's caller-given values when they are all plain JSON that
    UTF-8 can carry and that nest no deeper than the limit; None when they need cleaning.
    `result_clean`: the caller has proven the result so already (it is not encoded)."""
    try:
        probe: tuple[Any, ...] = _CALL_VALUES(fields)
    except KeyError:  # not a call record: the fields it has
        probe = tuple(fields.get(name) for name in ("args", "result", *TEXT_FIELDS))
    else:
        if result_clean:
            probe = (probe[0], None, *probe[2:])
        extra = fields.get("detail"), fields.get("event"), fields.get("trigger_id")
        if extra != (None, None, None):
            probe += extra
    error = fields.get("error")
    if error is not None:
        probe += (error.message,)
    try:
        chunks = _ENCODE(probe, 0)
    except (ValueError, TypeError, RecursionError):
        return None
    text = chunks[0] if len(chunks) == 1 else "".join(chunks)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return None
    # The probe wraps the values in one more level (the tuple).
    if raw_too_deep(text, MAX_JSON_DEPTH + 1):
        return None
    return len(text)


def clean_fields(fields: dict[str, Any]) -> list[Sanitized]:
    """Replace, in place, what in a record's fields JSON cannot carry; the notes of what was
    replaced (empty when nothing was)."""
    notes = _Notes()
    for name in TEXT_FIELDS:
        value = fields.get(name)
        if isinstance(value, str):
            fields[name] = notes.text(value, f"/{name}")
        elif value is not None:
            fields[name] = json_safe(value, f"/{name}", notes)
    for name in ("args", "result"):
        if name in fields:
            fields[name] = json_safe(fields[name], f"/{name}", notes)
    error = fields.get("error")
    if error is not None and not _clean(error.message):
        fields["error"] = error.model_copy(
            update={"message": notes.text(error.message, "/error/message")}
        )
    return notes.done()


def json_safe(value: Any, path: str, notes: _Notes | None = None) -> Any:
    """A copy of `value` that is JSON every reader can carry, as the module docstring says;
    what was replaced goes to `notes`."""
    notes = notes if notes is not None else _Notes()
    active: set[int] = set()
    clean, frame = _enter(value, path, 1, notes, active)
    frames = [frame] if frame is not None else []
    while frames:
        items, target, base, node_id, depth = frames[-1]
        item = next(items, None)
        if item is None:
            frames.pop()
            active.discard(node_id)
            continue
        key, child = item
        if isinstance(target, dict):
            key = _key(key, base, notes)
            child_path = f"{base}/{_pointer(key)}"
        else:
            child_path = f"{base}/{key}"
        child_clean, child_frame = _enter(child, child_path, depth + 1, notes, active)
        if isinstance(target, dict):
            target[key] = child_clean
        else:
            target.append(child_clean)
        if child_frame is not None:
            frames.append(child_frame)
    return clean


_Frame = tuple[Iterator[tuple[Any, Any]], "dict[str, Any] | list[Any]", str, int, int]


def _enter(
    node: Any, path: str, depth: int, notes: _Notes, active: set[int]
) -> tuple[Any, _Frame | None]:
    """The clean form of one node, and the frame that fills it when it is a container."""
    if node is None or node is True or node is False:
        return node, None
    if isinstance(node, str):
        return notes.text(node, path), None
    if isinstance(node, int):
        return node, None
    if isinstance(node, float):
        if node != node:
            notes.add(path, "nan")
            return None, None
        if node in (float("inf"), float("-inf")):
            notes.add(path, "infinity" if node > 0 else "-infinity")
            return None, None
        return node, None
    if isinstance(node, dict | list | tuple):
        if depth > MAX_JSON_DEPTH:
            notes.add(path, "too_deep")
            return TOO_DEEP, None
        if id(node) in active:
            notes.add(path, "circular")
            return CIRCULAR, None
        active.add(id(node))
        if isinstance(node, dict):
            target: dict[str, Any] | list[Any] = {}
            items: Iterator[tuple[Any, Any]] = iter(list(node.items()))
        else:
            target = []
            items = enumerate(list(node))
        return target, (items, target, path, id(node), depth)
    notes.add(path, "not_json")
    return notes.text(_repr(node), path, quiet=True), None


def _key(key: Any, base: str, notes: _Notes) -> str:
    if isinstance(key, str):
        if _clean(key):
            return key
        clean = _SURROGATE.sub(REPLACEMENT, key)
        notes.add(f"{base}/{_pointer(clean)}", "lone_surrogate")  # the path names it clean
        return clean
    if isinstance(key, float) and not math.isfinite(key):
        return "NaN" if key != key else ("Infinity" if key > 0 else "-Infinity")  # as json does
    if key is None or isinstance(key, bool | int | float):
        return encode(key)
    text = notes.text(_repr(key), base, quiet=True)
    notes.add(f"{base}/{_pointer(text)}", "not_json")
    return text


def _repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not lose the record
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= REPR_CHARS else text[:REPR_CHARS] + "…"


def _pointer(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def _clean(text: str) -> bool:
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Notes:
    """The notes of one record, capped at `MAX_NOTES` (then one `more`)."""

    __slots__ = ("notes",)

    def __init__(self) -> None:
        self.notes: list[Sanitized] = []

    def add(self, path: str, what: What) -> None:
        if len(self.notes) < MAX_NOTES:
            self.notes.append({"path": path, "what": what})
        elif len(self.notes) == MAX_NOTES:
            self.notes.append({"path": path, "what": "more"})

    def text(self, text: str, path: str, *, quiet: bool = False) -> str:
        """`text` with its surrogates replaced (noted unless `quiet`)."""
        if _clean(text):
            return text
        if not quiet:
            self.add(path, "lone_surrogate")
        return _SURROGATE.sub(REPLACEMENT, text)

    def done(self) -> list[Sanitized]:
        return self.notes
