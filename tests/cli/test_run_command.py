"""`agent-env run`: the rollout machinery behind it (one run folder that report and export
read), repeated agents, exit codes, names of `.`, the timeline and the shared flags."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from agentenv.cli import app
from agentenv.rollout.store import RolloutStore

BUNDLE = Path(__file__).parents[2] / "examples" / "bundles" / "support-desk"
ENV = Path(__file__).parents[2] / "examples" / "envs" / "support-desk"
runner = CliRunner()


def _copy(tmp_path: Path) -> Path:
    target = tmp_path / "support-desk"
    shutil.copytree(BUNDLE, target)
    return target


def _flat(text: str) -> str:
    """Help text without rich's box characters and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


def test_each_repeated_agent_runs_into_one_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", str(BUNDLE), "-a", "oracle", "--agent", "noop", "-n", "2", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output  # some episodes passed
    records = list(RolloutStore(out).records())
    assert len(records) == 8  # 2 tasks x 2 agents x 2 repeats
    assert {r.agent for r in records} == {"oracle", "noop"}
    assert json.loads((out / "plan.json").read_text())["agents"] == ["oracle", "noop"]
    # many episodes: a summary table, not timelines
    assert "run summary" in result.output and "list_tickets" not in result.output
    assert "8 episodes (2 tasks x 2 agents x 2 repeats), 4 passed, mean score 0.50" in (
        result.output
    )
    assert f"run folder: {out}" in result.output


def test_report_and_export_read_what_run_writes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert runner.invoke(app, ["run", str(BUNDLE), "-o", str(out)]).exit_code == 0
    report = runner.invoke(app, ["report", str(out), "--json"])
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["episodes"] == 2
    exported = tmp_path / "sft.jsonl"
    done = runner.invoke(app, ["export", str(out), "-f", "sft-chat", "-o", str(exported)])
    assert done.exit_code == 0, done.output
    assert len(exported.read_text().splitlines()) == 2


def test_final_states_are_kept_one_line_an_episode_unless_no_states(tmp_path: Path) -> None:
    kept, skipped = tmp_path / "kept", tmp_path / "skipped"
    assert runner.invoke(app, ["run", str(BUNDLE), "-n", "2", "-o", str(kept)]).exit_code == 0
    lines = (kept / "states.jsonl").read_text().splitlines()
    store = RolloutStore(kept)
    assert sorted(json.loads(x)["episode_id"] for x in lines) == sorted(
        r.episode_id for r in store.records()
    )
    billing = next(r for r in store.records() if r.task == "support-desk/resolve-billing")
    tickets = (store.read_state(billing.episode_id) or {})["desk"]["tickets"]
    assert next(t for t in tickets if t["id"] == "T-1042")["status"] == "closed"
    args = ["run", str(BUNDLE), "--no-states", "-o", str(skipped)]
    assert runner.invoke(app, args).exit_code == 0
    assert not (skipped / "states.jsonl").exists()
    (first, *_) = RolloutStore(skipped).records()
    assert RolloutStore(skipped).read_state(first.episode_id) is None


def test_report_and_export_name_an_old_run_folder(tmp_path: Path) -> None:
    old = tmp_path / "old"
    (old / "support-desk__resolve-billing").mkdir(parents=True)
    (old / "support-desk__resolve-billing" / "scores.json").write_text("{}")
    for command in ("report", "export"):
        result = runner.invoke(app, [command, str(old)])
        assert result.exit_code == 1
        assert "older format (one folder per task" in result.output


