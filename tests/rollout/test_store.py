"""The results store: append-only JSONL, one record per episode, crash-safe reading and
resuming (a partial last line is cut with a warning), one writer at a time."""

from __future__ import annotations

import json
import os
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


def nested(levels: int) -> dict[str, object]:
    """A value `levels` objects deep: {"a": {"a": ...}}."""
    value: dict[str, object] = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


class NotJson:
    """A value no JSON serialiser knows."""


POISONS = {
    "surrogate in a response": (
        {
            "prompts": [
                {"prompt_id": "p1", "agent_name": "w", "prompt": "hi", "response": "x\ud800"}
            ]
        },
        "a lone surrogate U+D800 at prompts[0].response",
    ),
    "surrogate in a key": (
        {"trajectory": [{"kind": "call", "args": {"k\udfff": 1}}]},
        "a lone surrogate U+DFFF in a key at trajectory[0].args",
    ),
    "surrogate in an extra field": ({"note": ["ok", "\udc80"]}, "U+DC80 at note[1]"),
    "300 levels": (
        {"trajectory": [{"kind": "call", "result": nested(300)}]},
        "JSON nested deeper than 64 levels (303 levels) at trajectory[0].result.a.a.a.a.a...",
    ),
    "not JSON": ({"usage_by_prompt": {"p1": [{"x": NotJson()}]}}, "a value of type NotJson"),
}


@pytest.mark.parametrize("name", POISONS)
def test_a_record_that_cannot_be_serialised_is_stored_as_an_error_with_the_reason(
    tmp_path: Path, name: str
) -> None:
    fields, where = POISONS[name]
    poisoned = record("bad", seed={"n": 1}, repeat=2, worker="h:1", **fields)
    with pytest.raises(ValueError):  # what the store used to let escape (and abort a run)
        poisoned.model_dump_json()
    store = RolloutStore(tmp_path)
    with store:
        store.append(record("a"))
        written = store.append(poisoned)
        store.append(record("b"))
    assert written.status == "error" and written is not poisoned
    lines = store.path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and len(lines) == 4  # three whole lines, nothing half-written
    assert all(json.loads(line) for line in lines[:-1])
    back = {r.episode_id: r for r in store.records()}
    assert list(back) == ["a", "bad", "b"]
    bad = back["bad"]
    assert bad.status == "error" and not bad.passed and bad.reward() == 0.0
    assert (bad.task, bad.agent, bad.seed, bad.repeat, bad.worker) == (
        "b/t",
        "oracle",
        {"n": 1},
        2,
        "h:1",
    )
    assert bad.error is not None and bad.error.startswith("record not serialisable: ")
    assert where in bad.error and "the episode ended passed" in bad.error
    assert bad.trajectory == [] and bad.prompts == []  # the small stand-in, not the poison
    assert store.done_ids() == {"a", "bad", "b"}  # resume skips it...
    assert store.done_ids(retry_errors=True) == {"a", "b"}  # ...unless errors are retried


