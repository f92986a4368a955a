"""The support-desk bundle end to end: `agent-env run`, the episode SDK loop, bad tasks."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from agentenv import EpisodeSpec, Task
from agentenv.cli import app
from agentenv.rollout.store import EpisodeRecord, RolloutStore

BUNDLE = Path(__file__).parents[2] / "examples" / "bundles" / "support-desk"
runner = CliRunner()


def _records(out: Path) -> dict[str, EpisodeRecord]:
    """The episodes `agent-env run` wrote into `out`, by task name (one each)."""
    return {r.task: r for r in RolloutStore(out).records()}


def test_the_oracle_solves_every_task_of_the_bundle(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(BUNDLE), "--agent", "oracle", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "2 tasks, 2 passed, mean score 1.00" in result.output
    # two episodes: a summary table, no timelines (those are for one episode, or --verbose)
    assert "run summary" in result.output and "list_tickets" not in result.output
    result = runner.invoke(app, ["run", str(BUNDLE), "--out", str(tmp_path / "v"), "-v"])
    assert result.exit_code == 0, result.output
    header = (
        "oracle on support-desk/resolve-billing   1 turn, 9 calls, 0 denied   09:00:00-09:31:38"
    )
    assert header in result.output
    assert "score 1.00  (env_outcome_verifier 1.00, agent_prompt_response_verifier 1.00)" in (
        result.output
    )
    assert (out / "plan.json").is_file() and (out / "episodes.jsonl").is_file()
    record = _records(out)["support-desk/resolve-billing"]
    assert record.status == "passed" and record.score == 1.0
    calls = [r["tool"] for r in record.trajectory if r["kind"] == "call"]
    assert calls[:2] == ["list_tickets", "read_ticket"] and calls[-1] == "close_ticket"
    assert any(r["kind"] == "trigger" for r in record.trajectory)  # the customer's answer
    final = RolloutStore(out).read_state(record.episode_id)
    assert final is not None
    assert [r["amount"] for r in final["desk"]["refunds"] if r["ticket_id"] == "T-1042"] == [98.0]


async def test_the_sdk_loop_scores_what_the_agent_did() -> None:
    spec = EpisodeSpec.from_task(Task.get("support-desk/resolve-billing"), turn_timeout=900)
    episode = await spec.start()
    prompts = []
    while (turn := await episode.next_turn()) is not None:
        prompts.append(turn.prompt)
        async with turn.tools() as tools:
            assert "issue_refund" in [t.name for t in tools.list_tools()]
            refund = await tools.call(
                "issue_refund",
                {"ticket_id": "T-1042", "customer_id": "C-003", "amount": 98, "reason": "dup"},
            )
            assert refund.ok, refund.text
        await turn.end(response="Refunded $98.")
    result = await episode.result()
    assert len(prompts) == 1 and "T-1042" in prompts[0]
    # The refund is right, but the ticket is not closed and nobody was emailed.
    assert result.status == "failed" and result.score == 0.0
    assert 0 < result.scores["outcome"].score < 1
    assert result.scores["answer"].passed


async def test_a_turn_that_never_ends_times_out_and_the_task_says_so() -> None:
    spec = EpisodeSpec.from_task(Task.get("support-desk/escalate-refund"), turn_timeout=0.2)
    episode = await spec.start()
    turn = await episode.next_turn()
    assert turn is not None  # and we never end it
    assert await episode.next_turn() is None
    result = await episode.result()
    assert result.status == "error"
    ask = next(s for s in result.steps if s.id == "ask")
    assert ask.status == "failed" and "did not end within 0.2 s" in (ask.error or "")
    # The failed prompt stops the task (fail_task_on_error), so the verifiers are skipped.
    assert {s.id: s.status for s in result.steps}["outcome"] == "skipped"
    assert not result.passed


def _copy_bundle(tmp_path: Path) -> Path:
    target = tmp_path / "support-desk"
    shutil.copytree(BUNDLE, target, symlinks=False)
    return target


def test_fail_under_makes_the_run_fail(tmp_path: Path) -> None:
    bundle = _copy_bundle(tmp_path)
    task_file = bundle / "tasks" / "resolve-billing.yaml"
    task = yaml.safe_load(task_file.read_text())
    task["solution"]["main"]["calls"] = task["solution"]["main"]["calls"][:3]  # stop early
    task_file.write_text(yaml.safe_dump(task))
    out = tmp_path / "run"
    args = ["run", str(bundle), "--agent", "oracle", "--out", str(out)]
    assert runner.invoke(app, args).exit_code == 0  # a low score alone is not an error
    result = runner.invoke(app, [*args[:-1], str(tmp_path / "again"), "--fail-under", "0.9"])
    assert result.exit_code == 1
    assert "2 tasks, 1 passed, mean score 0.50" in result.output
    assert "below --fail-under 0.9" in result.output


def test_a_task_naming_a_missing_environment_fails_with_its_reason_on_disk(
    tmp_path: Path,
) -> None:
    bundle = _copy_bundle(tmp_path)
    task_file = bundle / "tasks" / "escalate-refund.yaml"
    task = yaml.safe_load(task_file.read_text())
    task["steps"][0]["env"] = "no-such-desk"
    task_file.write_text(yaml.safe_dump(task))
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(task_file), "--out", str(out)])
    assert result.exit_code == 1  # its one episode errored
    assert "no environment 'no-such-desk'" in result.output
    assert "every episode failed or errored" in result.output
    record = _records(out)["support-desk/escalate-refund"]
    assert record.status == "error"
    statuses = {s["id"]: s["status"] for s in record.steps}
    assert statuses["deploy"] == "failed" and statuses["ask"] == "skipped"
    assert "Traceback" not in result.output
    # the other task passes: the run as a whole does not fail, and says what errored
    result = runner.invoke(app, ["run", str(bundle), "--out", str(tmp_path / "both")])
    assert result.exit_code == 0, result.output
    assert "1 errored: support-desk/escalate-refund" in result.output


@pytest.mark.parametrize("target", ["support-desk/nope", "nope"])
def test_an_unknown_task_fails_before_anything_runs(target: str) -> None:
    result = runner.invoke(app, ["run", target])
    assert result.exit_code == 1
    assert "nope" in result.output


def test_an_unknown_agent_fails_before_anything_runs(tmp_path: Path) -> None:
    result = runner.invoke(app, ["run", str(BUNDLE), "--agent", "nobody", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "unknown agent 'nobody'" in result.output
    assert not any(tmp_path.iterdir())


def test_task_list_names_the_bundle_tasks() -> None:
    result = runner.invoke(app, ["task", "list"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert any(line.startswith("support-desk/resolve-billing\t") for line in lines)
    assert any(line.startswith("support-desk/escalate-refund\t") for line in lines)


PERSONAL = Path(__file__).parents[2] / "examples" / "bundles" / "personal"


def test_the_personal_bundle_runs_two_agents_one_playing_the_user(tmp_path: Path) -> None:
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(PERSONAL), "--agent", "oracle", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "1 task, 1 passed, mean score 1.00" in result.output
    assert "alex: Hi! Could you set up lunch with Jordan" in result.output
    rows = _records(out)["personal/plan-lunch"].trajectory
    speakers = [r["role"] for r in rows if r["kind"] == "message"]
    assert speakers == ["user", "assistant", "user"]
    callers = {(r["role"], r["tool"]) for r in rows if r["kind"] == "call"}
    assert ("user", "tasks__add_task") in callers
    assert ("assistant", "email__send_email") in callers


SHORTCUTS = {
    # refund, email, close at once: her answer never arrives
    "no waiting": ["list_tickets", "read_ticket", "get_order", "issue_refund", "send_email", "close_ticket"],
    # reads the inbox (only her complaint is there yet), closes, then lets time pass
    "closes before her answer": [
        "list_tickets", "read_ticket", "get_order", "issue_refund", "send_email", "read_inbox",
        "close_ticket", "wait", "wait",
    ],
}  # fmt: skip


@pytest.mark.parametrize("shortcut", sorted(SHORTCUTS))
def test_a_shortcut_agent_does_not_pass_resolve_billing(tmp_path: Path, shortcut: str) -> None:
    """The flagship task cannot be gamed: the seed's email from the customer does not count
    as her answer, and closing before her answer arrives fails."""
    bundle = _copy_bundle(tmp_path)
    task_file = bundle / "tasks" / "resolve-billing.yaml"
    task = yaml.safe_load(task_file.read_text())
    calls = {c["tool"]: c for c in task["solution"]["main"]["calls"]}
    task["solution"]["main"]["calls"] = [calls[name] for name in SHORTCUTS[shortcut]]
    task_file.write_text(yaml.safe_dump(task))
    out = tmp_path / "run"
    result = runner.invoke(app, ["run", str(task_file), "--agent", "oracle", "--out", str(out)])
    assert result.exit_code == 1  # its one episode failed
    record = _records(out)["support-desk/resolve-billing"]
    assert record.passed is False and record.score is not None and record.score < 1.0


@pytest.mark.parametrize("name", ["support-desk", "personal"])
def test_the_example_bundles_verifiers_are_reliable(tmp_path: Path, name: str) -> None:
    """`agent-env trials`: the oracle passes, a no-op agent and the oracle's first half fail."""
    bundle = BUNDLE.parent / name
    result = runner.invoke(app, ["trials", str(bundle), "--out", str(tmp_path / "t")])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "t" / "report.json").read_text())
    assert report and all(task["reliable"] for task in report), report