def test_every_episode_failing_exits_1(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(BUNDLE), "-a", "noop", "-o", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "every episode failed or errored" in result.output


def test_fail_under_and_its_default(tmp_path: Path) -> None:
    args = ["run", str(BUNDLE), "-o", str(tmp_path / "r"), "--fail-under", "1.5"]
    result = runner.invoke(app, args)
    assert result.exit_code == 1 and "below --fail-under 1.5" in result.output
    shown = _flat(runner.invoke(app, ["run", "--help"], terminal_width=200).output)
    assert "default: none; exit 1 only when every episode fails or errors" in shown


def test_a_bundle_run_as_dot_is_named_as_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = _copy(tmp_path)
    monkeypatch.chdir(bundle)
    result = runner.invoke(app, ["run", ".", "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    names = {r.task for r in RolloutStore(tmp_path / "r").records()}
    assert names == {"support-desk/resolve-billing", "support-desk/escalate-refund"}


def test_the_timeline_counts_turns_and_calls_and_shows_a_trigger(tmp_path: Path) -> None:
    task = BUNDLE / "tasks" / "resolve-billing.yaml"
    result = runner.invoke(app, ["run", str(task), "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "oracle on support-desk/resolve-billing   1 turn, 9 calls, 0 denied" in result.output
    # the customer's reply is a trigger: its firing is on the timeline, between the calls
    assert "09:31:33 trigger customer-answers-email fired: deliver_email" in result.output
    lines = result.output.splitlines()
    fired = next(i for i, line in enumerate(lines) if "trigger customer-answers-email" in line)
    assert "wait" in lines[fired - 1] and "read_inbox" in lines[fired + 1]


def test_a_table_of_many_tasks_says_why_a_task_errored(tmp_path: Path) -> None:
    bundle = _copy(tmp_path)
    task_file = bundle / "tasks" / "resolve-billing.yaml"
    task_file.write_text(task_file.read_text().replace("{ticket_id: T-1042,", "{tiket: T-1042,"))
    result = runner.invoke(app, ["run", str(bundle), "-n", "2", "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output  # escalate-refund passed
    assert "run summary" in result.output and "1 errored: support-desk/resolve-billing" in (
        result.output
    )
    # no timeline was printed, so the first error of the task is, once for its 2 episodes
    (line,) = [x for x in result.output.splitlines() if x.startswith("  support-desk/")]
    assert line.startswith("  support-desk/resolve-billing (2 episodes): step 'deploy' failed")
    assert "where.tiket" in line


def test_the_verbose_timeline_shows_a_failed_calls_message(tmp_path: Path) -> None:
    bundle = _copy(tmp_path)
    task_file = bundle / "tasks" / "resolve-billing.yaml"
    task = yaml.safe_load(task_file.read_text())
    calls = task["solution"]["main"]["calls"]
    calls.insert(2, {"tool": "get_order", "args": {"id": "O-NOPE"}})
    task_file.write_text(yaml.safe_dump(task))
    result = runner.invoke(app, ["run", str(bundle), "-v", "-o", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert "get_order O-NOPE error: tool_error: no record 'O-NOPE' in 'orders'" in result.output
    assert "1 turn, 10 calls, 0 denied" in result.output  # --verbose: every timeline
    assert "oracle on support-desk/escalate-refund" in result.output


def test_base_url_goes_to_openai_agents_and_not_into_their_name(tmp_path: Path) -> None:
    out = tmp_path / "r"
    spec = "openai:some-model?max_retries=0&timeout=5"
    args = ["rollout", str(BUNDLE / "tasks" / "escalate-refund.yaml"), "-a", spec, "-o", str(out)]
    result = runner.invoke(app, [*args, "--base-url", "http://127.0.0.1:9/v1", "--no-progress"])
    assert result.exit_code == 0, result.output  # the episode errors: nothing listens there
    (record,) = RolloutStore(out).records()
    assert record.agent == spec and record.status == "error"
    assert "base_url" not in (out / "plan.json").read_text()
    assert json.loads((out / "plan.json").read_text())["agents"] == [spec]


@pytest.mark.parametrize("command", ["run", "rollout"])
def test_base_url_is_refused_for_an_agent_that_takes_none(command: str, tmp_path: Path) -> None:
    args = [command, str(BUNDLE), "-a", "oracle", "--base-url", "http://x/v1"]
    result = runner.invoke(app, [*args, "-o", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert "agent 'oracle' takes no --base-url" in result.output


def test_dash_a_on_call_is_not_arg() -> None:
    result = runner.invoke(app, ["call", str(ENV), "get_order", "-a", "id=O-5531"])
    assert result.exit_code == 2  # no such option
    ok = runner.invoke(app, ["call", str(ENV), "get_order", "--arg", "id=O-5531"])
    assert ok.exit_code == 0, ok.output


CRASHING_TOOL = '''


@tool
def crash_now(ctx: ToolContext) -> str:
    """A tool with a bug."""
    return {}["missing"]
'''


def test_a_crashing_tools_traceback_shows_with_verbose(tmp_path: Path) -> None:
    bundle = _copy(tmp_path)
    with (bundle / "envs" / "support-desk" / "tools.py").open("a") as tools:
        tools.write(CRASHING_TOOL)
    task_file = bundle / "tasks" / "resolve-billing.yaml"
    task = yaml.safe_load(task_file.read_text())
    task["solution"]["main"]["calls"].insert(2, {"tool": "crash_now", "args": {}})
    task_file.write_text(yaml.safe_dump(task))
    quiet = runner.invoke(app, ["run", str(task_file), "-o", str(tmp_path / "q")])
    assert "crash_now  error: tool_error: KeyError: 'missing'" in quiet.output, quiet.output
    assert "Traceback" not in quiet.output
    loud = runner.invoke(app, ["run", str(task_file), "-v", "-o", str(tmp_path / "v")])
    lines = loud.output.splitlines()
    at = next(i for i, line in enumerate(lines) if "crash_now  error" in line)
    assert lines[at + 1].strip() == "Traceback (most recent call last):"
    assert any('return {}["missing"]' in line for line in lines[at : at + 6])


def test_trials_take_seed_values_and_a_timeout(tmp_path: Path) -> None:
    task = BUNDLE / "tasks" / "resolve-billing.yaml"
    args = ["trials", str(task), "--seed", "unused=1", "--timeout", "60", "-o", str(tmp_path)]
    ok = runner.invoke(app, args)
    assert ok.exit_code == 0, ok.output
    (report,) = json.loads((tmp_path / "report.json").read_text())
    assert report["runs"]["oracle"]["status"] == "passed"


def test_counts_of_one_take_the_singular(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["run", "support-desk/resolve-billing", "-o", str(out), "--no-progress"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "1 task, 1 passed, mean score 1.00" in result.output
    assert "0 failed, 0 errors, 0 timeouts; 1 episode in" in result.output
    report = runner.invoke(app, ["report", str(out)])
    assert report.exit_code == 0 and "1 episode\n" in report.stdout, report.output
    again = runner.invoke(app, args)
    assert again.exit_code == 1 and "already holds 1 episode: choose" in again.stderr
    rollout = runner.invoke(
        app, ["rollout", "support-desk/resolve-billing", "-o", str(tmp_path / "r")]
    )
    assert rollout.exit_code == 0, rollout.output
    assert "1 episode in" in rollout.stdout and "0 errors, 0 timeouts" in rollout.stdout


def test_run_on_an_environment_folder_says_what_works_on_it() -> None:
    result = runner.invoke(app, ["run", str(ENV)])
    assert result.exit_code == 1
    flat = " ".join(result.stderr.split())
    assert "is an environment, not a bundle of tasks" in flat and "agent-env validate" in flat
