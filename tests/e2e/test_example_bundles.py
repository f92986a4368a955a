"""The airline, assistant and analytics bundles: on every task the oracle scores 1.0 and
plausible shortcut agents (skipping the wait for the customer, breaking a written policy,
answering without querying, doing half the work) fail. Tasks run through the Python API
(`Task.load` + `run_task`), with each shortcut played by a `ScriptedAgent`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentenv.agents.base import AgentTurn
from agentenv.agents.oracle import OracleAgent
from agentenv.agents.scripted import ScriptedAgent
from agentenv.cli import app
from agentenv.tasks.bundle import Task
from agentenv.tasks.runner import TaskResult, run_task

EXAMPLES = Path(__file__).parents[2] / "examples"
BUNDLES = EXAMPLES / "bundles"
NAMES = ["airline", "assistant", "analytics"]


def _task(bundle: str, name: str) -> Task:
    return Task.load(BUNDLES / bundle / "tasks" / f"{name}.yaml")


def _tasks(bundle: str) -> list[str]:
    return sorted(p.stem for p in (BUNDLES / bundle / "tasks").glob("*.yaml"))


async def _run(task: Task, agent: Any) -> TaskResult:
    ctx = task.context(agent_factory=lambda request: agent)
    return await run_task(task.spec, ctx)


def _replay(calls: list[dict[str, Any]], response: str) -> ScriptedAgent:
    """An agent that makes these calls on its first turn, then answers `response`."""

    async def play(turn: AgentTurn) -> str:
        if turn.conversation_turn == 0:
            for call in calls:
                await turn.tools.call(call["tool"], call.get("args", {}))
        return response

    return ScriptedAgent(play, reference="shortcut")


def _solution(task: Task, prompt_id: str = "main") -> tuple[list[dict[str, Any]], str]:
    turn = task.spec.solution[prompt_id]
    return [c.model_dump(exclude_none=True) for c in turn.calls], turn.response


def _without(calls: list[dict[str, Any]], *tools: str) -> list[dict[str, Any]]:
    return [c for c in calls if c["tool"] not in tools]


def _with_args(calls: list[dict[str, Any]], tool: str, **args: Any) -> list[dict[str, Any]]:
    """The calls, with `args` changed in every call of `tool`."""
    return [{**c, "args": {**c["args"], **args}} if c["tool"] == tool else c for c in calls]


@pytest.mark.parametrize("bundle", NAMES)
def test_each_environment_document_validates(bundle: str) -> None:
    result = CliRunner().invoke(app, ["validate", str(EXAMPLES / "envs" / bundle)])
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"ok {bundle} ")


@pytest.mark.parametrize(("bundle", "name"), [(b, n) for b in NAMES for n in _tasks(b)])
async def test_the_oracle_solves_every_task(bundle: str, name: str) -> None:
    result = await _run(_task(bundle, name), OracleAgent())
    assert (result.status, result.score) == ("passed", 1.0), result.model_dump_json(indent=1)


def test_every_bundle_has_several_tasks() -> None:
    assert all(len(_tasks(b)) >= 2 for b in NAMES), {b: _tasks(b) for b in NAMES}


async def _fails(task: Task, agent: Any) -> TaskResult:
    result = await _run(task, agent)
    assert result.status == "failed" and not result.passed, result.model_dump_json(indent=1)
    assert result.score is not None and result.score < 1.0
    return result


# -- analytics ------------------------------------------------------------------------------

REVENUE_ALL_STATUSES = (
    "SELECT c.region, ROUND(SUM(o.total), 2) FROM orders o "
    "JOIN customers c ON c.id = o.customer_id GROUP BY c.region"
)


async def test_analytics_answering_without_querying_fails() -> None:
    task = _task("analytics", "revenue-by-region")
    _, response = _solution(task)
    result = await _fails(task, _replay([], response))  # the right figures, from nowhere
    assert result.scores["answer"].passed and not result.scores["outcome"].passed


async def test_analytics_revenue_from_totals_of_every_order_fails() -> None:
    task = _task("analytics", "revenue-by-region")
    calls = [{"tool": "sql", "args": {"query": REVENUE_ALL_STATUSES}}]
    answer = '{"APAC": 41879.7, "EMEA": 12664.05, "NA": 10998.5}'  # what that query gives
    result = await _fails(task, _replay(calls, answer))
    assert result.scores["outcome"].passed and not result.scores["answer"].passed


async def test_analytics_top_product_counting_cancelled_orders_fails() -> None:
    task = _task("analytics", "top-product-march")
    query = (
        "SELECT l.product_id, SUM(l.qty) u FROM order_lines l JOIN orders o "
        "ON o.id = l.order_id WHERE o.placed_on LIKE '2026-03-%' GROUP BY 1 ORDER BY u DESC"
    )
    answer = '{"product_id": "P-03", "name": "Rain Shell Jacket", "units": 58}'
    await _fails(task, _replay([{"tool": "sql", "args": {"query": query}}], answer))


@pytest.mark.parametrize("shortcut", ["half the flags", "every order flagged", "no query"])
async def test_analytics_flagging_shortcuts_fail(shortcut: str) -> None:
    task = _task("analytics", "flag-bad-totals")
    calls, response = _solution(task)
    if shortcut == "half the flags":
        calls = calls[:2]
    elif shortcut == "every order flagged":
        calls = calls[:1] + [
            {"tool": "flag_order", "args": {"order_id": f"O-{n}", "reason": "check it"}}
            for n in range(1001, 1073)
        ]
    else:
        calls = _without(calls, "sql")
    await _fails(task, _replay(calls, response))


# -- airline --------------------------------------------------------------------------------


def _airline(name: str, shortcut: str) -> tuple[Task, list[dict[str, Any]], str]:
    """A task and a shortcut of its reference solution."""
    task = _task("airline", name)
    calls, response = _solution(task)
    act = calls[-1]
    if shortcut == "no waiting":  # quotes, then acts at once: the yes never arrives
        calls = _without(calls, "wait")
    elif shortcut == "acts before the yes":  # reads too early, acts, then lets time pass
        before = [c for c in calls if c["tool"] != "wait" and c is not act]
        calls = [
            *before[:-1],
            {"tool": "wait", "args": {}},
            before[-1],
            act,
            *[{"tool": "wait"}] * 2,
        ]
    elif shortcut == "no quote":  # acts on the customer's request without asking her
        calls = _without(calls, "send_message", "wait")
    return task, calls, response


@pytest.mark.parametrize(
    ("name", "shortcut"),
    [
        (name, shortcut)
        for name in ("change-flight", "cancel-for-credit", "airline-cancelled")
        for shortcut in ("no waiting", "acts before the yes", "no quote")
    ],
)
async def test_airline_acting_without_the_customers_yes_fails(name: str, shortcut: str) -> None:
    task, calls, response = _airline(name, shortcut)
    result = await _fails(task, _replay(calls, response))
    assert result.scores["answer"].passed  # the words are right; what was done is not


@pytest.mark.parametrize(
    ("name", "tool", "args"),
    [
        # the fare difference only, no $75 fee
        ("change-flight", "change_flight", {"amount_charged": 40}),
        # the look-alike customer's reservation
        ("change-flight", "change_flight", {"reservation_id": "RES-2005"}),
        # what the customer asked for, not what the policy allows after 24 hours
        ("cancel-for-credit", "cancel_reservation", {"refund_method": "card"}),
        # "basic fares are not refunded", but the airline cancelled this flight
        ("airline-cancelled", "cancel_reservation", {"refund_method": "travel_credit"}),
        ("airline-cancelled", "cancel_reservation", {"refund_amount": 0, "refund_method": "none"}),
    ],
)
async def test_airline_breaking_the_desk_policy_fails(
    name: str, tool: str, args: dict[str, Any]
) -> None:
    task = _task("airline", name)
    calls, response = _solution(task)
    await _fails(task, _replay(_with_args(calls, tool, **args), response))


async def test_airline_changing_a_basic_fare_as_asked_fails() -> None:
    task = _task("airline", "basic-no-change")
    calls, _ = _solution(task)
    change = {"reservation_id": "RES-2004", "new_flight_id": "F-612", "amount_charged": 75}
    calls = [
        *calls[:2],
        {"tool": "send_message", "args": {"reservation_id": "RES-2004", "body": "$75, ok?"}},
        {"tool": "wait"},
        {"tool": "wait"},
        {"tool": "read_messages", "args": {"reservation_id": "RES-2004"}},
        {"tool": "change_flight", "args": change},
    ]
    result = await _fails(task, _replay(calls, "Moved you to Saturday, basic fare, $75."))
    assert result.scores["answer"].passed and not result.scores["outcome"].passed


# -- assistant ------------------------------------------------------------------------------

PRIYA = "priya.nair@orbit.example"


def _email(to: str, body: str, **extra: Any) -> dict[str, Any]:
    return {"tool": "send_email", "args": {"to": [to], "subject": "Call", "body": body, **extra}}


def _event(title: str, start: str, attendee: str) -> dict[str, Any]:
    args = {"title": title, "start": start, "duration_minutes": 30, "attendees": [attendee]}
    return {"tool": "create_event", "args": args}


WAIT_AND_READ = [{"tool": "wait"}, {"tool": "wait"}, {"tool": "list_inbox"}]
AT_14 = "2026-03-05T14:00:00Z"
AT_15 = "2026-03-05T15:00:00Z"

SCHEDULE_SHORTCUTS = {
    # books Sam's first free slot and tells her afterwards
    "books without asking": [
        {"tool": "find_free_slots", "args": {"day": "2026-03-05"}},
        _event("Call with Priya", AT_14, PRIYA),
        _email(PRIYA, "Booked us for 2026-03-05 14:00."),
    ],
    # the right time, but booked before her answer, and the waiting done after
    "books before her yes": [
        _email(PRIYA, "Does 2026-03-05 15:00 for 30 min work?"),
        _event("Call with Priya", AT_15, PRIYA),
        *WAIT_AND_READ,
    ],
    # asks, waits, reads her "busy", books the time she declined anyway
    "books the declined time": [
        _email(PRIYA, "Does 2026-03-05 14:00 for 30 min work?"),
        *WAIT_AND_READ,
        _event("Call with Priya", AT_14, PRIYA),
    ],
    # the colleague who shares her first name
    "the other Priya": [
        _email("priya.natarajan@lumen.example", "Does 2026-03-05 15:00 for 30 min work?"),
        *WAIT_AND_READ,
        _event("Call with Priya", AT_15, "priya.natarajan@lumen.example"),
    ],
}


@pytest.mark.parametrize("shortcut", sorted(SCHEDULE_SHORTCUTS))
async def test_assistant_scheduling_shortcuts_fail(shortcut: str) -> None:
    task = _task("assistant", "schedule-call")
    _, response = _solution(task)
    await _fails(task, _replay(SCHEDULE_SHORTCUTS[shortcut], response))


async def test_assistant_the_oracle_negotiates_a_second_time() -> None:
    """Her first answer declines 14:00 and offers 15:00; her second accepts it."""
    task = _task("assistant", "schedule-call")
    agent = OracleAgent()
    ctx = task.context(agent_factory=lambda request: agent)
    result = await run_task(task.spec, ctx)
    assert result.passed
    inbox = ctx.envs["sam"].gateway.instance().state.find("inbox", from_addr=PRIYA)
    answers = [(m["answer"], m["body"]) for m in sorted(inbox, key=lambda m: m["id"])]
    assert answers[0][0] == "declined" and "Could we do 2026-03-05 15:00 instead?" in answers[0][1]
    assert answers[1][0] == "accepted"


@pytest.mark.parametrize(
    "shortcut", ["cancel and re-create", "reply only", "moves the Marcus sync"]
)
async def test_assistant_moving_shortcuts_fail(shortcut: str) -> None:
    task = _task("assistant", "move-sync")
    calls, response = _solution(task)
    if shortcut == "cancel and re-create":
        new = _event("Sync with Marco", "2026-03-06T16:00:00Z", "marco.rossi@lumen.example")
        calls = [
            *calls[:3],
            {"tool": "cancel_event", "args": {"event_id": "E-0004"}},
            new,
            calls[-1],
        ]
    elif shortcut == "reply only":
        calls = _without(calls, "reschedule_event")
    else:
        calls = _with_args(calls, "reschedule_event", event_id="E-0005")
    await _fails(task, _replay(calls, response))


@pytest.mark.parametrize("shortcut", ["books the time she asked for", "books before her yes"])
async def test_assistant_conflict_shortcuts_fail(shortcut: str) -> None:
    task = _task("assistant", "answer-conflict")
    calls, response = _solution(task)
    booking = calls[-1]
    if shortcut == "books the time she asked for":  # double-books Sam over the review
        calls = [
            *calls[:1],
            {**booking, "args": {**booking["args"], "start": "2026-03-05T13:00:00Z"}},
            _email("priya.natarajan@lumen.example", "See you at 13:00.", in_reply_to="IN-0004"),
        ]
    else:
        calls = [c for c in calls if c is not booking and c["tool"] != "wait"]
        calls = [*calls[:-1], booking, *WAIT_AND_READ]
    await _fails(task, _replay(calls, response))
