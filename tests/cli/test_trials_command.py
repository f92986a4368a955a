"""`agent-env trials TARGET [--out DIR]`: exit 1 and UNRELIABLE when a task's verifier lets a
no-op or partial agent through, exit 0 when every verifier is reliable; report.json with
--out. Bundles are written to tmp_path."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.tasks.sandbox_bundles import (
    NO_BWRAP,
    workspace_task,
    write_workspace_task,
)
from typer.testing import CliRunner

from agentenv.cli import app

pytestmark = pytest.mark.skipif(
    NO_BWRAP is not None, reason=f"bwrap is not available here: {NO_BWRAP}"
)


def trials(*args: str) -> Any:
    return CliRunner().invoke(app, ["trials", *args])


def test_an_unreliable_bundle_exits_1_and_says_unreliable(tmp_path: Path) -> None:
    seeded = [{"type": "probe_file_contains", "paths": ["README.md"], "expected": "seed"}]
    target = bundle(tmp_path / "loose", seeded)
    result = trials(str(target), "--out", str(tmp_path / "out"))
    assert result.exit_code == 1, result.output
    assert "UNRELIABLE" in result.output
    assert "1 of 1 task(s) have unreliable verifiers: loose/t" in result.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())  # kept when failing too
    assert [(r["task"], r["reliable"]) for r in report] == [("loose/t", False)]
    assert "a no-op agent passes" in report[0]["problems"]


def test_a_reliable_bundle_exits_0_and_writes_report_json(tmp_path: Path) -> None:
    both = [{"type": "probe_file_exists", "paths": ["done.txt", "second.txt"]}]
    target = bundle(tmp_path / "tight", both)
    out = tmp_path / "out"
    result = trials(str(target), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert "UNRELIABLE" not in result.output
    assert "1 task(s), every verifier reliable" in result.output
    report = json.loads((out / "report.json").read_text())
    assert len(report) == 1
    entry = report[0]
    assert entry["task"] == "tight/t"
    assert entry["reliable"] is True
    assert entry["problems"] == []
    assert {a: r["passed"] for a, r in entry["runs"].items()} == {
        "oracle": True,
        "noop": False,
        "partial": False,
    }
    exported = CliRunner().invoke(
        app, ["export", str(out), "--format", "sft-chat", "--out", str(tmp_path / "sft.jsonl")]
    )
    assert exported.exit_code == 0, exported.output  # --out is a run folder export reads
    assert len((tmp_path / "sft.jsonl").read_text().splitlines()) == 3


def test_a_target_that_is_not_a_task_fails_cleanly(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = trials(str(tmp_path / "empty"))
    assert result.exit_code == 1
    assert "is not a bundle" in result.output


def bundle(root: Path, criteria: list[dict[str, Any]]) -> Path:
    """A bundle of one task `t` whose verifier checks `criteria` on the agent's tree."""
    write_workspace_task(root, "t", workspace_task(criteria))
    return root
