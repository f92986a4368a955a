"""EnvironmentSpec: the environment document as a pydantic model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import yaml
from pydantic import ValidationError

from agentenv.spec import (
    AccessRuleSpec,
    ClockSpec,
    CollectionSpec,
    EnvironmentSpec,
    ParamSpec,
    ToolSpec,
)

BASE = {"apiVersion": "agentenv/v1", "kind": "Environment", "name": "helpdesk"}


def spec(**fields) -> EnvironmentSpec:
    return EnvironmentSpec.model_validate({**BASE, **fields})


def test_a_minimal_document_gets_the_defaults() -> None:
    s = spec()
    assert s.api_version == "agentenv/v1"
    assert s.version == "0.1.0"
    assert s.role_names == ["default"]
    assert s.default_role is None
    assert s.state == {} and s.seed == {} and s.tools == [] and s.access == []
    assert s.class_ is None
    assert s.clock == ClockSpec()
    assert s.clock.mode == "stepped"
    assert s.clock.rate == 1.0
    assert s.clock.default_duration == timedelta(seconds=1)
    assert s.clock.start is None
    assert s.triggers.triggers == []
    assert s.reference_problems() == []


def test_a_full_document_round_trips_through_json_and_yaml() -> None:
    s = spec(
        description="A help desk.",
        roles=[{"name": "agent", "description": "Works tickets"}, {"name": "user"}],
        default_role="user",
        state={
            "tickets": {
                "key": "ticket_id",
                "schema": {"type": "object", "properties": {"ticket_id": {"type": "string"}}},
            }
        },
        seed={"tickets": [{"ticket_id": "T-1"}]},
        tools=[
            {"function": "tools.py:close", "duration": "PT5M", "timeout": 2, "roles": ["agent"]},
            {"module": "more_tools.py", "kind": "read"},
            {
                "name": "list_tickets",
                "crud": {"collection": "tickets", "op": "list", "fields": ["status"]},
                "params": {"status": {"type": "string", "enum": ["open", "closed"]}},
            },
        ],
        clock={"start": "2026-03-02T09:00:00Z", "mode": "wall", "rate": 60},
        triggers=[
            {
                "id": "t1",
                "when": {"type": "time", "after": "PT1H"},
                "actions": [{"type": "tool", "tool": "close", "args": {}}],
            }
        ],
        access=[{"role": "user", "tools": ["close"]}],
        **{"class": "env.py:Helpdesk"},
    )
    dumped = s.model_dump(by_alias=True, mode="json")
    assert dumped["apiVersion"] == "agentenv/v1"
    assert dumped["class"] == "env.py:Helpdesk"
    assert dumped["state"]["tickets"]["schema"]["type"] == "object"
    assert dumped["tools"][0]["duration"] == "PT5M"
    assert EnvironmentSpec.model_validate(dumped) == s
    assert EnvironmentSpec.model_validate(yaml.safe_load(yaml.safe_dump(dumped))) == s


def test_python_field_names_are_accepted_too() -> None:
    s = EnvironmentSpec.model_validate(
        {"api_version": "agentenv/v1", "kind": "Environment", "name": "x", "class_": "a.py:B"}
    )
    assert s.class_ == "a.py:B"


@pytest.mark.parametrize("name", ["bank", "bank-2", "my_env.v1", "0day"])
def test_good_names(name: str) -> None:
    assert spec(name=name).name == name


@pytest.mark.parametrize("name", ["has space", "", "-lead", "tab\tname", "slash/name"])
def test_names_with_whitespace_or_odd_characters_are_refused(name: str) -> None:
    with pytest.raises(ValidationError):
        spec(name=name)


def test_unknown_fields_are_refused_everywhere() -> None:
    for doc in (
        {"colour": "red"},
        {"roles": [{"name": "a", "colour": "red"}]},
        {"state": {"t": {"colour": "red"}}},
        {"tools": [{"function": "a.py:f", "colour": "red"}]},
        {"clock": {"colour": "red"}},
        {"access": [{"role": "a", "tools": "*", "colour": "red"}]},
    ):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            spec(**doc)


# -- tools -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ({"name": "x"}, "a tool needs exactly one of 'function'"),
        ({"function": "a.py:f", "module": "a.py"}, "(has function, module)"),
        ({"crud": {"collection": "t", "op": "get"}}, "a crud tool needs a 'name'"),
        ({"module": "a.py", "name": "x"}, "'name' cannot be set on a 'module' or 'method' entry"),
        ({"function": "a.py:f", "params": {"x": {}}}, "'params' is only for crud tools"),
        ({"function": "a.py:f", "timeout": 0}, "greater than 0"),
        ({"function": "a.py:f", "kind": "delete"}, "'read' or 'write'"),
        ({"function": "a.py:f", "name": "has space"}, "String should match pattern"),
        ({"name": "x", "crud": {"collection": "t", "op": "upsert"}}, "'get', 'list'"),
    ],
)
def test_tool_entry_rules(tool: dict, message: str) -> None:
    with pytest.raises(ValidationError) as info:
        ToolSpec.model_validate(tool)
    assert message in str(info.value)


def test_tool_durations_parse_iso_and_seconds() -> None:
    assert ToolSpec.model_validate({"function": "a.py:f", "duration": "PT1M30S"}).duration == (
        timedelta(seconds=90)
    )
    assert ToolSpec.model_validate({"function": "a.py:f", "duration": 2.5}).duration == (
        timedelta(seconds=2.5)
    )


def test_param_spec_types() -> None:
    assert ParamSpec().type == "string"
    assert ParamSpec.model_validate({"type": "integer", "minimum": 1}).minimum == 1
    with pytest.raises(ValidationError):
        ParamSpec.model_validate({"type": "money"})


# -- collections, clock, access --------------------------------------------------------------


def test_a_collection_schema_must_be_a_valid_json_schema() -> None:
    assert CollectionSpec.model_validate({"schema": {"type": "object"}}).record_schema == {
        "type": "object"
    }
    with pytest.raises(ValidationError, match="not a valid JSON schema"):
        CollectionSpec.model_validate({"schema": {"type": "nonsense"}})
    assert CollectionSpec().key == "id"


def test_clock_start_needs_a_timezone() -> None:
    clock = ClockSpec.model_validate({"start": "2026-03-02T09:00:00+01:00"})
    assert clock.start == datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
    with pytest.raises(ValidationError, match="start needs a timezone"):
        ClockSpec.model_validate({"start": "2026-03-02T09:00:00"})


@pytest.mark.parametrize("rate", [0, 1, 86400])
def test_clock_rate_bounds_accept(rate: float) -> None:
    assert ClockSpec(rate=rate).rate == rate


@pytest.mark.parametrize("rate", [-1, 86400.5])
def test_clock_rate_bounds_refuse(rate: float) -> None:
    with pytest.raises(ValidationError):
        ClockSpec(rate=rate)


def test_clock_mode_is_stepped_or_wall() -> None:
    with pytest.raises(ValidationError):
        ClockSpec.model_validate({"mode": "fast"})


def test_access_rules() -> None:
    rule = AccessRuleSpec.model_validate({"role": "agent", "tools": "*"})
    assert (rule.action, rule.tools) == ("disable", "*")
    assert AccessRuleSpec.model_validate(
        {"role": "*", "action": "enable", "tools": ["a"]}
    ).tools == ["a"]
    with pytest.raises(ValidationError):
        AccessRuleSpec.model_validate({"role": "agent", "tools": "some"})


# -- cross references ------------------------------------------------------------------------


def test_reference_problems_lists_every_unresolved_reference_with_its_location() -> None:
    s = spec(
        roles=[{"name": "agent"}],
        default_role="boss",
        state={"tickets": {}},
        seed={"tickets": [], "users": []},
        tools=[
            {"name": "a", "crud": {"collection": "tickets", "op": "get"}, "roles": ["agent"]},
            {"name": "b", "crud": {"collection": "orders", "op": "get"}, "roles": ["x", "agent"]},
        ],
        access=[{"role": "*", "tools": "*"}, {"role": "ghost", "tools": ["a"]}],
        strict_roles=True,  # access rules may name any role unless roles are strict
    )
    problems = s.reference_problems()
    assert [loc for loc, _ in problems] == [
        ("default_role",),
        ("tools", 1, "crud", "collection"),
        ("tools", 1, "roles", 0),
        ("access", 1, "role"),
        ("seed", "users"),
    ]
    messages = dict(problems)
    assert messages[("default_role",)] == "unknown role 'boss' (roles: agent)"
    assert messages[("tools", 1, "crud", "collection")] == (
        "unknown collection 'orders' (collections: tickets)"
    )
    assert messages[("seed", "users")] == "no collection 'users' is declared in 'state'"
    relaxed = s.model_copy(update={"strict_roles": False}).reference_problems()
    assert ("access", 1, "role") not in [loc for loc, _ in relaxed]


def test_triggers_as_a_list_are_a_registration() -> None:
    trigger = {
        "id": "t1",
        "when": {"type": "time", "every": "PT1H"},
        "actions": [{"type": "tool", "tool": "x"}],
    }
    short = spec(triggers=[trigger])
    full = spec(triggers={"triggers": [trigger]})
    assert short.triggers == full.triggers
    assert short.triggers.watch_roles is None
    assert [t.id for t in short.triggers.triggers] == ["t1"]
