"""Exporters: each format read back and checked against the records it came from
(sft-chat, rl, parquet, atif), filters, options, and the exporter registry."""

from __future__ import annotations

import importlib.util
import io
import json
from pathlib import Path
from typing import Any

import pytest

from agentenv.rollout import (
    EXPORTERS,
    EpisodeRecord,
    ExportError,
    ExportFilter,
    LocalRunner,
    RolloutPlan,
    RolloutStore,
    export_run,
    get_exporter,
)
from agentenv.rollout.exporters import (
    ATIF_VERSION,
    Exporter,
    conversations,
    read_parquet_records,
    validate_atif,
)
from agentenv.rollout.exporters.base import result_text


def records(folder: Path) -> dict[str, EpisodeRecord]:
    return {r.episode_id: r for r in RolloutStore(folder).records()}


def lines(folder: Path, fmt: str, where: ExportFilter | None = None, **options: Any) -> list[dict]:
    out = io.StringIO()
    count = export_run(folder, get_exporter(fmt, **options), out, where=where)
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(docs) == count
    return docs


def calls_of(record: EpisodeRecord, prompt_id: str) -> list[dict[str, Any]]:
    """The calls a prompt made, in order (from the raw trajectory)."""
    prompt = next(p for p in record.prompts if p.prompt_id == prompt_id)
    rows = [
        r
        for r in record.trajectory
        if r["kind"] == "call"
        and r["session"] == prompt_id
        and prompt.start_seq[r["env_id"]] <= r["seq"] < prompt.end_seq[r["env_id"]]
    ]
    return sorted(rows, key=lambda r: r["wall_time"])


def test_the_registry_lists_the_built_ins() -> None:
    assert {"sft-chat", "rl", "parquet", "atif"} <= set(EXPORTERS.names())
    with pytest.raises(ExportError, match="unknown exporter 'csv'"):
        get_exporter("csv")
    with pytest.raises(ExportError, match="has no option colour"):
        get_exporter("sft-chat", colour=True)


def test_sft_chat_round_trips_to_the_trajectory(oracle_run: Path) -> None:
    by_id = records(oracle_run)
    docs = lines(oracle_run, "sft-chat")
    assert len(docs) == 6  # one conversation per episode (one agent each)
    for doc in docs:
        record = by_id[doc["metadata"]["episode_id"]]
        assert doc["metadata"]["task"] == record.task and doc["metadata"]["agent_name"] == "worker"
        assert doc["metadata"]["score"] == record.score
        messages = doc["messages"]
        several = len(record.prompts[0].env_ids) > 1
        if record.task.endswith("bump"):
            assert messages[0] == {"role": "system", "content": "You are careful."}
            messages = messages[1:]
        # read the calls back out of the chat and compare with the trajectory
        at = 0
        for prompt in record.prompts:
            assert messages[at] == {"role": "user", "content": prompt.prompt}
            at += 1
            for row in calls_of(record, prompt.prompt_id):
                call = messages[at]["tool_calls"][0]
                name = f"{row['env_id']}__{row['tool']}" if several else row["tool"]
                assert messages[at]["role"] == "assistant" and messages[at]["content"] is None
                assert call["type"] == "function" and call["function"]["name"] == name
                assert json.loads(call["function"]["arguments"]) == row["args"]
                result = messages[at + 1]
                assert result == {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "content": result_text(row),
                }
                at += 2
            assert messages[at] == {"role": "assistant", "content": prompt.response}
            at += 1
        assert at == len(messages)
        names = {t["function"]["name"] for t in doc["tools"]}
        tools = {"bump", "nap", "get_counter"}
        assert names == (
            {f"{e}__{t}" for e in ("left", "right") for t in tools} if several else tools
        )
        assert all(t["function"]["parameters"]["type"] == "object" for t in doc["tools"])
    refused = next(d for d in docs if d["metadata"]["task"].endswith("bump"))
    assert any(
        m.get("content", "").startswith("Error: amount must be positive")
        for m in refused["messages"]
        if m["role"] == "tool"
    )


def test_filters_pick_episodes_by_score_status_task_and_agent(oracle_run: Path) -> None:
    assert len(lines(oracle_run, "sft-chat", ExportFilter(min_score=1.0))) == 4
    assert len(lines(oracle_run, "sft-chat", ExportFilter(passed_only=True))) == 4
    assert len(lines(oracle_run, "sft-chat", ExportFilter(statuses={"failed"}))) == 2
    assert len(lines(oracle_run, "sft-chat", ExportFilter(tasks={"counters/two"}))) == 2
    assert lines(oracle_run, "sft-chat", ExportFilter(agents={"nobody"})) == []
    bare = lines(oracle_run, "sft-chat", metadata=False, tools=False)
    assert all(set(doc) == {"messages"} for doc in bare)


