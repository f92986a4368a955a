"""Trigger documents: predicates, when (action/state/time), actions, registrations."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from agentenv.spec import (
    ActionWhen,
    Barrier,
    CheckStep,
    DocumentError,
    NlAction,
    PermissionAction,
    Predicate,
    StateWhen,
    TimeWhen,
    ToolAction,
    TriggerRegistration,
    TriggerSpec,
    WherePredicate,
    parse_environment_spec,
)

# -- predicates ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fields",
    [{"regex": "^a"}, {"equals": 3}, {"equals": None}, {"exists": False}, {"exists": True}],
)
def test_a_predicate_with_exactly_one_test(fields: dict) -> None:
    p = Predicate.model_validate(fields)
    assert p.model_fields_set == set(fields)


@pytest.mark.parametrize(
    ("fields", "has"),
    [
        ({}, ""),
        ({"regex": "a", "equals": "a"}, " (has regex, equals)"),
        ({"equals": 1, "exists": True}, " (has equals, exists)"),
        ({"regex": "a", "equals": None, "exists": True}, " (has regex, equals, exists)"),
    ],
)
def test_a_predicate_needs_exactly_one_test(fields: dict, has: str) -> None:
    with pytest.raises(ValidationError) as info:
        Predicate.model_validate(fields)
    assert f"a predicate needs exactly one of 'regex', 'equals', 'exists'{has}" in str(info.value)


def test_a_predicate_regex_must_compile() -> None:
    with pytest.raises(ValidationError, match=r"bad regex '\(':"):
        Predicate(regex="(")


@pytest.mark.parametrize("path", ["args", "args.to", "result.items.0.id", "result"])
def test_where_paths_start_at_args_or_result(path: str) -> None:
    assert WherePredicate(path=path, exists=True).path == path


@pytest.mark.parametrize("path", ["foo.bar", "args.", "argsx", "result..id", ""])
def test_where_paths_elsewhere_are_refused(path: str) -> None:
    with pytest.raises(ValidationError):
        WherePredicate(path=path, exists=True)


def test_where_as_a_mapping_reads_as_a_list_of_predicates() -> None:
    when = ActionWhen.model_validate(
        {
            "type": "action",
            "tool": "send",
            "where": {"args.to": "bob", "result.id": {"regex": "^m-"}},
        }
    )
    assert when.where == [
        WherePredicate(path="args.to", equals="bob"),
        WherePredicate(path="result.id", regex="^m-"),
    ]
    assert when.repeat is False
    assert when.delay is None


# -- when ------------------------------------------------------------------------------------


def test_action_when_needs_a_tool() -> None:
    with pytest.raises(ValidationError, match="tool"):
        ActionWhen.model_validate({"type": "action"})


def test_action_when_delay_is_a_duration() -> None:
    when = ActionWhen.model_validate({"type": "action", "tool": "x", "delay": "PT10M"})
    assert when.delay == timedelta(minutes=10)


def test_state_when_needs_at_least_one_check() -> None:
    with pytest.raises(ValidationError, match="at least 1 item"):
        StateWhen.model_validate({"type": "state", "check": []})
    when = StateWhen.model_validate(
        {
            "type": "state",
            "check": [
                {
                    "tool": "get",
                    "args": {"id": 1},
                    "extract": "status",
                    "predicate": {"equals": "x"},
                }
            ],
        }
    )
    assert when.check[0] == CheckStep(
        tool="get", args={"id": 1}, extract="status", predicate=Predicate(equals="x")
    )


def test_the_last_check_step_needs_a_predicate() -> None:
    assert CheckStep.model_validate({"tool": "get", "bind": "x"}).predicate is None
    with pytest.raises(ValidationError, match="the last check step needs a predicate"):
        StateWhen.model_validate({"type": "state", "check": [{"tool": "get", "bind": "x"}]})


def test_a_check_in_the_protocols_forms() -> None:
    steps = {
        "steps": [
            {
                "tool": "list",
                "extract": {"path": "items", "match": {"kind": {"equals": "a"}}, "take": "id"},
                "bind": "first_a",
            },
            {"tool": "get", "args": {"id": "${first_a}"}, "predicate": {"exists": True}},
        ]
    }
    when = StateWhen.model_validate({"type": "state", "check": steps})
    assert [s.tool for s in when.check] == ["list", "get"]
    single = {"tool": "get", "extract": "status", "predicate": {"equals": "x"}}
    assert len(StateWhen.model_validate({"type": "state", "check": single}).check) == 1
    with pytest.raises(ValidationError, match="pattern"):
        CheckStep.model_validate({"tool": "get", "bind": "not a name"})


@pytest.mark.parametrize(
    "fields",
    [
        {"at": "2026-03-02T09:30:00Z"},
        {"after": "PT1H"},
        {"offset": "P1D"},
        {"every": "PT15M"},
        {"after": "PT1H", "every": "PT15M", "count": 3, "until": "2026-03-03T00:00:00Z"},
        {"every": ["PT1M", "PT5M"], "seed": 7},
        {"every": ["PT1M", "PT1M"]},
    ],
)
def test_good_time_triggers(fields: dict) -> None:
    TimeWhen.model_validate({"type": "time", **fields})


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "a time trigger needs 'at', 'after', 'offset' or 'every'"),
        ({"count": 2}, "a time trigger needs 'at', 'after', 'offset' or 'every'"),
        (
            {"at": "2026-03-02T09:30:00Z", "after": "PT1H"},
            "give at most one of 'at', 'after', 'offset' (has at, after)",
        ),
        (
            {"after": "PT1H", "offset": "PT1H", "every": "PT1M"},
            "give at most one of 'at', 'after', 'offset' (has after, offset)",
        ),
        ({"at": "2026-03-02T09:30:00"}, "'at' needs a timezone"),
        ({"every": "PT1H", "until": "2026-03-02T09:30:00"}, "'until' needs a timezone"),
        ({"every": "PT0S"}, "every\n  Value error, must be a positive duration (got 0 s)"),
        ({"every": "-PT1H"}, "every\n  Value error, must be a positive duration (got -3600 s)"),
        ({"every": ["PT0S", "PT1M"]}, "every\n  Value error, must be a positive duration"),
        ({"every": ["PT5M", "PT1M"]}, "'every' as [min, max] needs min <= max"),
        ({"every": "PT1H", "count": 0}, "greater than or equal to 1"),
    ],
)
def test_bad_time_triggers(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        TimeWhen.model_validate({"type": "time", **fields})
    assert message in str(info.value)


def _refusal(model: type[BaseModel], data: dict[str, Any]) -> tuple[str, str]:
    """The one error of validating `data`: its path (dotted) and message."""
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    errors = info.value.errors(include_url=False)
    assert len(errors) == 1, errors
    return ".".join(str(p) for p in errors[0]["loc"]), errors[0]["msg"]


LAX_TIME_FIELDS = [
    # (fields, path, message): each once accepted (issue 11, defect 11)
    ({"every": "PT0.0001S"}, "every", "must be at least 1 ms (got 0.0001 s)"),
    ({"every": 0.0005}, "every", "must be at least 1 ms (got 0.0005 s)"),
    ({"every": ["PT0.0001S", "PT1M"]}, "every", "must be at least 1 ms"),
    ({"every": {"dist": "exp", "mean": "PT0.0001S"}}, "every", "mean: must be at least 1 ms"),
    ({"every": {"dist": "exp", "mean": "-PT1M"}}, "every", "mean: must be a positive duration"),
    ({"every": {"dist": "exp", "mean": True}}, "every", "mean: expected a duration"),
    ({"every": True}, "every", "expected a duration (seconds, or ISO 8601 such as PT5M), not true"),
    ({"every": [True, "PT1M"]}, "every", "not true"),
    ({"offset": "-PT1H"}, "offset", "must not be negative (got -3600 s)"),
    ({"offset": False}, "offset", "not false"),
    ({"after": "-PT1H"}, "after", "must not be negative (got -3600 s)"),
    ({"after": True}, "after", "not true"),
    ({"every": "PT1H", "until": "-PT1H"}, "until", "must not be negative"),
    ({"every": "PT1H", "until": True}, "until", "not true"),
    ({"every": "PT1H", "count": True}, "count", "Input should be a valid integer"),
    ({"every": "PT1H", "count": 2.0}, "count", "Input should be a valid integer"),
    ({"every": "PT1H", "seed": False}, "seed", "Input should be a valid integer"),
]


@pytest.mark.parametrize(("fields", "path", "message"), LAX_TIME_FIELDS)
def test_lax_time_fields_are_refused_at_their_path(
    fields: dict[str, Any], path: str, message: str
) -> None:
    where, what = _refusal(TimeWhen, {"type": "time", **fields})
    assert where == path
    assert message in what


def test_every_of_one_millisecond_is_the_finest_allowed() -> None:
    when = TimeWhen.model_validate({"type": "time", "every": "PT0.001S"})
    assert when.every == timedelta(milliseconds=1)
    when = TimeWhen.model_validate({"type": "time", "offset": "PT0S", "every": 0.001})
    assert when.offset == timedelta(0)


LAX_TRIGGER_FIELDS = [
    (
        {"when": {"type": "action", "tool": "x", "delay": "-PT5M"}},
        "when.action.delay",
        "must be a positive duration (got -300 s)",
    ),
    (
        {"when": {"type": "action", "tool": "x", "delay": True}},
        "when.action.delay",
        "not true",
    ),
    (
        {
            "when": {
                "type": "state",
                "check": {"tool": "t", "predicate": {"exists": True}},
                "delay": "-PT1S",
            }
        },
        "when.state.delay",
        "must be a positive duration",
    ),
    (
        {"actions": [{"type": "tool", "tool": "x", "delay": True}]},
        "actions.0.tool.delay",
        "not true",
    ),
    (
        {"actions": [{"type": "tool", "tool": "x", "delay": "-PT1S"}]},
        "actions.0.tool.delay",
        "must be a positive duration (got -1 s)",
    ),
    (
        {
            "actions": [
                {"type": "tool", "tool": "x", "delay": {"dist": "exp", "mean": "-PT1S", "seed": 1}}
            ]
        },
        "actions.0.tool.delay",
        "mean: must be a positive duration (got -1 s)",
    ),
    (
        {
            "actions": [
                {
                    "type": "tool",
                    "tool": "x",
                    "delay": {"dist": "exp", "mean": "PT1S", "seed": True},
                }
            ]
        },
        "actions.0.tool.delay",
        "seed: Input should be a valid integer",
    ),
    ({"barrier": {"timeout_seconds": True}}, "barrier.timeout_seconds", "valid number"),
    ({"barrier": {"timeout_seconds": float("inf")}}, "barrier.timeout_seconds", "finite number"),
    ({"barrier": {"timeout_seconds": float("nan")}}, "barrier.timeout_seconds", "finite number"),
]


@pytest.mark.parametrize(("fields", "path", "message"), LAX_TRIGGER_FIELDS)
def test_lax_trigger_fields_are_refused_at_their_path(
    fields: dict[str, Any], path: str, message: str
) -> None:
    data = {"id": "t", "when": {"type": "time", "every": "PT1H"}, "actions": [], **fields}
    where, what = _refusal(TriggerSpec, data)
    assert where == path
    assert message in what


@pytest.mark.parametrize(
    ("executor", "message"),
    [({"timeout_seconds": False}, "valid number"), ({"timeout_seconds": float("inf")}, "finite")],
)
def test_lax_executor_timeouts_are_refused(executor: dict[str, Any], message: str) -> None:
    where, what = _refusal(TriggerRegistration, {"executor": executor})
    assert where == "executor.timeout_seconds"
    assert message in what


@pytest.mark.parametrize(
    ("registration", "path"),
    [
        ({"executor": {"role": "system"}}, "executor.role"),
        ({"executors": {"night": {"role": " system "}}}, "executors.night.role"),
    ],
)
def test_an_executor_may_not_act_as_the_gateway(registration: dict[str, Any], path: str) -> None:
    # Refused when registered, not when the trigger fires and every action gets a 401.
    where, what = _refusal(TriggerRegistration, registration)
    assert where == path
    assert "reserved" in what


def test_time_values_keep_their_instant() -> None:
    when = TimeWhen.model_validate({"type": "time", "at": "2026-03-02T10:30:00+01:00"})
    assert when.at == datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


# -- actions and triggers --------------------------------------------------------------------


def _trigger(**fields) -> TriggerSpec:
    return TriggerSpec.model_validate(
        {
            "id": "t",
            "when": {"type": "time", "every": "PT1H"},
            "actions": [{"type": "tool", "tool": "x"}],
            **fields,
        }
    )


def test_the_when_and_action_kinds_are_chosen_by_type() -> None:
    t = _trigger(
        when={"type": "action", "tool": "send"},
        actions=[
            {"type": "tool", "tool": "log", "args": {"text": "${args.to}"}, "as": "agent"},
            {"type": "nl", "text": "Tell the user"},
            {"type": "permission", "role": "agent", "action": "disable", "tools": "*"},
        ],
    )
    assert isinstance(t.when, ActionWhen)
    tool_action, nl, permission = t.actions
    assert isinstance(tool_action, ToolAction) and tool_action.as_ == "agent"
    assert isinstance(nl, NlAction) and nl.instruction == "Tell the user"
    assert isinstance(permission, PermissionAction) and permission.tools == "*"


def test_an_nl_action_needs_its_text() -> None:
    with pytest.raises(ValidationError, match="text"):
        _trigger(actions=[{"type": "nl"}])


def test_a_permission_action_is_disable_or_enable() -> None:
    with pytest.raises(ValidationError, match="'disable' or 'enable'"):
        _trigger(actions=[{"type": "permission", "role": "a", "action": "block", "tools": "*"}])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id": ""}, "at least 1 character"),
        ({"when": {"type": "weird"}}, "does not match any of the expected tags"),
        ({"actions": [{"type": "email"}]}, "does not match any of the expected tags"),
        ({"actions": [{"type": "tool"}]}, "tool"),
        ({"barrier": {"timeout_seconds": 0}}, "greater than 0"),
        ({"barrier": {"at": "later"}}, "provoking_call"),
    ],
)
def test_bad_triggers(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        _trigger(**fields)
    assert message in str(info.value)


def test_a_trigger_without_actions_is_a_sensor() -> None:
    assert _trigger(actions=[]).actions == []


def test_barrier_defaults() -> None:
    assert _trigger(barrier={}).barrier == Barrier(at="provoking_call", timeout_seconds=30.0)


def test_registration_ids_must_be_unique() -> None:
    t = {
        "id": "dup",
        "when": {"type": "time", "every": "PT1H"},
        "actions": [{"type": "nl", "text": "x"}],
    }
    with pytest.raises(ValidationError, match="trigger id 'dup' appears twice"):
        TriggerRegistration.model_validate({"triggers": [t, t]})


def test_registration_fields() -> None:
    reg = TriggerRegistration.model_validate(
        {
            "watch_roles": ["agent"],
            "executor": {"a2a_url": "http://x", "role": "exec"},
            "triggers": [],
        }
    )
    assert reg.watch_roles == ["agent"]
    assert reg.executor is not None
    assert reg.executor.timeout_seconds == 120.0  # the protocol's default


# -- triggers inside an environment document -------------------------------------------------

DOC = {"apiVersion": "agentenv/v1", "kind": "Environment", "name": "x"}


@pytest.mark.parametrize(
    ("triggers", "path", "message"),
    [
        (
            [{"id": "a", "when": {"type": "action"}, "actions": [{"type": "nl", "text": "x"}]}],
            "triggers[0].when.tool",
            "Field required",
        ),
        (
            {
                "triggers": [
                    {
                        "id": "a",
                        "when": {"type": "action"},
                        "actions": [{"type": "nl", "text": "x"}],
                    }
                ]
            },
            "triggers.triggers[0].when.tool",
            "Field required",
        ),
        (
            [
                {
                    "id": "a",
                    "when": {"type": "action", "tool": "t", "where": [{"path": "args.x"}]},
                    "actions": [{"type": "nl", "text": "x"}],
                }
            ],
            "triggers[0].when.where[0]",
            "a predicate needs exactly one of 'regex', 'equals', 'exists'",
        ),
        (
            [{"id": "a", "when": {"type": "time"}, "actions": [{"type": "nl", "text": "x"}]}],
            "triggers[0].when",
            "a time trigger needs 'at', 'after', 'offset' or 'every'",
        ),
        (
            [
                {
                    "id": "a",
                    "when": {"type": "time", "every": "PT1H"},
                    "actions": [{"type": "nl", "text": "x"}],
                },
                {
                    "id": "b",
                    "when": {"type": "time", "every": "PT1H"},
                    "actions": [{"type": "tool"}],
                },
            ],
            "triggers[1].actions[0].tool",
            "Field required",
        ),
    ],
)
def test_a_bad_trigger_in_a_document_is_located(triggers, path: str, message: str) -> None:
    with pytest.raises(DocumentError) as info:
        parse_environment_spec({**DOC, "triggers": triggers}, "envs/x/env.yaml")
    err = info.value
    assert err.path == path
    assert err.problem.startswith(message)
    assert str(err).startswith(f"envs/x/env.yaml: {path}: {message}")


def test_a_registration_may_send_null_for_what_it_leaves_out() -> None:
    reg = TriggerRegistration.model_validate(
        {"watch_roles": None, "executor": None, "executors": None, "triggers": []}
    )
    assert (reg.watch_roles, reg.executor, reg.executors) == (None, None, {})
    t = _trigger(
        when={"type": "time", "at": "PT1H", "unless": None},
        barrier=None,
        actions=[{"type": "tool", "tool": "x", "delay": None, "as": None, "verify": None}],
    )
    assert t.when.offset == timedelta(hours=1) and t.barrier is None
