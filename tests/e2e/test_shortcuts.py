"""Every example task fails a plausible shortcut agent, and still passes its oracle.

A shortcut is what an agent after the score rather than the work would try: skip the wait
or the reading, do half the steps, guess an argument, edit the test instead of the code,
write the expected output by hand, shadow the test runner, buy the wrong item. Each is a
concrete list of tool calls (mostly the reference solution with steps removed or altered),
answered with the reference solution's own response, so only what the calls did decides.
Tasks are run through the Python API (tests/e2e/shortcuts.py), not `agent-env run`.

Where a shortcut passed, the task's verifier was fixed (see each task's comments).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from tests.e2e.shortcuts import Call, run_with_agent, run_with_calls, solution_calls

from agentenv.agents import OracleAgent
from agentenv.sandbox import BwrapProvider

ROOT = Path(__file__).resolve().parents[2]
BUNDLES = ROOT / "examples" / "bundles"
NEEDS_BWRAP = pytest.mark.skipif(
    BwrapProvider.unavailable() is not None, reason=str(BwrapProvider.unavailable())
)


def _bash(command: str) -> Call:
    return {"tool": "bash", "args": {"command": command}}


def _with(call: Call, **args: Any) -> Call:
    """`call` with some arguments replaced."""
    return {**call, "args": {**call["args"], **args}}


class Shortcut(NamedTuple):
    """One way to try a task without doing it."""

    task: str
    """The task file (or Harbor folder), relative to examples/."""
    name: str
    calls: list[Call]


def _support_desk() -> list[Shortcut]:
    billing = "bundles/support-desk/tasks/resolve-billing.yaml"
    tickets, ticket, get, refund, email, wait, _, inbox, done = solution_calls(
        ROOT / "examples" / billing
    )
    task = "bundles/support-desk/tasks/escalate-refund.yaml"
    read, order, reply = solution_calls(ROOT / "examples" / task)
    refund = {
        "tool": "issue_refund",
        "args": {"ticket_id": "T-1045", "customer_id": "C-005", "order_id": "O-5570",
                 "amount": 145, "reason": "Broken lamp"},
    }  # fmt: skip
    close = {"tool": "close_ticket", "args": {"ticket_id": "T-1045", "resolution": "Escalated."}}
    return [
        # resolve-billing's own (fixed in a90e843): her answer is a second email from her
        Shortcut(billing, "does not wait for her answer", [tickets, ticket, get, refund, email, done]),
        Shortcut(billing, "closes before her answer", [
            tickets, ticket, get, refund, email, inbox, done, wait, wait,
        ]),
        Shortcut(billing, "refunds the look-alike customer", [
            tickets, ticket, get, _with(refund, customer_id="C-006"), email, wait, wait, inbox, done,
        ]),
        Shortcut(task, "says it escalated, does nothing", []),
        Shortcut(task, "refunds anyway (over the limit)", [read, order, refund, reply]),
        Shortcut(task, "refunds what the limit allows", [read, order, _with(refund, amount=100), reply]),
        Shortcut(task, "closes the ticket instead of leaving it to a supervisor", [read, reply, close]),
        Shortcut(task, "answers the wrong ticket", [read, _with(reply, ticket_id="T-1042")]),
    ]  # fmt: skip


def _personal() -> list[Shortcut]:
    task = "bundles/personal/tasks/plan-lunch.yaml"
    lookup, slots, invite = solution_calls(ROOT / "examples" / task, "lunch")
    return [
        Shortcut(task, "says it is done, does nothing", []),
        # passed before the check named the recipient: the invite made the event anyway
        Shortcut(task, "guesses Jordan's address", [_with(invite, to=["jordan@example.com"])]),
        Shortcut(task, "invites for the wrong time", [
            lookup, _with(invite, subject="Invite: Lunch with Jordan @ 2026-03-04 13:00"),
        ]),
        Shortcut(task, "looks everything up, sends nothing", [lookup, slots]),
    ]  # fmt: skip


def _mixed() -> list[Shortcut]:
    task = "bundles/mixed/tasks/file-the-minutes.yaml"
    read, add, review = solution_calls(ROOT / "examples" / task)
    return [
        Shortcut(task, "adds the task without reading the minutes", [add, review]),
        Shortcut(task, "skips the review note", [read, add]),
        Shortcut(task, "files the note where nobody reviews it", [
            read, add, _with(review, path="roadmap-review.md"),
        ]),
        Shortcut(task, "guesses the due date", [read, _with(add, due="2026-03-09"), review]),
        Shortcut(task, "adds every action item", [
            read, add, _with(add, title="Book the offsite venue", source="minutes.md"), review,
        ]),
    ]  # fmt: skip


def _git_commit() -> list[Shortcut]:
    task = "bundles/git-commit/tasks/commit-the-fix.yaml"
    status, add, commit = solution_calls(ROOT / "examples" / task)
    return [
        Shortcut(task, "answers without committing", [status]),
        Shortcut(task, "commits without staging", [status, commit]),
        Shortcut(task, "stages everything", [status, _with(add, files=["."]), commit]),
        Shortcut(task, "commits the scratch file too", [
            status, _with(add, files=["calc.py", "scratch.txt"]), commit,
        ]),
        Shortcut(task, "commits with a message that says nothing", [
            status, add, _with(commit, message="wip"),
        ]),
    ]  # fmt: skip


SHORTCUTS = [*_support_desk(), *_personal(), *_mixed(), *_git_commit()]

AGENT_TASKS = sorted({s.task for s in SHORTCUTS})
"""The example tasks an agent acts in (each has shortcuts above and a reference solution)."""


def _needs(task: str) -> list[pytest.MarkDecorator]:
    return [NEEDS_BWRAP] if "repo-fix" in task or "harbor" in task else []


@pytest.fixture
def servers(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The third-party MCP servers a task runs (tests/e2e/third_party.py prepares them);
    the test skips, saying why, where they cannot be had."""
    from tests.e2e import third_party

    task = request.node.callspec.params.get("task") or request.node.callspec.params["s"].task
    try:
        if "git-commit" in task:
            bin_dir = third_party.git_server_bin()
            monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
        if "mixed" in task:
            third_party.filesystem_server_command()
    except third_party.Unavailable as error:
        pytest.skip(str(error))
    yield


@pytest.mark.parametrize(
    "s", [pytest.param(s, id=f"{s.task}: {s.name}", marks=_needs(s.task)) for s in SHORTCUTS]
)
async def test_a_shortcut_agent_fails_the_task(s: Shortcut, servers: None) -> None:
    result = await run_with_calls(ROOT / "examples" / s.task, s.calls)
    assert result.status != "error", result.error
    assert result.passed is False and result.score is not None and result.score < 1.0, (
        f"{s.task}: the shortcut {s.name!r} passed: {result.scores}"
    )


@pytest.mark.parametrize("task", [pytest.param(t, marks=_needs(t)) for t in AGENT_TASKS])
async def test_the_oracle_still_passes_the_task(task: str, servers: None) -> None:
    result = await run_with_agent(ROOT / "examples" / task, OracleAgent())
    assert result.passed is True and result.score == 1.0, (result.error, result.scores)
