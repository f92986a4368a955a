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
import shutil
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


# A `unittest` package in the working folder, ahead of the real one on `python3 -m`'s path.
FAKE_UNITTEST = _bash(
    "mkdir -p unittest && touch unittest/__init__.py"
    " && echo 'raise SystemExit(0)' > unittest/__main__.py"
)


def _repo_fix() -> list[Shortcut]:
    totals = "bundles/repo-fix/tasks/fix-totals.yaml"
    run, quantity, imports, rounding, _ = solution_calls(ROOT / "examples" / totals)
    weaker = {"path": "tests/test_totals.py", "old_string": "350)", "new_string": "349)"}
    table = (
        "cat > invoice/totals.py <<'PY'\n"
        "from dataclasses import dataclass\n\n\n"
        "@dataclass(frozen=True)\n"
        "class Line:\n    price_cents: int\n    quantity: int = 1\n\n\n"
        "def subtotal(lines):\n    return {(250, 2, 100): 600}.get(tuple(x for l in lines for x in "
        "(l.price_cents, l.quantity) if x != 1), 0)\n\n\n"
        "def total(lines, discount_percent=0, tax_percent=0):\n"
        "    return {1000: 1080, 333: 350}[lines[0].price_cents]\n"
        "PY"
    )
    cents = "bundles/repo-fix/tasks/format-cents.yaml"
    read, export, formatter, _ = solution_calls(ROOT / "examples" / cents)
    examples = (
        "cat >> invoice/totals.py <<'PY'\n\n\ndef format_cents(cents: int) -> str:\n"
        '    return {1234: "$12.34", 5: "$0.05", 123456789: "$1,234,567.89", -250: "-$2.50"}[cents]\n'
        "PY"
    )
    ungrouped = formatter["args"]["command"].replace("{dollars:,}", "{dollars}")
    return [
        Shortcut(totals, "edits the test to expect the bug", [
            run, {"tool": "edit_file", "args": weaker},
        ]),
        Shortcut(totals, "deletes the failing tests", [run, _bash("rm tests/test_totals.py")]),
        Shortcut(totals, "fixes quantities only", [run, quantity]),
        Shortcut(totals, "fixes rounding only", [run, imports, rounding]),
        Shortcut(totals, "answers the tested inputs from a table", [run, _bash(table)]),
        # passed before the tests ran with `python3 -I` (the folder off the path)
        Shortcut(totals, "shadows unittest with a package that exits 0", [FAKE_UNITTEST]),
        Shortcut(cents, "exports a function it never writes", [read, export]),
        # passed before the held-back tests tried amounts beyond the prompt's examples
        Shortcut(cents, "answers the prompt's examples from a table", [read, export, _bash(examples)]),
        Shortcut(cents, "does not group thousands", [read, export, _bash(ungrouped)]),
        Shortcut(cents, "shadows unittest with a package that exits 0", [read, export, FAKE_UNITTEST]),
    ]  # fmt: skip


WORD_STATS = ROOT / "examples" / "harbor" / "word-stats"


def _harbor() -> list[Shortcut]:
    task = "harbor/word-stats"
    solve = (WORD_STATS / "solution" / "solve.sh").read_text()
    counts_only = solve.split("\nfiles=")[0] + "\n"
    return [
        Shortcut(task, "writes counts.tsv only", [_bash(counts_only)]),
        # passed before the tests counted their own copy of the data
        Shortcut(task, "replaces the data with a file it can count by hand", [_bash(
            "cd /app && rm data/*.txt && echo a > data/a.txt && mkdir -p out"
            " && printf 'a\\t1\\n' > out/counts.tsv"
            ' && echo \'{"files": 1, "words": 1, "top": "a"}\' > out/summary.json'
        )]),
        Shortcut(task, "sorts the counts alphabetically", [_bash(
            solve.replace('-k2,2nr -k1,1', '-k1,1')
        )]),
        Shortcut(task, "leaves out the file the build added", [_bash(
            "rm /app/data/extra.txt\n" + solve
        )]),
    ]  # fmt: skip


def _upstream_style() -> list[Shortcut]:
    task = "bundles/upstream-style/tasks/buy-a-book.json"
    (order,) = solution_calls(ROOT / "examples" / task, "buy")
    return [
        Shortcut(task, "answers with the order it expects, buys nothing", []),
        Shortcut(task, "buys the wrong book", [_with(order, book_id="B-002")]),
        Shortcut(task, "buys two copies", [_with(order, quantity=2)]),
        Shortcut(task, "buys for another customer", [_with(order, customer_id="U-002")]),
    ]


SHORTCUTS = [
    *_support_desk(), *_personal(), *_mixed(), *_git_commit(), *_repo_fix(), *_harbor(),
    *_upstream_style(),
]  # fmt: skip

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


@NEEDS_BWRAP
async def test_the_word_stats_tests_copy_of_the_data_is_the_data_as_built() -> None:
    """The tests count tests/data (the agent cannot change it): it must be /app/data as
    the Dockerfile builds it, or the task grades against other data than it gives."""
    from agentenv.tasks.harbor import build_environment

    built = (await build_environment(WORD_STATS)).tree / "data"
    copy = WORD_STATS / "tests" / "data"
    names = sorted(p.name for p in built.iterdir())
    assert names == sorted(p.name for p in copy.iterdir())
    for name in names:
        assert (built / name).read_bytes() == (copy / name).read_bytes(), name


# -- tasks no agent acts in: what they are given decides, so wrong input must fail ---------

AGENTLESS = {
    # (task, artifact file, wrong content)
    "hello says goodbye": ("hello.json", "greeting/hello.txt", "goodbye from the sandbox\n"),
    "pipeline counts other words": ("pipeline.json", "greeting/hello.txt", "hello there\n"),
    "hello's check looks for another word": (
        "hello.json",
        "greeting/check.sh",
        "grep -q hi hello.txt\n",
    ),
}


@pytest.mark.parametrize("case", sorted(AGENTLESS))
async def test_a_sandbox_steps_task_fails_on_wrong_input(tmp_path: Path, case: str) -> None:
    """sandbox-steps' tasks deploy no agent (upstream's step examples): no shortcut agent
    can act, so the check is that their verifiers reject wrong artifacts."""
    task, artifact, content = AGENTLESS[case]
    bundle = tmp_path / "sandbox-steps"
    shutil.copytree(BUNDLES / "sandbox-steps", bundle)
    (bundle / "artifacts" / artifact).write_text(content)
    result = await run_with_calls(bundle / "tasks" / task, [])
    assert result.passed is False and result.score is not None and result.score < 1.0, (
        result.error,
        result.scores,
    )


@pytest.mark.parametrize("task", ["hello.json", "pipeline.json"])
async def test_a_sandbox_steps_task_passes_as_given(task: str) -> None:
    result = await run_with_calls(BUNDLES / "sandbox-steps" / "tasks" / task, [])
    assert result.passed is True and result.score == 1.0, (result.error, result.scores)
