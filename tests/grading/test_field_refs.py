"""What state checks name that their state cannot have: unknown collections, and fields
no record has (by the schema; by the seed records where there is none)."""

from __future__ import annotations

from typing import Any

import pytest

from agentenv.grading.field_refs import collection_fields, field_problems, known_fields
from agentenv.grading.state_checks import CountCheck
from agentenv.state import State
from agentenv.state.collection import CollectionInfo

TICKET = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "status": {"type": "string"},
        "customer": {
            "type": "object",
            "properties": {"email": {"type": "string"}, "name": {"type": "string"}},
        },
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
        "note": {"anyOf": [{"$ref": "#/$defs/line"}, {"type": "null"}]},
        "tags": {"type": "object"},
    },
    "$defs": {"line": {"type": "object", "properties": {"sku": {}, "qty": {}}}},
}
OPEN = {"type": "object", "patternProperties": {"^x": {}}, "properties": {"id": {}}}


@pytest.fixture(scope="module")
def known() -> dict[str, Any]:
    state = State.from_records(
        {
            "tickets": [{"id": "t1", "status": "open", "customer": {"email": "a@b"}, "extra": 1}],
            "emails": [{"id": "e1", "to": "x@y", "meta": {"thread": "t"}}],
            "empty": [],
            "loose": [{"id": "l1"}],
        },
        {
            "tickets": CollectionInfo.create("id", TICKET),
            "emails": CollectionInfo.create(),
            "empty": CollectionInfo.create(),
            "loose": CollectionInfo.create("id", OPEN),
        },
    )
    return known_fields(state.snapshot())


def _one(known: dict[str, Any], check: dict[str, Any]) -> tuple[tuple[Any, ...], str] | None:
    found = field_problems([check], known)
    assert len(found) <= 1, found
    return found[0] if found else None


def test_a_misspelled_where_field_of_a_schema_is_named_with_a_suggestion(known: Any) -> None:
    loc, message = _one(known, {"collection": "tickets", "where": {"stauts": "x"}, "count": 1})
    assert loc == (0, "where", "stauts")
    assert message == (
        "no record of collection 'tickets' has a field 'stauts' (did you mean 'status'?; "
        "fields known from its schema and seed records: customer, extra, id, lines, note, "
        "status, tags)"
    )


def test_an_unknown_field_of_a_schema_is_an_error_even_with_nothing_close(known: Any) -> None:
    loc, message = _one(known, {"collection": "tickets", "where": {"owner": "x"}, "count": 0})
    assert loc == (0, "where", "owner") and "did you mean" not in message


@pytest.mark.parametrize(
    ("path", "bad", "hint"),
    [
        ("customer.emial", "customer.emial", "customer.email"),
        ("lines.0.skus", "lines.0.skus", "lines.0.sku"),
        ("note.qtty", "note.qtty", "note.qty"),
    ],
)
def test_nested_levels_a_schema_declares_are_checked(
    known: Any, path: str, bad: str, hint: str
) -> None:
    loc, message = _one(known, {"collection": "tickets", "where": {path: 1}, "count": 1})
    assert loc == (0, "where", path)
    assert f"has a field {bad!r} (did you mean {hint!r}?" in message


@pytest.mark.parametrize(
    "where",
    [
        {"status": "open", "id": "t1"},
        {"customer.email": "a@b", "extra": 1},  # `extra`: only a seed record has it
        {"lines.0.sku": "s", "lines.-1.qty": 2, "tags.anything": 1, "customer": {"name": "A"}},
        {"status.deeper": 1},  # below a string: nothing declared, not checked
    ],
)
def test_what_a_record_can_have_passes(known: Any, where: dict[str, Any]) -> None:
    assert _one(known, {"collection": "tickets", "where": where, "count": 1}) is None


def test_keys_of_an_object_value_are_fields_too(known: Any) -> None:
    check = {"collection": "tickets", "where": {"customer": {"emal": "a@b"}}, "count": 1}
    loc, message = _one(known, check)
    assert loc == (0, "where", "customer")
    assert "has a field 'customer.emal' (did you mean 'customer.email'?" in message


def test_a_field_checks_field_is_checked(known: Any) -> None:
    check = {"collection": "tickets", "key": "t1", "field": "customer.nmae", "equals": "A"}
    loc, message = _one(known, check)
    assert loc == (0, "field") and "did you mean 'customer.name'?" in message
    good = {"collection": "tickets", "key": "t1", "field": "customer.name", "exists": False}
    assert _one(known, good) is None


def test_an_unknown_collection_is_named_with_a_suggestion(known: Any) -> None:
    loc, message = _one(known, {"collection": "tickest", "key": "t1"})
    assert loc == (0, "collection")
    assert message == (
        "unknown collection 'tickest' (did you mean 'tickets'?; "
        "collections: emails, empty, loose, tickets)"
    )


def test_without_a_schema_the_seed_records_tell_and_the_message_says_so(known: Any) -> None:
    loc, message = _one(known, {"collection": "emails", "where": {"too": "x@y"}, "count": 1})
    assert loc == (0, "where", "too")
    assert "(did you mean 'to'?; fields known from its seed records (it has no schema):" in message
    # a field far from every seed field may be one a tool adds: let through
    assert _one(known, {"collection": "emails", "where": {"sent_at": 1}, "count": 1}) is None
    # the seed records tell only the top level
    assert _one(known, {"collection": "emails", "where": {"meta.other": 1}, "count": 1}) is None


@pytest.mark.parametrize("collection", ["empty", "loose"])
def test_what_cannot_be_known_is_not_checked(known: Any, collection: str) -> None:
    assert known["empty"] is None
    check = {"collection": collection, "where": {"whatever": 1}, "count": 1}
    assert _one(known, check) is None


def test_only_declarative_checks_that_parse_are_looked_at(known: Any) -> None:
    checks = [
        lambda state: True,
        ("named", lambda state: True),
        {"file": "notes.txt"},
        {"collection": "tickets", "where": {"stauts": 1}},  # no bound: check_task's to say
        CountCheck(collection="tickets", where={"stauts": 1}, count=1),
    ]
    found = field_problems(checks, known)
    assert [loc for loc, _ in found] == [(4, "where", "stauts")]


def test_a_long_list_of_fields_is_cut() -> None:
    fields = collection_fields("wide", "id", None, [{f"field_{i:02}": i for i in range(30)}])
    assert fields is not None and fields.source == "its seed records (it has no schema)"
    found = field_problems(
        [{"collection": "wide", "where": {"field_1": 1}, "count": 1}], {"wide": fields}
    )
    assert found and found[0][1].endswith(", ... (31 in all))")
