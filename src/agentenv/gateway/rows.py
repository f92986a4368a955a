"""The compact form a trajectory keeps its records in: one tuple of atomic values each.

A `TrajectoryRecord` with its `args` and `result` dicts, a `CallError` model and two
datetimes is a dozen objects the cyclic garbage collector walks on every full pass, for as
long as the record lives; a long-running server or a big rollout held millions, and the GC
passes over them were its tail latency. A row holds the same record as a tuple of strings,
ints, floats, booleans and None only: `args` and `result` as their JSON text (canonical
enough: what `json`'s C encoder writes), times as integer microseconds since the epoch,
the error as its kind and message, the sanitize notes as a tuple of pairs. CPython stops
tracking such a tuple at the first collection it survives, so a row costs the GC nothing
after that, and about half the memory of the objects.

`record(row)` builds the `TrajectoryRecord` a reader asks for (each read builds a new one:
equal, not the same object). Values come back as JSON gives them: a tuple in a result is a
list, a number key a string, exactly what the REST readers always saw.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agentenv.gateway.sanitize import ENCODE, TEXT_FIELDS, Sanitized, clean_fields
from agentenv.spec.limits import MAX_JSON_DEPTH, raw_too_deep
from agentenv.spec.wire import CallError

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
"""One microsecond: `(when - EPOCH) // _US` is a UTC time's slot."""
_construct_error = CallError.model_construct

# Row slots (a row is a plain tuple, in this order).
SEQ, KIND, WALL, STATE_HASH, CHANGELOG_ID, BEFORE, VIRTUAL = range(7)
ROLE, PRINCIPAL, SESSION, TOOL, ARGS, RESULT, ERROR_KIND, ERROR_MESSAGE = range(7, 15)
DENIED, DURATION, TRIGGER_ID, EVENT, DETAIL, SANITIZED = range(15, 21)

Row = tuple[Any, ...]


class Dirty(Exception):
    """A record's values need cleaning (`gateway.sanitize`) before they can be a row."""


def micros(when: datetime | None) -> int | datetime | None:
    """A time as a row keeps it: integer microseconds since the epoch for a UTC time
    (exact for every datetime), the datetime itself for any other zone (kept as given)."""
    if when is None or when.tzinfo is not UTC:
        return when
    return (when - EPOCH) // _US


def time_of(value: int | datetime | str | None) -> datetime | None:
    """The datetime a row's time slot stands for."""
    if type(value) is int:
        return EPOCH + timedelta(0, 0, value)  # positional: faster than microseconds=
    if type(value) is str:  # a zone pickle could not carry (see `portable`)
        return datetime.fromisoformat(value)
    return value  # type: ignore[return-value]


def json_text(value: Any) -> str | None:
    """`value` as JSON text a row can keep, None for None; Dirty when it needs cleaning
    (NaN, a lone surrogate, a value JSON has no form for, nesting past the limit)."""
    if value is None:
        return None
    try:
        chunks = ENCODE(value, 0)
    except (ValueError, TypeError, RecursionError):
        raise Dirty from None
    text = chunks[0] if len(chunks) == 1 else "".join(chunks)
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise Dirty from None
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and raw_too_deep(text):
        raise Dirty
    return text


def clean_text(text: Any) -> Any:
    """A caller-given string field as it is, when UTF-8 can carry it; Dirty otherwise."""
    if text is None or (type(text) is str and (text.isascii() or _utf8(text))):
        return text
    raise Dirty


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def row_of(seq: int, fields: dict[str, Any]) -> tuple[Row, int]:
    """A record's fields (as `Trajectory.append` takes them) as a row, cleaned where they
    had to be (the notes in the row's sanitized slot), and the JSON size of its values."""
    try:
        row = _row(seq, fields)
    except Dirty:
        notes = clean_fields(fields)
        if notes:
            fields["sanitized"] = notes
        row = _row(seq, fields)  # clean now: every value is plain JSON
    return row, len(row[ARGS] or "") + len(row[RESULT] or "")


def _row(seq: int, fields: dict[str, Any]) -> Row:
    get = fields.get
    for name in TEXT_FIELDS:
        clean_text(get(name))
    error = get("error")
    if error is not None:
        clean_text(error.message)
    sanitized = get("sanitized")
    return (
        seq,
        fields["kind"],
        micros(fields["wall_time"]),
        fields["state_hash"],
        fields["changelog_id"],
        get("changelog_id_before"),
        micros(get("virtual_time")),
        get("role"),
        get("principal"),
        get("session"),
        get("tool"),
        json_text(get("args")),
        json_text(get("result")),
        None if error is None else error.kind,
        None if error is None else error.message,
        get("denied", False),
        get("duration_ms", 0.0),
        get("trigger_id"),
        get("event"),
        get("detail"),
        tuple((n["path"], n["what"]) for n in sanitized) if sanitized else None,
    )


def portable(rows: list[Row]) -> list[Row]:
    """Rows whose time slots pickle can carry: a datetime in a zone pickle refuses (a
    tzinfo class defined in a function) becomes its ISO text, which keeps its offset."""
    out = []
    for row in rows:
        if isinstance(row[WALL], datetime) or isinstance(row[VIRTUAL], datetime):
            row = list(row)  # type: ignore[assignment]
            for slot in (WALL, VIRTUAL):
                if isinstance(row[slot], datetime):
                    row[slot] = row[slot].isoformat()  # type: ignore[index]
            row = tuple(row)
        out.append(row)
    return out


def notes_of(row: Row) -> list[Sanitized] | None:
    """The row's sanitize notes as the record has them."""
    notes = row[SANITIZED]
    if notes is None:
        return None
    return [{"path": path, "what": what} for path, what in notes]
