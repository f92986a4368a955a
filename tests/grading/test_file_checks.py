"""File checks (`{file: ...}`) in state checklists, on the tree of a real workspace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentenv import Environment
from agentenv.grading import VerifierError, check_state
from agentenv.grading.file_checks import FileCheck
from agentenv.state import State

CONFIG = {"server": {"port": 8080, "hosts": ["a", "b"]}, "debug": False}


@pytest.fixture
def state(tmp_path: Path) -> State:
    """A workspace's tree: text, JSON, a binary file (written by hand) and an empty folder."""
    document = {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": "files",
        "workspace": {
            "seed": {
                "files": {
                    "invoice/totals.py": "from decimal import ROUND_HALF_UP\n\nTOTAL = 1\n",
                    "README.md": "# Title\n\n## Usage\nrun it\n",
                    "config.json": json.dumps(CONFIG),
                    "broken.json": "{not json",
                }
            },
            "sandbox": {"provider": "local"},
        },
    }
    (tmp_path / "environment.yaml").write_text(json.dumps(document))
    state = Environment.load(tmp_path / "environment.yaml").new_state()
    state.put(
        "files", {"path": "logo.png", "mode": "100644", "content": "AP8=", "encoding": "base64"}
    )
    state.put("files", {"path": "out", "mode": "040000", "content": "", "encoding": "utf-8"})
    return state


def _one(state: State, check: dict) -> tuple[bool, str, str]:
    """(passed, detail, name) of a single check."""
    score = check_state(state, [check])
    (result,) = score.details["checks"]
    assert score.passed is result["passed"]
    return result["passed"], result.get("detail", ""), result["name"]


def test_exists_and_absent(state: State) -> None:
    assert _one(state, {"file": "README.md"})[0]
    assert _one(state, {"file": "README.md", "exists": True})[0]
    passed, detail, name = _one(state, {"file": "missing.txt"})
    assert not passed and detail == "no file missing.txt" and name == "missing.txt exists"
    assert _one(state, {"file": "scratch.txt", "exists": False})[0]
    passed, detail, name = _one(state, {"file": "README.md", "exists": False})
    assert not passed and detail == "README.md exists" and name == "README.md is absent"
    # A folder that holds files is not a file of the tree.
    assert not _one(state, {"file": "invoice"})[0]


def test_contains(state: State) -> None:
    assert _one(state, {"file": "invoice/totals.py", "contains": "ROUND_HALF_UP"})[0]
    passed, detail, name = _one(state, {"file": "invoice/totals.py", "contains": "ROUND_DOWN"})
    assert not passed
    assert "does not contain" in detail and "ROUND_DOWN" in detail
    assert "contains" in name
    passed, detail, _ = _one(state, {"file": "nope.py", "contains": "x"})
    assert not passed and detail == "no file nope.py"


def test_matches(state: State) -> None:
    assert _one(state, {"file": "README.md", "matches": "(?m)^## Usage$"})[0]
    assert _one(state, {"file": "README.md", "matches": r"run\s+it"})[0]
    passed, detail, _ = _one(state, {"file": "README.md", "matches": "^## Usage"})
    assert not passed and "does not match" in detail  # without (?m), ^ is the start


def test_an_invalid_regex_is_a_failed_check_with_a_message(state: State) -> None:
    passed, detail, _ = _one(state, {"file": "README.md", "matches": "(unclosed"})
    assert not passed
    assert "not a regular expression" in detail


def test_json_path_equals(state: State) -> None:
    assert _one(state, {"file": "config.json", "json": "server.port", "equals": 8080})[0]
    assert _one(state, {"file": "config.json", "json": "server.hosts.1", "equals": "b"})[0]
    assert _one(state, {"file": "config.json", "json": "server.hosts", "equals": ["a", "b"]})[0]
    assert _one(state, {"file": "config.json", "json": "debug", "equals": False})[0]
    passed, detail, name = _one(state, {"file": "config.json", "json": "server.port", "equals": 80})
    assert not passed and "server.port is 8080, expected 80" in detail
    assert name == "config.json server.port == 80"
    passed, detail, _ = _one(state, {"file": "config.json", "json": "server.tls", "equals": 1})
    assert not passed and "has no server.tls" in detail
    passed, detail, _ = _one(state, {"file": "broken.json", "json": "a", "equals": 1})
    assert not passed and "is not JSON" in detail


def test_conditions_together_must_all_hold(state: State) -> None:
    both = {"file": "README.md", "contains": "run it", "matches": "Title"}
    assert _one(state, both)[0]
    passed, detail, _ = _one(state, {**both, "matches": "Nope"})
    assert not passed and "does not match" in detail and "does not contain" not in detail


def test_a_binary_file(state: State) -> None:
    assert _one(state, {"file": "logo.png"})[0]  # it exists
    for condition in ({"contains": "x"}, {"matches": "."}, {"json": "a", "equals": 1}):
        passed, detail, _ = _one(state, {"file": "logo.png", **condition})
        assert not passed and detail == "logo.png is binary"


def test_partial_credit_over_several_file_checks(state: State) -> None:
    score = check_state(
        state,
        [
            {"file": "README.md"},
            {"file": "config.json", "json": "server.port", "equals": 8080},
            {"file": "missing.txt"},
            {"name": "no scratch", "file": "scratch.txt", "exists": False},
        ],
    )
    assert score.score == 0.75
    assert not score.passed
    assert score.details["failed"] == ["missing.txt exists"]
    assert check_state(state, [{"file": "README.md"}, {"file": "nope"}], threshold=0.5).passed


def test_checks_read_a_snapshot_and_leave_the_state_alone(state: State) -> None:
    snapshot = state.snapshot()
    before = state.hash()
    assert check_state(snapshot, [{"file": "README.md", "contains": "Usage"}]).passed
    assert state.hash() == before
    state.delete("files", "README.md")
    assert check_state(snapshot, [{"file": "README.md"}]).passed
    assert not check_state(state, [{"file": "README.md"}]).passed


def test_an_unknown_collection_raises(state: State) -> None:
    with pytest.raises(VerifierError, match="file check"):
        check_state(state, [{"file": "README.md", "collection": "nope"}])
    with pytest.raises(VerifierError, match="file check"):
        check_state(state, [{"file": "README.md", "exists": False, "collection": "nope"}])
    plain = State()
    with pytest.raises(VerifierError, match="workspace"):
        check_state(plain, [{"file": "README.md"}])


def test_an_unknown_key_is_refused(state: State) -> None:
    with pytest.raises(VerifierError):
        check_state(state, [{"file": "README.md", "contain": "x"}])


def test_file_check_models_work_as_checks(state: State) -> None:
    check = FileCheck(file="invoice/totals.py", contains="TOTAL")
    assert check.label() == "invoice/totals.py contains 'TOTAL'"
    assert check_state(state, [check]).passed
