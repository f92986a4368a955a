"""The changelog of a state: one row per committed write, rolled-back writes never in it."""

from __future__ import annotations

import pytest

from agentenv.state import RecordNotFound, State
from agentenv.state.changelog import Changelog


def _state(cap: int = 100) -> State:
    state = State.from_records({"tickets": [{"id": "T-1", "subject": "Printer", "status": "open"}]})
    state.add_collection("notes")
    state.keep_changelog(cap)
    return state


def _rows(state: State) -> list[tuple[int, str, str, str]]:
    assert state.changelog is not None
    return [(r.id, r.collection, r.key, r.operation) for r in state.changelog]


def test_writes_outside_a_transaction_are_rows_numbered_by_the_change_counter() -> None:
    state = _state()
    seeded = state.changes
    state.insert("notes", {"id": "N-1", "text": "hi"})
    state.update("tickets", "T-1", {"status": "closed"})
    state.delete("notes", "N-1")
    assert _rows(state) == [
        (seeded + 1, "notes", "N-1", "INSERT"),
        (seeded + 2, "tickets", "T-1", "UPDATE"),
        (seeded + 3, "notes", "N-1", "DELETE"),
    ]
    assert state.changelog is not None and state.changelog.last_id == state.changes
    insert, update, delete = state.changelog
    assert insert.changed_fields() == {"id": "N-1", "text": "hi"}
    assert insert.summary() == 'Inserted: {"id": "N-1", "text": "hi"}'
    assert update.changed_fields() == {"status": {"old": "open", "new": "closed"}}
    assert update.summary() == "status: 'open' -> 'closed'"
    assert delete.changed_fields() == {"id": "N-1", "text": "hi"}
    assert delete.summary().startswith("Deleted: ")
    assert insert.timestamp.tzinfo is not None


def test_the_seed_and_writes_before_keep_changelog_are_not_rows() -> None:
    state = State.from_records({"notes": [{"id": "a"}, {"id": "b"}]})
    assert state.changelog is None
    log = state.keep_changelog()
    assert len(log) == 0 and log.start == state.changes == 2
    assert state.keep_changelog() is log  # asking again keeps the same one


def test_a_transaction_becomes_rows_only_when_it_commits() -> None:
    state = _state()
    before = state.changes
    with state.transaction():
        state.insert("notes", {"id": "N-1", "text": "one"})
        state.update("notes", "N-1", {"text": "two"})
        assert _rows(state) == []  # nothing is committed yet
    assert _rows(state) == [
        (before + 1, "notes", "N-1", "INSERT"),
        (before + 2, "notes", "N-1", "UPDATE"),
    ]
    first, second = state.changelog or []
    # each row holds the record as that write left it, not as the transaction ended
    assert first.after == {"id": "N-1", "text": "one"}
    assert second.before == {"id": "N-1", "text": "one"}
    assert second.after == {"id": "N-1", "text": "two"}


def test_a_rolled_back_transaction_leaves_no_rows_and_ids_stay_dense() -> None:
    state = _state()
    before = state.changes
    with pytest.raises(RecordNotFound), state.transaction():
        state.insert("notes", {"id": "N-1"})
        state.require("notes", "missing")
    assert _rows(state) == [] and state.changes == before
    state.insert("notes", {"id": "N-2"})
    assert _rows(state) == [(before + 1, "notes", "N-2", "INSERT")]


def test_an_inner_rollback_drops_only_its_own_writes() -> None:
    state = _state()
    before = state.changes
    with state.transaction():
        state.insert("notes", {"id": "kept"})
        with pytest.raises(RuntimeError), state.transaction():
            state.insert("notes", {"id": "undone"})
            raise RuntimeError("inner")
        state.update("tickets", "T-1", {"status": "closed"})
    assert _rows(state) == [
        (before + 1, "notes", "kept", "INSERT"),
        (before + 2, "tickets", "T-1", "UPDATE"),
    ]
    assert state.changes == before + 2


def test_a_put_that_drops_a_field_reports_it_as_gone() -> None:
    state = _state()
    state.put("tickets", {"id": "T-1", "subject": "It's on fire"})
    [row] = state.changelog or []
    assert row.operation == "UPDATE"
    assert row.changed_fields() == {
        "subject": {"old": "Printer", "new": "It's on fire"},
        "status": {"old": "open", "new": None},
    }
    assert row.summary() == "status: 'open' -> NULL, subject: 'Printer' -> 'It''s on fire'"


def test_the_ring_keeps_the_newest_rows_and_a_page_says_how_many_it_missed() -> None:
    state = _state(cap=3)
    start = state.changes
    for i in range(5):
        state.insert("notes", {"id": f"N-{i}"})
    log = state.changelog
    assert log is not None and len(log) == 3
    page = log.page(0, 10)
    assert [r.id for r in page.rows] == [start + 3, start + 4, start + 5]
    assert (page.has_more, page.dropped) == (False, 2)
    page = log.page(start + 3, 1)
    assert [r.id for r in page.rows] == [start + 4]
    assert (page.has_more, page.dropped) == (True, 0)
    assert log.page(start + 5, 10).rows == []
    assert log.page(10_000, 10).rows == []


def test_a_restore_rewinds_the_changelog_to_the_snapshot() -> None:
    state = _state()
    state.insert("notes", {"id": "N-1"})
    snapshot = state.snapshot()
    state.insert("notes", {"id": "N-2"})
    state.insert("notes", {"id": "N-3"})
    state.restore(snapshot)
    assert [r.key for r in state.changelog or []] == ["N-1"]
    state.insert("notes", {"id": "N-4"})
    assert [(r.id, r.key) for r in state.changelog or []][-1] == (state.changes, "N-4")


def test_forks_and_snapshots_keep_no_changelog_of_their_own() -> None:
    state = _state()
    fork = state.fork()
    fork.insert("notes", {"id": "in-fork"})
    assert fork.changelog is None
    assert _rows(state) == []
    assert state.snapshot().fork().changelog is None


def test_a_changelog_needs_room_for_a_row() -> None:
    with pytest.raises(ValueError, match="at least one row"):
        Changelog(0)
