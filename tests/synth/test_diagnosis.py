"""Why synthesis dropped its candidates, and what to try: the reasons are the counts the run
collected (report.json's `dropped` and `dropped_causes`), printed by `synth tasks` in its
summary, and with suggestions when no task survived."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from agentenv.cli import app
from agentenv.synth.diagnosis import REASONS, cause_of, reason_lines, suggestions

ROOT = Path(__file__).parents[2]
DESK = ROOT / "examples" / "envs" / "support-desk"

LONE_ENV = """\
apiVersion: agentenv/v1
kind: Environment
name: lone
version: 0.1.0
state:
  notes: {key: id}
tools:
  - module: tools.py
"""

LONE_TOOLS = '''\
from agentenv import tool


@tool
def ping() -> dict:
    """Say nothing: no output feeds any input."""
    return {}
'''


def synth(env: Path, out: Path, *flags: str) -> Any:
    return CliRunner().invoke(app, ["synth", "tasks", str(env), "--out", str(out), *flags])


def lone(tmp_path: Path) -> Path:
    folder = tmp_path / "lone"
    folder.mkdir()
    (folder / "env.yaml").write_text(LONE_ENV, encoding="utf-8")
    (folder / "tools.py").write_text(LONE_TOOLS, encoding="utf-8")
    return folder


def test_nothing_made_prints_the_counted_reasons_and_what_to_try(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = synth(lone(tmp_path), out, "-n", "2", "--depth", "2..3")
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["accepted"] == 0 and report["dropped"] == {"no_walk": report["candidates"]}
    causes = report["dropped_causes"]["no_walk"]
    assert sum(causes.values()) == report["candidates"] and causes["the graph has no edges"] > 0
    text = result.output
    assert f"dropped {report['candidates']} of {report['candidates']} candidates" in text
    assert f"[no_walk]: {report['candidates']} (the graph has no edges " in text
    assert "what to try:" in text
    assert "--depth 1: the tool graph has 1 tools and no edges" in text
    assert "--probes N" in text
    assert "no probe call of any tool returned something informative" in text
    assert "no task survived: 0 of" in text


def test_one_call_walks_of_a_tool_that_changes_nothing_say_so(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = synth(lone(tmp_path), out, "-n", "1", "--depth", "1")
    assert result.exit_code == 1, result.output
    report = json.loads((out / "report.json").read_text())
    [(code, count)] = report["dropped"].items()
    assert f"[{code}]: {count} (ping {count})" in result.output
    assert "seed data in the environment: records the tools can read" in result.output


def test_the_normal_summary_counts_each_rejection(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = synth(DESK, out, "-n", "4", "--trials", "direct")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["dropped"], "support-desk drops some candidates at these knobs"
    dropped = sum(report["dropped"].values())
    assert f"dropped {dropped} of {report['candidates']} candidates, by reason:" in result.output
    for code, count in report["dropped"].items():
        assert f"{REASONS[code]} [{code}]: {count}" in result.output
    assert "what to try" not in result.output


def test_suggestions_follow_the_counts() -> None:
    graph = {"nodes": 4, "edges": 6, "probes": 12, "probes_ok": 9}
    replay = {"dropped": {"replay_disagrees": 37, "trial_nothing": 5}, "graph": graph}
    tips = suggestions(replay)
    assert any("determinism" in t for t in tips)
    assert any("walks that write" in t for t in tips)
    assert not any("--depth 1" in t for t in tips)  # the graph has edges
    assert suggestions({"dropped": {"no_walk": 3}, "graph": {"nodes": 0}})[0].startswith("--role")
    lines = reason_lines(replay)
    assert lines[0] == "every walk rejected by replay (a second run differs) [replay_disagrees]: 37"
    assert lines[1] == "verifier trivially true (doing nothing scores above 0) [trial_nothing]: 5"


def test_causes_are_tools_and_graph_shapes() -> None:
    assert cause_of("call_failed", "get_order: no such order") == "get_order"
    assert cause_of("no_walk", "read_ticket feeds no tool") == (
        "a tool in the walk feeds no other tool"
    )
    assert cause_of("no_walk", "the graph has no edges") == "the graph has no edges"
    assert cause_of("unbound_argument", "step 2 gave no 'id' for 'order_id'") == (
        "an earlier step gave no 'id' for 'order_id'"
    )
    assert cause_of("duplicate", "abc") is None
