"""`agent-env rollout`, `export` and `report` (on a Typer app of their own, as the main
app wires them): runs, resume, bad input failing before anything runs, formats, tables."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agentenv.cli.rollout_command import export, report, rollout
from agentenv.rollout import RolloutStore

app = typer.Typer(pretty_exceptions_enable=False)
app.command()(rollout)
app.command()(export)
app.command()(report)


def cli(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_rollout_then_resume(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "runs" / "r1"
    result = cli("rollout", bundle, "-n", "2", "-o", out, "--no-progress")
    assert result.exit_code == 0, result.output
    assert "4 episodes in" in result.stdout and "2 passed, 2 failed, 0 errors" in result.stdout
    assert f"run folder: {out}" in result.stdout
    assert len(RolloutStore(out)) == 4
    again = cli("rollout", bundle, "-n", "2", "-o", out, "--no-progress")
    assert again.exit_code == 1 and "already holds 4 episodes: add --resume" in again.stderr
    resumed = cli("rollout", bundle, "-n", "3", "-o", out, "--no-progress", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "2 episodes in" in resumed.stdout and "4 were already done" in resumed.stdout
    assert len(RolloutStore(out)) == 6


def test_resume_warns_about_a_partial_last_record(bundle: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert cli("rollout", bundle, "-o", out, "--no-progress").exit_code == 0
    with (out / "episodes.jsonl").open("a") as f:
        f.write('{"episode_id":"abc","status":"pas')
    result = cli("rollout", bundle, "-o", out, "--no-progress", "--resume")
    assert result.exit_code == 0, result.output
    assert "warning:" in result.stderr and "dropped a partial record" in result.stderr
    assert "0 episodes in" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{tmp}/nowhere.yaml"], "no task file, bundle folder or catalog task"),
        (["{bundle}", "-a", "nobody"], "unknown agent 'nobody'"),
        (["{bundle}", "--backend", "spark"], "--backend must be local, processes or ray"),
        (["{bundle}", "--address", "auto"], "--address is for --backend ray"),
        (["{bundle}", "--retry-errors"], "--retry-errors goes with --resume"),
        (["{bundle}", "--seed", "novalue"], "--seed expects KEY=VALUE"),
        (["{bundle}", "--seeds", "{tmp}/seeds.yaml"], "expected a list of objects"),
    ],
)
def test_bad_input_fails_before_anything_runs(
    bundle: Path, tmp_path: Path, args: list[str], message: str
) -> None:
    (tmp_path / "seeds.yaml").write_text("- 1\n- 2\n")
    out = tmp_path / "never"
    filled = [a.format(bundle=bundle, tmp=tmp_path) for a in args]
    result = cli("rollout", *filled, "-o", out, "--no-progress")
    assert result.exit_code == 1
    assert message in result.stderr and "Traceback" not in result.output
    assert not (out / "episodes.jsonl").exists()


def test_seed_sets_from_a_file(bundle: Path, tmp_path: Path) -> None:
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text('{"counter": "c1"}\n{"counter": "c2"}\n')
    out = tmp_path / "run"
    result = cli("rollout", bundle / "tasks" / "bump.yaml", "--seeds", seeds, "-o", out)
    assert result.exit_code == 0, result.output
    prompts = sorted(r.prompts[0].prompt for r in RolloutStore(out).records())
    assert prompts == ["Bump counter c1 by 3.", "Bump counter c2 by 3."]
    plan = json.loads((out / "plan.json").read_text())
    assert plan["seeds"] == [{"counter": "c1"}, {"counter": "c2"}] and plan["episodes"] == 2


def test_export_every_format(oracle_run: Path, tmp_path: Path) -> None:
    sft = cli("export", oracle_run, "--format", "sft-chat", "--passed-only")
    assert sft.exit_code == 0, sft.output
    docs = [json.loads(line) for line in sft.stdout.splitlines()]
    assert len(docs) == 4 and all(d["metadata"]["passed"] for d in docs)
    assert "exported 4 sft-chat document(s)" in sft.stderr
    bare = cli("export", oracle_run, "-O", "metadata=false", "--task", "counters/two")
    assert [set(json.loads(x)) for x in bare.stdout.splitlines()] == [{"messages", "tools"}] * 2
    rl = cli("export", oracle_run, "-f", "rl", "--min-score", "0.5", "-o", tmp_path / "rl.jsonl")
    assert rl.exit_code == 0 and len((tmp_path / "rl.jsonl").read_text().splitlines()) == 4
    atif = cli("export", oracle_run, "-f", "atif", "-o", tmp_path / "atif")
    assert atif.exit_code == 0 and len(list((tmp_path / "atif").glob("*.json"))) == 6
    if importlib.util.find_spec("pyarrow") is not None:
        pq = cli("export", oracle_run, "-f", "parquet", "-o", tmp_path / "e.parquet")
        assert pq.exit_code == 0, pq.output
        assert (tmp_path / "e.parquet").stat().st_size > 0


def test_export_refuses_what_it_cannot_do(oracle_run: Path, tmp_path: Path) -> None:
    unknown = cli("export", oracle_run, "-f", "csv")
    assert unknown.exit_code == 1 and "unknown format 'csv'" in unknown.stderr
    option = cli("export", oracle_run, "-O", "colour=red")
    assert option.exit_code == 1 and "has no option colour" in option.stderr
    missing = cli("export", tmp_path / "nothing")
    assert missing.exit_code == 1 and "not a run folder" in missing.stderr


def test_report_tables_and_json(oracle_run: Path, tmp_path: Path) -> None:
    result = cli("report", oracle_run)
    assert result.exit_code == 0, result.output
    for text in ("by agent", "by task", "counters/bump", "pass@2", "pass^2", "6 episodes"):
        assert text in result.stdout
    data = json.loads(cli("report", oracle_run, "--json", "-k", "1").stdout)
    assert data["k"] == [1] and data["planned"] == 6
    assert data["agents"]["oracle"]["pass@k"]["1"] == pytest.approx(4 / 6)
    assert data["tasks"]["counters/wrong"]["oracle"]["passed"] == 0
    assert cli("report", tmp_path).exit_code == 1


def test_a_store_warning_shows_the_line_number_as_it_is(oracle_run: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    first = json.loads((oracle_run / "episodes.jsonl").read_text().splitlines()[0])
    lines = [json.dumps({**first, "episode_id": f"e{i}"}) + "\n" for i in range(99)]
    (run / "episodes.jsonl").write_text("".join(lines) + "{not json\n")
    result = cli("report", run)
    assert result.exit_code == 0, result.output
    assert "episodes.jsonl:100: skipped a line that is not JSON" in result.stderr
    assert "\N{HUNDRED POINTS SYMBOL}" not in result.stderr  # `:100:` is not an emoji code


POISON_AGENT = '''
def answer(turn):
    """Answers with a lone surrogate, which no JSON file can hold."""
    return "done \\ud800"
'''


def test_a_rollout_with_poisoned_episodes_finishes_and_resumes(
    bundle: Path, tmp_path: Path
) -> None:
    script = tmp_path / "poison.py"
    script.write_text(POISON_AGENT)
    out = tmp_path / "run"
    args = [bundle / "tasks" / "bump.yaml", "-a", "oracle", "-a", f"scripted:{script}:answer"]
    result = cli("rollout", *args, "-n", "3", "-o", out, "--no-progress")
    assert result.exit_code == 0, result.output
    assert "6 episodes in" in result.stdout and "3 passed, 0 failed, 3 errors" in result.stdout
    errors = [r for r in RolloutStore(out).records() if r.status == "error"]
    assert len(errors) == 3
    assert all(
        "record not serialisable: a lone surrogate U+D800" in (r.error or "") for r in errors
    )
    resumed = cli("rollout", *args, "-n", "3", "-o", out, "--no-progress", "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "0 episodes in" in resumed.stdout and "6 were already done" in resumed.stdout
    assert "warning" not in resumed.stderr
    report_json = json.loads(cli("report", out, "--json").stdout)
    assert report_json["episodes"] == 6
    assert report_json["agents"][f"scripted:{script}:answer"]["errors"] == 3
    exported = cli("export", out, "-f", "sft-chat")
    assert exported.exit_code == 0 and len(exported.stdout.splitlines()) == 3


def test_export_keeps_atif_files_inside_out_whatever_the_ids(
    oracle_run: Path, tmp_path: Path
) -> None:
    run = tmp_path / "a" / "b" / "run"
    run.mkdir(parents=True)
    first = json.loads((oracle_run / "episodes.jsonl").read_text().splitlines()[0])
    lines = [json.dumps({**first, "episode_id": key}) for key in ("../../x", "/etc/x", "..")]
    (run / "episodes.jsonl").write_text("\n".join(lines) + "\n")
    out = tmp_path / "a" / "b" / "atif"
    result = cli("export", run, "-f", "atif", "-o", out)
    assert result.exit_code == 0, result.output
    names = {p.name for p in out.iterdir()}
    assert names == {"%2E..json", "%2E.%2F..%2Fx.json", "%2Fetc%2Fx.json"}
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["b"]  # nothing written beside
    assert "exported 3 atif document(s)" in result.stderr