def test_a_poisoned_seed_is_dropped_from_the_stand_in(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    with store:
        written = store.append(record("bad", seed={"name": "\ud800"}))
    (line,) = store.path.read_text().splitlines()
    assert json.loads(line)["seed"] == {} and written.status == "error"
    assert "U+D800 at seed.name" in (written.error or "")


def test_a_line_with_a_newline_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    with store:
        with pytest.raises(StoreError, match="newline"):
            store.append_line('{"episode_id":"a","status":"passed"}\n{"episode_id":"b"}')
        with pytest.raises(UnicodeEncodeError):
            store.append_line('{"episode_id":"a","status":"passed","x":"\ud800"}')
    assert store.path.read_bytes() == b""


def test_reading_survives_what_older_versions_or_hand_edits_left(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    odd = record("odd").model_dump(mode="json")
    odd["error"] = "an escaped lone surrogate: \ud800"
    wrong = record("wrong").model_dump(mode="json")
    wrong["status"] = "errored"  # no such status in this version
    del wrong["started_at"]
    with store:
        store.append(record("a"))
        store.append_line("[" * 5000 + "]" * 5000)  # deeper than the JSON parser goes
        store.append_line(
            '{"episode_id":"deep","status":"error","x":' + "[" * 5000 + "]" * 5000 + "}"
        )
        store.append_line(json.dumps(odd))  # ASCII escapes: writable, but holds "\ud800"
        store.append_line(json.dumps(wrong))
        store.append(record("b"))
    with pytest.warns(CorruptRecordWarning) as caught:
        back = [r.episode_id for r in store.records()]
    assert back == ["a", "odd", "b"]
    messages = [str(w.message) for w in caught]
    assert any(":2: skipped a line that is not JSON (nested too deep" in m for m in messages)
    assert any(":3: skipped a line that is not JSON" in m for m in messages)
    assert any(":5: skipped episode 'wrong': its record cannot be read" in m for m in messages)
    assert any("started_at" in m for m in messages)
    with pytest.warns(CorruptRecordWarning):
        assert store.done_ids() == {"a", "odd", "wrong", "b"}
    with pytest.warns(CorruptRecordWarning):
        assert [d["episode_id"] for d in store.raw_records()] == ["a", "odd", "wrong", "b"]
    with store:  # resuming opens it for writing, past every odd line
        store.append(record("c"))
    with pytest.warns(CorruptRecordWarning):
        assert "c" in store.done_ids()


def test_a_line_without_an_id_is_reported_when_episodes_repeat(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path)
    with store:
        store.append(record("a", "error"))
        store.append(record("a"))  # a retry: reading keeps only the last of each id
        store.append_line("{not json")
    with pytest.warns(CorruptRecordWarning, match=":3: skipped a line that is not JSON"):
        assert [r.episode_id for r in store.records()] == ["a"]


def test_final_states_are_kept_one_line_each_and_the_last_wins(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "r")
    with pytest.raises(StoreError, match="not open"):
        store.write_state("a", {})
    with store:
        store.write_state("a", {"desk": {"tickets": [{"id": "T-1"}]}})
        store.write_state("b", {"desk": {"tickets": []}})
        store.write_state("a", {"desk": {"tickets": [{"id": "T-2"}]}})
    with (tmp_path / "r" / "states.jsonl").open("ab") as f:
        f.write(b'{"episode_id":"c","state":{"desk"')  # a kill while writing
    assert store.read_state("a") == {"desk": {"tickets": [{"id": "T-2"}]}}
    assert store.read_state("b") == {"desk": {"tickets": []}}
    assert store.read_state("c") is None and store.read_state("nope") is None
    assert RolloutStore(tmp_path / "empty").read_state("a") is None


def test_states_walks_every_kept_state_and_the_index_follows_the_file(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "r")
    with store:
        for i in range(5):
            store.write_state(f"e{i}", {"env": {"n": [{"id": str(i)}]}})
        store.write_state("e1", {"env": {"n": []}})  # a retry: the last wins
        assert store.read_state("e1") == {"env": {"n": []}}  # the index is built here
        store.write_state("e5", {"env": {}})  # appended after: the index grows
        assert store.read_state("e5") == {"env": {}}
    assert [i for i, _ in store.states()] == ["e0", "e2", "e3", "e4", "e1", "e5"]
    assert dict(store.states())["e3"] == {"env": {"n": [{"id": "3"}]}}
    assert [i for i, _ in store.states(latest=False)] == [f"e{i}" for i in range(5)] + ["e1", "e5"]
    assert list(RolloutStore(tmp_path / "none").states()) == []

    path = tmp_path / "r" / "states.jsonl"
    path.write_text('{"episode_id":"x","state":{"a":{}}}\n')  # replaced: indexed anew
    assert store.read_state("e1") is None and store.read_state("x") == {"a": {}}


def test_a_state_line_cut_short_is_skipped_then_cut_by_the_next_writer(tmp_path: Path) -> None:
    store = RolloutStore(tmp_path / "r")
    with store:
        store.write_state("a", {"env": {"v": [{"id": "1"}]}})
    path = tmp_path / "r" / "states.jsonl"
    with path.open("ab") as f:
        f.write(b'{"episode_id":"a","state":{"env"')  # a kill while writing a retry
    assert store.read_state("a") == {"env": {"v": [{"id": "1"}]}}
    with store:
        store.write_state("b", {"env": {}})
    assert path.read_bytes().count(b"\n") == 2  # the partial line was cut, not joined
    assert dict(store.states()) == {"a": {"env": {"v": [{"id": "1"}]}}, "b": {"env": {}}}


def test_a_broken_last_line_of_an_id_falls_back_to_its_earlier_state(tmp_path: Path) -> None:
    path = tmp_path / "r" / "states.jsonl"
    path.parent.mkdir()
    path.write_bytes(b'{"episode_id":"a","state":{}}\n{"episode_id":"a","sta\n')
    store = RolloutStore(tmp_path / "r")
    assert store.read_state("a") == {} and dict(store.states()) == {"a": {}}


def test_write_state_honours_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    with RolloutStore(tmp_path / "plain") as store:
        store.write_state("a", {})
    assert synced == []
    with RolloutStore(tmp_path / "safe", fsync=True) as store:
        store.write_state("a", {})
        assert len(synced) == 1  # the state line, before its record is written
        store.append(record("a"))
    assert len(synced) >= 2
