"""Task.get's refusals say what was searched and how to load a task file instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentenv import Task
from agentenv.tasks.bundle import TaskNotFound, search_path

ROOT = Path(__file__).resolve().parents[2]
BILLING = ROOT / "examples" / "bundles" / "support-desk" / "tasks" / "resolve-billing.yaml"


def test_a_path_to_a_task_file_is_told_to_use_load() -> None:
    with pytest.raises(TaskNotFound, match=r"is a file.*Task\.load\(path\)"):
        Task.get(str(BILLING))
    assert Task.load(BILLING).name == "support-desk/resolve-billing"


def test_a_path_that_is_no_file_says_so() -> None:
    with pytest.raises(TaskNotFound, match=r"no task file '/no/such\.yaml'.*Task\.load"):
        Task.get("/no/such.yaml")
    with pytest.raises(TaskNotFound, match=r"no task file 'task\.yaml'"):
        Task.get("task.yaml")


def test_an_unknown_bundle_lists_the_folders_searched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = tmp_path / "mine"
    extra.mkdir()
    monkeypatch.setenv("AGENTENV_PATH", str(extra))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TaskNotFound) as caught:
        Task.get("bikehire/swap-bike")
    message = str(caught.value)
    assert "no bundle 'bikehire' on the search path" in message
    assert all(str(folder) in message for folder in search_path())
    assert str(extra.resolve()) in message and str(tmp_path.resolve()) in message
    assert f"AGENTENV_PATH ({os.pathsep!r}-separated" in message and "Task.load(path)" in message


def test_the_message_says_when_agentenv_path_is_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTENV_PATH", raising=False)
    with pytest.raises(TaskNotFound, match="now unset"):
        Task.get("no-such-bundle-anywhere/t")