def test_rl_has_a_prompt_a_rewarded_trajectory_and_the_final_reward(oracle_run: Path) -> None:
    by_id = records(oracle_run)
    chats = {d["metadata"]["episode_id"]: d["messages"] for d in lines(oracle_run, "sft-chat")}
    for doc in lines(oracle_run, "rl"):
        record = by_id[doc["episode_id"]]
        assert doc["prompt"] + doc["completion"] == chats[doc["episode_id"]]
        assert doc["prompt"][-1]["role"] == "user"
        steps = doc["trajectory"]
        assert [s["t"] for s in steps] == list(range(len(steps)))
        assert doc["step_rewards"] == [s["reward"] for s in steps]
        assert doc["final_reward"] == record.reward() == steps[-1]["reward"]
        assert sum(doc["step_rewards"]) == doc["final_reward"]
        assert all(r == 0.0 for r in doc["step_rewards"][:-1])
        assert doc["rewards"] == {k: s.score for k, s in record.scores.items()}
        calls = [s for s in steps if s["type"] == "tool_call"]
        assert len(calls) == record.calls
        assert [s["type"] for s in steps if s["type"] != "tool_call"] == (
            ["response", "user", "response"] if record.task.endswith("two") else ["response"]
        )
        assert steps[-1] == {
            **steps[-1],
            "type": "response",
            "content": record.prompts[-1].response,
        }


