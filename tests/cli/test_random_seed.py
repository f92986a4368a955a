"""`--random-seed N` on `synth tasks`, `graph` and `check`; `--seed N` there is refused with
a message pointing to `--random-seed` (`--seed KEY=VALUE` is task seed values elsewhere)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentenv.cli import app

DESK = Path(__file__).parents[2] / "examples" / "envs" / "support-desk"


def invoke(*args: str | Path) -> tuple[int, str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


@pytest.mark.parametrize(
    ("command", "args"),
    [
        (["check"], [DESK, "--calls", "1"]),
        (["synth", "tasks"], [DESK, "-n", "1", "--out", "OUT"]),
    ],
    ids=["check", "synth-tasks"],
)
def test_seed_n_is_refused_with_a_pointer_to_random_seed(
    tmp_path: Path, command: list[str], args: list[str | Path]
) -> None:
    args = [tmp_path / "out" if a == "OUT" else a for a in args]
    code, out = invoke(*command, *args, "--seed", "7")
    assert code == 2, out
    assert f"`agent-env {' '.join(command)}` has no --seed" in out
    assert "--random-seed N (e.g. --random-seed 7)" in out
    assert not (tmp_path / "out").exists()  # refused before anything is written


def test_check_takes_random_seed_and_reports_it() -> None:
    result = CliRunner().invoke(
        app, ["check", str(DESK), "--calls", "2", "--random-seed", "5", "--json"]
    )
    assert result.exit_code in (0, 1), result.output  # 1: a violation, still a report
    assert json.loads(result.stdout)["seed"] == 5


def test_synth_tasks_reproduces_with_random_seed(tmp_path: Path) -> None:
    code, out = invoke(
        "synth", "tasks", DESK, "-n", "2", "--random-seed", "3", "--out", tmp_path / "a"
    )
    assert code == 0, out
    assert "--random-seed 3" in out  # the reproducing command line
    report = json.loads((tmp_path / "a" / "report.json").read_text())
    assert report["seed"] == 3


def test_graph_takes_random_seed() -> None:
    code, out = invoke("graph", DESK, "--random-seed", "4", "--probes", "1")
    assert code == 0, out
    assert '"edges"' in out


def test_graph_seed_n_is_an_unknown_option_that_names_random_seed() -> None:
    code, out = invoke("graph", DESK, "--seed", "4")
    assert code == 2, out
    assert "No such option: --seed" in out and "--random-seed" in out
