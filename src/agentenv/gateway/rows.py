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

import re
from datetime import UTC, datetime, timedelta
from json.decoder import JSONDecoder
from json.encoder import encode_basestring as _quote
from typing import Any

from agentenv.gateway.sanitize import ENCODE, TEXT_FIELDS, Sanitized, clean_fields
from agentenv.spec.limits import raw_too_deep
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
    if raw_too_deep(text):
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


def _text(value: str | None) -> str:
    return "null" if value is None else _quote(value)


def _time_text(value: Any) -> str | None:
    # pydantic's form of a UTC datetime: ISO 8601 with `Z`, microseconds only if any.
    if value is None:
        return "null"
    if type(value) is not int:
        return None  # a time in another zone: the record's own dump says it
    when = EPOCH + timedelta(0, 0, value)
    return (
        '"' + when.isoformat(timespec="microseconds" if when.microsecond else "seconds")[:-6] + 'Z"'
    )


_SCAN = JSONDecoder().scan_once
_EXPONENT = re.compile(r"[0-9][eE]").search


def _value_text(value: Any) -> str | None:
    if value is None:
        return "null"
    if type(value) is str:
        # The gateway keeps a result as the text it sent, with `json`'s default
        # separators; pydantic writes compact JSON: parse it (C scanner) and re-encode.
        value = _SCAN(value, 0)[0]
    try:  # (a flat argument dict the gateway kept as it was is encoded directly)
        chunks = ENCODE(value, 0)
    except (ValueError, TypeError, RecursionError):
        return None
    text = "".join(chunks)
    # Python writes 5e-07 where pydantic writes 0.0000005: a number with an exponent (or
    # what looks like one inside a string: rare, and only slower) takes the record's way.
    return None if _EXPONENT(text) else text


def row_line(row: Row) -> bytes | None:
    """The row's record as the JSON line `record_line` writes (pydantic's dump of the
    `TrajectoryRecord`), byte for byte, made without building the record: what rollouts
    read back for every episode. None where the row holds something this does not write
    exactly as pydantic would (sanitize notes, a time in another zone, a duration whose
    repr has an exponent): the caller then builds the record."""
    duration = row[DURATION]
    if row[SANITIZED] is not None or type(duration) is not float or not _PLAIN_FLOAT(duration):
        return None
    wall, virtual = _time_text(row[WALL]), _time_text(row[VIRTUAL])
    args, result = _value_text(row[ARGS]), _value_text(row[RESULT])
    if wall is None or virtual is None or args is None or result is None:
        return None
    error_kind = row[ERROR_KIND]
    error = (
        "null"
        if error_kind is None
        else '{"kind":' + _quote(error_kind) + ',"message":' + _text(row[ERROR_MESSAGE]) + "}"
    )
    before = row[BEFORE]
    text = (
        f'{{"seq":{row[SEQ]},"kind":{_quote(row[KIND])},"wall_time":{wall},'
        f'"state_hash":{_quote(row[STATE_HASH])},"changelog_id":{row[CHANGELOG_ID]},'
        f'"changelog_id_before":{"null" if before is None else before},'
        f'"virtual_time":{virtual},"role":{_text(row[ROLE])},'
        f'"principal":{_text(row[PRINCIPAL])},"session":{_text(row[SESSION])},'
        f'"tool":{_text(row[TOOL])},"args":{args},"result":{result},"error":{error},'
        f'"denied":{"true" if row[DENIED] else "false"},"duration_ms":{duration!r},'
        f'"trigger_id":{_text(row[TRIGGER_ID])},"event":{_text(row[EVENT])},'
        f'"detail":{_text(row[DETAIL])},"sanitized":null}}\n'
    )
    return text.encode()


def _plain_float(value: float) -> bool:
    # pydantic writes 1e-05 as 0.00001: only a repr without an exponent is its form too.
    return value == value and "e" not in repr(value) and "inf" not in repr(value)


_PLAIN_FLOAT = _plain_float