def test_parquet_round_trips_every_record(oracle_run: Path, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    path = tmp_path / "episodes.parquet"
    assert export_run(oracle_run, "parquet", path) == 6
    back = read_parquet_records(path)
    assert back == list(RolloutStore(oracle_run).records())
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    assert table.schema.field("score").type == pa.float64()
    assert table.schema.field("started_at").type == pa.timestamp("us", tz="UTC")
    assert sorted(table.column("status").to_pylist()) == ["failed"] * 2 + ["passed"] * 4
    empty = tmp_path / "none.parquet"
    assert export_run(oracle_run, "parquet", empty, where=ExportFilter(agents={"x"})) == 0
    assert pq.read_table(empty).num_rows == 0


def test_atif_documents_follow_the_published_schema(oracle_run: Path) -> None:
    by_id = records(oracle_run)
    docs = lines(oracle_run, "atif")
    assert len(docs) == 6
    for doc in docs:
        assert validate_atif(doc) == [], doc
        assert doc["schema_version"] == ATIF_VERSION
        record = by_id[doc["session_id"]]
        assert doc["extra"]["agentenv"]["task"] == record.task
        assert doc["agent"]["name"] == "oracle"
        steps = doc["steps"]
        assert doc["final_metrics"]["total_steps"] == len(steps)
        assert doc["final_metrics"]["extra"]["score"] == record.score
        called = [s["tool_calls"][0] for s in steps if "tool_calls" in s]
        assert len(called) == record.calls
        (conversation,) = conversations(record)
        expected = [(c.name, c.arguments) for c in conversation.calls()]
        assert [(c["function_name"], c["arguments"]) for c in called] == expected
        users = [s["message"] for s in steps if s["source"] == "user"]
        assert users == [p.prompt for p in record.prompts]
        answers = [s["message"] for s in steps if s["source"] == "agent" and "tool_calls" not in s]
        assert answers == [p.response for p in record.prompts]


def test_atif_to_a_folder_writes_one_file_per_trajectory(oracle_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "atif"
    assert export_run(oracle_run, "atif", folder) == 6
    files = sorted(folder.glob("*.json"))
    assert len(files) == 6
    for file in files:
        doc = json.loads(file.read_text())
        assert doc["session_id"] == file.stem and validate_atif(doc) == []


def test_the_atif_validator_catches_what_the_rfc_forbids() -> None:
    good = {
        "schema_version": "ATIF-v1.4",
        "session_id": "s",
        "agent": {"name": "a", "version": "1"},
        "steps": [
            {"step_id": 1, "source": "user", "message": "hi"},
            {
                "step_id": 2,
                "source": "agent",
                "message": "",
                "timestamp": "2026-01-01T00:00:00Z",
                "tool_calls": [{"tool_call_id": "c1", "function_name": "f", "arguments": {}}],
                "observation": {"results": [{"source_call_id": "c1", "content": "ok"}]},
            },
        ],
    }
    assert validate_atif(good) == []
    bad = json.loads(json.dumps(good))
    bad["steps"][1]["step_id"] = 3
    bad["steps"][1]["observation"]["results"][0]["source_call_id"] = "c9"
    bad["steps"][1]["timestamp"] = "yesterday"
    bad["steps"][0]["tool_calls"] = []
    del bad["agent"]["version"]
    bad["surprise"] = 1
    problems = "\n".join(validate_atif(bad))
    assert "expected 2 (sequential from 1)" in problems
    assert "'c9' is not a tool_call_id of this step" in problems
    assert "not ISO 8601" in problems
    assert "steps/0/tool_calls: only agent steps" in problems
    assert "'version' is a required property" in problems
    assert "'surprise' was unexpected" in problems


def test_a_plugin_exporter_is_found_by_name(
    oracle_run: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "my_exporter.py").write_text(
        "from agentenv.rollout.exporters import Exporter\n\n\n"
        "class Ids(Exporter):\n"
        "    name = 'ids'\n\n"
        "    def documents(self, record):\n"
        "        yield {'id': record.episode_id}\n"
    )
    (tmp_path / "agentenv.toml").write_text('[plugins]\nexporters = ["my_exporter:Ids"]\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(EXPORTERS, "_plugins", None)
    assert "ids" in EXPORTERS.names() and not EXPORTERS.is_builtin("ids")
    docs = lines(oracle_run, "ids")
    assert sorted(d["id"] for d in docs) == sorted(records(oracle_run))
    assert issubclass(EXPORTERS.get("ids"), Exporter)


def test_exporting_what_is_not_a_run_folder_fails(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="not a rollout folder"):
        export_run(tmp_path, "sft-chat", io.StringIO())


def test_a_conversation_with_a_simulated_user(make_bundle: Any, tmp_path: Path) -> None:
    plan = RolloutPlan.build([make_bundle("chat")], ["oracle"])
    LocalRunner(plan, tmp_path / "run").run_sync()
    (record,) = RolloutStore(tmp_path / "run").records()
    assert record.passed and record.calls == 2  # the assistant's bump and the user's own
    roles = [m["role"] for m in record.prompts[0].messages]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    (chat,) = lines(tmp_path / "run", "sft-chat", metadata=False, tools=False)
    said = [(m["role"], m["content"]) for m in chat["messages"] if m["role"] != "tool"]
    assert said == [
        ("user", "Hi, bump the counter please."),
        ("assistant", None),  # the assistant's one call; the user's call is not its action
        ("assistant", "Bumped."),
        ("user", "Please add one more."),
        ("assistant", "Bumped."),
        ("user", "I added one myself. Thanks!"),
    ]
    (rl,) = lines(tmp_path / "run", "rl")
    assert [s["type"] for s in rl["trajectory"]] == [
        "tool_call",
        "response",
        "user",
        "response",
        "user",
    ]
    assert rl["step_rewards"] == [0.0, 0.0, 0.0, 1.0, 0.0]  # the agent's last step earns it
    (atif,) = lines(tmp_path / "run", "atif")
    assert validate_atif(atif) == []
    sources = [s["source"] for s in atif["steps"]]
    assert sources == ["user", "agent", "agent", "user", "agent", "user"]


# -- hostile ids and odd records ------------------------------------------------------------


def episode(episode_id: str, response: str = "ok", **fields: Any) -> EpisodeRecord:
    """A one-prompt record (one conversation, so one document in every format)."""
    from datetime import UTC, datetime

    from agentenv.rollout import PromptEntry

    now = datetime.now(UTC)
    prompt = PromptEntry(prompt_id="p1", agent_name="w", prompt="hi", response=response)
    return EpisodeRecord(
        episode_id=episode_id,
        status="passed",
        task="b/t",
        agent="oracle",
        passed=True,
        started_at=now,
        ended_at=now,
        duration_s=0.1,
        prompts=[prompt],
        **fields,
    )


HOSTILE_IDS = [
    "../../x",
    "../../../escaped",
    "/abs/olute",
    "a/b",
    "..",
    ".",
    ".hidden",
    "nul\x00byte",
    "back\\slash",
    "",
    "%2E%2E%2Fx",  # what ../x is encoded to: must not collide with it
    "../x",
    "Ünïcödé",
    "surrogate\ud800",
    "long" * 100,
]


def files_under(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def test_atif_files_stay_in_the_folder_whatever_the_episode_ids(tmp_path: Path) -> None:
    run = tmp_path / "deep" / "er" / "run"
    with RolloutStore(run) as store:
        for key in HOSTILE_IDS:  # as JSON with ASCII escapes: a lone surrogate id fits too
            store.append_line(json.dumps(episode(key).model_dump(mode="json")))
    out = tmp_path / "deep" / "er" / "atif"
    before = files_under(tmp_path)
    assert export_run(run, "atif", out) == len(HOSTILE_IDS)
    new = files_under(tmp_path) - before
    assert all(p.parent == out for p in new), sorted(map(str, new))
    assert len(new) == len(HOSTILE_IDS)  # distinct ids, distinct files
    by_session = {}
    for path in new:
        assert not path.name.startswith(".") and len(path.name) <= 210
        doc = json.loads(path.read_text(encoding="utf-8"))
        by_session[doc["session_id"]] = path.name
    assert set(by_session) == set(HOSTILE_IDS)
    assert by_session["../../x"] == "%2E.%2F..%2Fx.json"
    assert by_session["a/b"] == "a%2Fb.json" and by_session[".."] == "%2E..json"
    assert by_session[""] == "%.json"


def test_safe_file_names_are_distinct_and_plain_ids_keep_theirs() -> None:
    from agentenv.rollout.exporters import safe_file_name

    names = [safe_file_name(key) for key in HOSTILE_IDS]
    assert len(set(names)) == len(names)
    for name in names:
        assert "/" not in name and "\\" not in name and "\x00" not in name
        assert name not in (".", "..") and not name.startswith(".")
        name.encode("ascii")
    assert safe_file_name("0123abcd89ef4567-worker", ".json") == "0123abcd89ef4567-worker.json"


def test_atif_never_follows_a_link_left_in_the_folder(tmp_path: Path) -> None:
    run = tmp_path / "run"
    with RolloutStore(run) as store:
        store.append(episode("e1"))
    out = tmp_path / "atif"
    out.mkdir()
    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    (out / "e1.json").symlink_to(target)
    with pytest.raises(ExportError, match=r"cannot write .*e1\.json"):
        export_run(run, "atif", out)
    assert target.read_text() == "keep me"


def test_odd_records_from_older_versions_are_exported_or_skipped_not_fatal(
    tmp_path: Path,
) -> None:
    from agentenv.rollout.exporters import ExportWarning

    run = tmp_path / "run"
    broken_line = episode("broken").model_dump(mode="json")
    broken_line["prompts"][0]["env_ids"] = ["main"]
    row = {"kind": "call", "env_id": "main", "seq": 0, "session": "p1", "principal": "w"}
    broken_line["trajectory"] = [{**row, "error": "a string, where a version wrote an object"}]
    odd = episode("odd").model_dump(mode="json")
    odd["prompts"][0]["response"] = "half a pair: \ud800"  # json.dumps escapes it: writable
    with RolloutStore(run) as store:
        store.append(episode("a"))
        store.append_line(json.dumps(broken_line))
        store.append_line(json.dumps(odd))
        store.append(episode("b"))
    for fmt in ("sft-chat", "rl", "atif"):
        path = tmp_path / f"out-{fmt}.jsonl"
        with pytest.warns(ExportWarning, match="skipped episode 'broken'"):
            assert export_run(run, fmt, path) == 3
        docs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
        assert len(docs) == 3
        assert "half a pair: \ud800" in json.dumps(docs, ensure_ascii=False)  # escaped, whole
    with pytest.warns(ExportWarning, match="skipped episode 'broken'"):
        assert export_run(run, "atif", tmp_path / "atif") == 3
    if importlib.util.find_spec("pyarrow") is not None:
        assert export_run(run, "parquet", tmp_path / "e.parquet") == 4
        back = {r.episode_id: r for r in read_parquet_records(tmp_path / "e.parquet")}
        assert back["odd"].prompts[0].response == "half a pair: \ud800"


def test_atif_names_that_would_clash_get_a_suffix(tmp_path: Path) -> None:
    from agentenv.rollout.exporters import ExportWarning

    run = tmp_path / "run"
    with RolloutStore(run) as store:
        store.append(episode("Ab"))
        store.append(episode("ab"))  # the same file as Ab where names ignore case
    with pytest.warns(ExportWarning, match=r"session 'ab' is written to ab~2\.json"):
        assert export_run(run, "atif", tmp_path / "atif") == 2
    files = {p.name: json.loads(p.read_text())["session_id"] for p in (tmp_path / "atif").iterdir()}
    assert files == {"Ab.json": "Ab", "ab~2.json": "ab"}
