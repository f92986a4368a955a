"""The results store: append-only JSONL, one record per episode, crash-safe reading and
resuming (a partial last line is cut with a warning), one writer at a time."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentenv.rollout import CorruptRecordWarning, EpisodeRecord, RolloutStore, StoreLocked
from agentenv.rollout.store import StoreError


def record(episode_id: str, status: str = "passed", **fields: object) -> EpisodeRecord:
    now = datetime.now(UTC)
    return EpisodeRecord(
        episode_id=episode_id,
        status=status,  # type: ignore[arg-type]
        task="b/t",
        agent="oracle",
        passed=status == "passed",
        score=1.0 if status == "passed" else 0.0,
        started_at=now,
        ended_at=now,
        duration_s=0.1,
        **fields,  # type: ignore[arg-type]
    )


def test_records_round_trip_one_line_each(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    with store:
        store.append(record("a", trajectory=[{"kind": "call", "tool": "x"}]))
        store.append(record("b", "failed"))
    lines = store.path.read_text().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith('{"episode_id":"a","status":"passed"')
    back = list(RolloutStore(tmp_path / "run").records())
    assert [r.episode_id for r in back] == ["a", "b"]
    assert back[0].trajectory == [{"kind": "call", "tool": "x"}]
    assert back[0] == record("a", trajectory=[{"kind": "call", "tool": "x"}]).model_copy(
        update={"started_at": back[0].started_at, "ended_at": back[0].ended_at}
    )
    assert len(store) == 2
    assert store.done_ids() == {"a", "b"}


def test_the_store_must_be_open_to_write(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not open"):
        RolloutStore(tmp_path).append(record("a"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreError, match="not a folder"):
        RolloutStore(tmp_path / "file").open()


def test_a_partial_last_line_is_skipped_when_reading_and_cut_when_resuming(
    tmp_path: Path,
) -> None:
    store = RolloutStore(tmp_path)
    with store:
        store.append(record("a"))
        store.append(record("b"))
    whole = store.path.read_bytes()
    partial = record("c").model_dump_json()[:57]
    store.path.write_bytes(whole + partial.encode())
    with pytest.warns(CorruptRecordWarning, match="partial record"):
        assert [r.episode_id for r in store.records()] == ["a", "b"]
    with pytest.warns(CorruptRecordWarning, match="partial record"):
        assert store.done_ids() == {"a", "b"}
    with pytest.warns(CorruptRecordWarning, match=r"dropped a partial record at the end \(57"):
        store.open()
    try:
        assert store.path.read_bytes() == whole  # cut back to the last whole record
        store.append(record("c"))
    finally:
        store.close()
    assert [r.episode_id for r in store.records()] == ["a", "b", "c"]


def test_a_store_that_is_only_a_partial_line_is_emptied(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    tmp_path.joinpath("episodes.jsonl").write_bytes(b'{"episode_id":"a","sta')
    with pytest.warns(CorruptRecordWarning), store:
        pass
    assert store.path.read_bytes() == b""


def test_a_line_that_is_not_a_record_is_skipped_with_a_warning(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    with store:
        store.append(record("a"))
        store.append_line("{not json")
        store.append_line(json.dumps({"hello": 1}))
        store.append(record("b"))
    with pytest.warns(CorruptRecordWarning) as caught:
        assert [r.episode_id for r in store.records()] == ["a", "b"]
    messages = [str(w.message) for w in caught]
    assert any(":2: skipped a line that is not JSON" in m for m in messages)
    assert any(":3: skipped a line that is not an episode record" in m for m in messages)


def test_the_last_record_of_an_episode_wins(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    with store:
        store.append(record("a", "error", error="boom"))
        store.append(record("b"))
        store.append(record("a"))
    assert [(r.episode_id, r.status) for r in store.records()] == [("b", "passed"), ("a", "passed")]
    assert len(list(store.records(latest=False))) == 3
    assert store.statuses() == {"a": "passed", "b": "passed"}


def test_errors_are_done_unless_retried(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    with store:
        store.append(record("a", "error"))
        store.append(record("b", "timeout"))
        store.append(record("c", "failed"))
    assert store.done_ids() == {"a", "b", "c"}
    assert store.done_ids(retry_errors=True) == {"c"}


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    first = RolloutStore(tmp_path).open()
    try:
        with pytest.raises(StoreLocked, match="another process is writing"):
            RolloutStore(tmp_path).open()
        assert [r.episode_id for r in RolloutStore(tmp_path).records()] == []  # readers may
    finally:
        first.close()
    RolloutStore(tmp_path).open().close()  # the lock went with the close


def test_plan_json_is_written_whole(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "run")
    assert store.read_plan() is None
    store.write_plan({"episodes": 4, "agents": ["oracle"]})
    plan = store.read_plan()
    assert plan is not None and plan["episodes"] == 4 and "written_at" in plan
    assert [p.name for p in (tmp_path / "run").iterdir()] == ["plan.json"]


def test_reward_is_the_score_or_pass_and_zero_for_errors(tmp_path: Path) -> None:
    assert record("a").reward() == 1.0
    assert record("a", "failed").model_copy(update={"score": 0.25}).reward() == 0.25
    assert record("a", "error").model_copy(update={"score": 0.5}).reward() == 0.0
    assert record("a").model_copy(update={"score": None}).reward() == 1.0
    assert record("a", "failed").model_copy(update={"score": None}).reward() == 0.0
