"""diff: what changed between two states, as data and as text."""

from __future__ import annotations

import pytest

from agentenv.state import State, StateDiff, diff


@pytest.fixture
def before() -> State:
    return State.from_records(
        {
            "tickets": [
                {"id": "1", "status": "open", "title": "Printer"},
                {"id": "2", "status": "open"},
            ],
            "users": [{"id": "ada"}],
        }
    )


def test_identical_states_have_no_differences(before: State) -> None:
    d = diff(before, before.fork())
    assert d.empty
    assert d.collections == {}
    assert d.summary() == "no differences"
    assert diff(before, before).empty


def test_added_removed_and_changed_records(before: State) -> None:
    after = before.fork()
    after.update("tickets", "1", {"status": "closed", "assignee": "ada"})
    after.delete("tickets", "2")
    after.insert("tickets", {"id": "3", "status": "open"})
    d = diff(before, after)

    assert not d.empty
    assert list(d.collections) == ["tickets"]  # users did not change
    tickets = d.collections["tickets"]
    assert tickets.added == {"3": {"id": "3", "status": "open"}}
    assert tickets.removed == {"2": {"id": "2", "status": "open"}}
    change = tickets.changed["1"]
    assert change.fields == ["assignee", "status"]
    assert change.before == {"id": "1", "status": "open", "title": "Printer"}
    assert change.after == {"id": "1", "status": "closed", "title": "Printer", "assignee": "ada"}


def test_summary_has_one_line_per_change(before: State) -> None:
    after = before.fork()
    after.update("tickets", "1", {"status": "closed"})
    after.delete("tickets", "2")
    after.insert("tickets", {"id": "3", "status": "open"})
    assert diff(before, after).summary().splitlines() == [
        "+ tickets[3]",
        "- tickets[2]",
        "~ tickets[1].status: 'open' -> 'closed'",
    ]


def test_summary_marks_a_field_that_appears_or_disappears(before: State) -> None:
    after = before.fork()
    after.put("tickets", {"id": "1", "status": "open", "priority": 2})
    lines = diff(before, after).summary().splitlines()
    assert lines[0].startswith("~ tickets[1].priority: ")
    assert "<absent>" in lines[0] and lines[0].endswith("-> 2")
    assert lines[1].startswith("~ tickets[1].title: 'Printer' -> ")
    assert "<absent>" in lines[1]


def test_diff_is_directional(before: State) -> None:
    after = before.fork()
    after.insert("tickets", {"id": "3"})
    assert list(diff(before, after).collections["tickets"].added) == ["3"]
    assert list(diff(after, before).collections["tickets"].removed) == ["3"]


def test_nested_changes_are_reported_on_the_top_level_field() -> None:
    a = State.from_records({"t": [{"id": "1", "meta": {"tags": ["a"]}, "n": 1}]})
    b = a.fork()
    b.update("t", "1", {"meta": {"tags": ["a", "b"]}})
    assert diff(a, b).collections["t"].changed["1"].fields == ["meta"]


def test_a_collection_only_on_one_side_is_listed_even_when_empty(before: State) -> None:
    after = before.fork()
    after.add_collection("audit")
    d = diff(before, after)
    assert "audit" in d.collections
    assert d.collections["audit"].empty
    assert not d.empty
    after.put("audit", {"id": "e1"})
    assert diff(before, after).collections["audit"].added == {"e1": {"id": "e1"}}
    assert diff(after, before).collections["audit"].removed == {"e1": {"id": "e1"}}


def test_diff_accepts_snapshots(before: State) -> None:
    snap = before.snapshot()
    before.update("tickets", "2", {"status": "closed"})
    d = diff(snap, before)
    assert list(d.collections["tickets"].changed) == ["2"]
    assert diff(snap, snap.fork()).empty
    assert diff(before, snap).collections["tickets"].changed["2"].after["status"] == "open"


def test_a_change_then_a_revert_is_no_difference(before: State) -> None:
    after = before.fork()
    after.update("tickets", "1", {"status": "closed"})
    after.update("tickets", "1", {"status": "open"})
    assert diff(before, after).empty


def test_state_diff_round_trips_as_json(before: State) -> None:
    after = before.fork()
    after.update("tickets", "1", {"status": "closed"})
    d = diff(before, after)
    again = StateDiff.model_validate_json(d.model_dump_json())
    assert again == d
    assert again.summary() == d.summary()
