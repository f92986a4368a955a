"""Tool access (RBAC): per-role rules, then `*` rules, then the tool's declared roles."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.gateway import AccessControl, GatewayError
from agentenv.spec import AccessRuleSpec, parse_environment_spec

AGENT = Principal("agent")
SUPERVISOR = Principal("supervisor")
AUDITOR = Principal("auditor")


def _crud(name: str, op: str, **extra) -> dict:
    return {"name": name, "crud": {"collection": "tickets", "op": op}, **extra}


def _spec(access: list | None = None, tools: list | None = None, **extra: object):
    return parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "desk",
            "roles": [{"name": "agent"}, {"name": "supervisor"}, {"name": "auditor"}],
            "state": {"tickets": {}},
            "seed": {"tickets": [{"id": "t1", "status": "open"}]},
            "tools": [
                _crud("get_ticket", "get"),
                _crud("list_tickets", "list"),
                _crud("update_ticket", "update"),
                _crud("delete_ticket", "delete", roles=["supervisor"]),
                *(tools or []),
            ],
            "access": access or [],
            **extra,
        }
    )


def make_env(access: list | None = None, tools: list | None = None, **extra: object) -> Environment:
    return Environment.from_spec(_spec(access, tools, **extra))


def names(gw: Gateway, who: Principal, instance: str = "default") -> list[str]:
    return [t.name for t in gw.list_tools(who, instance)]


async def can_call(gw: Gateway, who: Principal, tool: str) -> bool:
    args = {"id": "t1"} if tool != "list_tickets" else {}
    out = await gw.call(who, tool, args)
    assert out.ok or out.denied, out.error
    return out.ok


async def assert_listing_matches_calls(gw: Gateway, who: Principal) -> None:
    """What a role sees listed is exactly what it may call (each call undone afterwards)."""
    listed = set(names(gw, who))
    state = gw.instance().state
    for tool in gw.env.tools:
        snap = state.snapshot()
        args = {"id": "t1"} if tool != "list_tickets" else {}
        out = await gw.call(who, tool, args)
        state.restore(snap)
        assert out.ok == (tool in listed), (who.role, tool, out.error)


ALL = ["get_ticket", "list_tickets", "update_ticket", "delete_ticket"]


# -- declared roles --------------------------------------------------------------------------


async def test_with_no_rules_a_tool_is_open_unless_it_declares_roles() -> None:
    gw = Gateway(make_env())
    assert names(gw, AGENT) == ["get_ticket", "list_tickets", "update_ticket"]
    assert names(gw, SUPERVISOR) == ALL
    out = await gw.call(AGENT, "delete_ticket", {"id": "t1"})
    assert out.denied
    assert (
        out.error is not None and out.error.message == "role 'agent' may not call 'delete_ticket'"
    )
    assert gw.instance().trajectory[-1].denied
    assert gw.instance().state.has("tickets", "t1")
    for who in (AGENT, SUPERVISOR, AUDITOR):
        await assert_listing_matches_calls(gw, who)


# -- document rules --------------------------------------------------------------------------


async def test_document_rules_apply_to_every_instance() -> None:
    gw = Gateway(make_env([{"role": "agent", "tools": ["update_ticket"]}]))
    gw.create_instance("b")
    for instance in ("default", "b"):
        assert "update_ticket" not in names(gw, AGENT, instance)
    assert not await can_call(gw, AGENT, "update_ticket")
    assert await can_call(gw, SUPERVISOR, "update_ticket")


async def test_a_role_rule_wins_over_a_wildcard_role_rule() -> None:
    gw = Gateway(
        make_env(
            [
                {"role": "*", "tools": "*"},
                {"role": "agent", "action": "enable", "tools": ["get_ticket", "list_tickets"]},
            ]
        )
    )
    assert names(gw, AGENT) == ["get_ticket", "list_tickets"]
    assert names(gw, SUPERVISOR) == []
    assert names(gw, AUDITOR) == []
    for who in (AGENT, SUPERVISOR, AUDITOR):
        await assert_listing_matches_calls(gw, who)


async def test_a_rule_about_the_tool_wins_over_a_rule_about_all_tools() -> None:
    gw = Gateway(
        make_env(
            [
                {"role": "auditor", "tools": "*"},
                {"role": "auditor", "action": "enable", "tools": ["list_tickets"]},
            ]
        )
    )
    assert names(gw, AUDITOR) == ["list_tickets"]
    await assert_listing_matches_calls(gw, AUDITOR)


async def test_an_enable_rule_overrides_declared_roles() -> None:
    gw = Gateway(make_env([{"role": "agent", "action": "enable", "tools": ["delete_ticket"]}]))
    assert "delete_ticket" in names(gw, AGENT)
    assert await can_call(gw, AGENT, "delete_ticket")


async def test_a_wildcard_role_rule_applies_to_roles_with_no_rule_of_their_own() -> None:
    gw = Gateway(make_env([{"role": "*", "tools": ["get_ticket"]}]))
    assert "get_ticket" not in names(gw, AGENT)
    assert "get_ticket" not in names(gw, SUPERVISOR)
    assert "get_ticket" not in names(gw, Principal("someone-new"))


# -- runtime changes -------------------------------------------------------------------------


async def test_disable_and_enable_at_run_time() -> None:
    gw = Gateway(make_env())
    rules = await gw.set_tool_access(SYSTEM, "disable", "agent", ["update_ticket", "get_ticket"])
    assert rules == {"agent": {"update_ticket": False, "get_ticket": False}}
    assert names(gw, AGENT) == ["list_tickets"]
    assert not await can_call(gw, AGENT, "get_ticket")
    assert await can_call(gw, SUPERVISOR, "get_ticket")

    rules = await gw.set_tool_access(SYSTEM, "enable", "agent", ["get_ticket"])
    assert rules == {"agent": {"update_ticket": False, "get_ticket": True}}
    assert names(gw, AGENT) == ["get_ticket", "list_tickets"]
    assert await can_call(gw, AGENT, "get_ticket")
    control = gw.instance().trajectory[-2]
    assert (control.kind, control.event) == ("control", "tools_enable")


async def test_star_replaces_the_roles_narrower_rules() -> None:
    gw = Gateway(make_env())
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["update_ticket"])
    rules = await gw.set_tool_access(SYSTEM, "enable", "agent", "*")
    assert rules == {"agent": {"*": True}}
    # Enabling `*` lifts the disable. (Whether it also grants tools declared for other
    # roles is being settled in access.py; this test does not pin it.)
    assert {"get_ticket", "list_tickets", "update_ticket"} <= set(names(gw, AGENT))
    await assert_listing_matches_calls(gw, AGENT)
    rules = await gw.set_tool_access(SYSTEM, "disable", "agent", "*")
    assert names(gw, AGENT) == []
    await assert_listing_matches_calls(gw, AGENT)
    rules = await gw.set_tool_access(SYSTEM, "enable", "agent", ["get_ticket"])
    assert rules == {"agent": {"*": False, "get_ticket": True}}
    assert names(gw, AGENT) == ["get_ticket"]


async def test_disable_all_for_every_role_and_the_system_still_passes() -> None:
    gw = Gateway(make_env())
    await gw.set_tool_access(SYSTEM, "disable", "*", "*")
    for who in (AGENT, SUPERVISOR, AUDITOR):
        assert names(gw, who) == []
    assert names(gw, SYSTEM) == ALL
    assert (await gw.call(SYSTEM, "delete_ticket", {"id": "t1"})).ok


async def test_unknown_tools_are_refused_and_nothing_changes() -> None:
    gw = Gateway(make_env())
    with pytest.raises(GatewayError, match="unknown tool 'launch', 'fly'") as info:
        await gw.set_tool_access(SYSTEM, "disable", "agent", ["get_ticket", "launch", "fly"])
    assert info.value.status == 400
    assert gw.instance().access.rules() == {}
    assert names(gw, AGENT) == ["get_ticket", "list_tickets", "update_ticket"]


async def test_a_prefix_pattern_is_accepted_and_takes_effect() -> None:
    gw = Gateway(make_env())
    rules = await gw.set_tool_access(SYSTEM, "disable", "agent", ["list*"])
    assert rules == {"agent": {"list*": False}}
    assert names(gw, AGENT) == ["get_ticket", "update_ticket"]
    assert not await can_call(gw, AGENT, "list_tickets")
    assert await can_call(gw, SUPERVISOR, "list_tickets")
    await assert_listing_matches_calls(gw, AGENT)


async def test_star_in_a_list_is_accepted_and_disables_every_tool() -> None:
    gw = Gateway(make_env())
    rules = await gw.set_tool_access(SYSTEM, "disable", "agent", ["*"])
    assert rules == {"agent": {"*": False}}
    assert names(gw, AGENT) == []
    assert not await can_call(gw, AGENT, "get_ticket")
    assert await can_call(gw, SUPERVISOR, "get_ticket")
    await assert_listing_matches_calls(gw, AGENT)


async def test_a_prefix_pattern_that_matches_no_tool_is_refused() -> None:
    gw = Gateway(make_env())
    with pytest.raises(GatewayError, match=r"unknown tool 'zzz\*'") as info:
        await gw.set_tool_access(SYSTEM, "disable", "agent", ["get_ticket", "zzz*"])
    assert info.value.status == 400
    assert gw.instance().access.rules() == {}
    assert names(gw, AGENT) == ["get_ticket", "list_tickets", "update_ticket"]


async def test_get_time_may_be_ruled_before_the_clock_is_armed() -> None:
    gw = Gateway(make_env())
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["get_time"])
    await gw.set_clock(SYSTEM, datetime(2026, 1, 1, tzinfo=UTC))
    assert "get_time" not in names(gw, AGENT)
    assert "get_time" in names(gw, SUPERVISOR)
    assert (await gw.call(AGENT, "get_time", {})).denied


async def test_rules_are_per_instance() -> None:
    gw = Gateway(make_env())
    gw.create_instance("b")
    await gw.set_tool_access(SYSTEM, "disable", "agent", "*", instance="b")
    assert names(gw, AGENT, "b") == []
    assert names(gw, AGENT) == ["get_ticket", "list_tickets", "update_ticket"]
    assert gw.status("b").role_rules == {"agent": {"*": False}}
    assert gw.status().role_rules == {}


# -- AccessControl itself ---------------------------------------------------------------------


def test_access_control_from_rules_and_the_rules_view() -> None:
    env = make_env()
    access = AccessControl(
        [
            AccessRuleSpec(role="agent", tools=["get_ticket"]),
            AccessRuleSpec(role="*", action="enable", tools=["delete_ticket"]),
        ]
    )
    tools = env.tools
    assert not access.allowed("agent", tools["get_ticket"])
    assert access.allowed("agent", tools["list_tickets"])
    assert access.allowed("agent", tools["delete_ticket"])  # `*` enables it for everyone
    assert access.allowed("system", tools["get_ticket"])
    view = access.rules()
    view["agent"]["get_ticket"] = True  # a copy: changing it changes nothing
    assert not access.allowed("agent", tools["get_ticket"])


async def test_a_role_the_environment_does_not_declare_is_served_like_any_other() -> None:
    gw = Gateway(make_env())
    contractor = Principal("contractor")
    assert names(gw, contractor) == ["get_ticket", "list_tickets", "update_ticket"]
    assert await can_call(gw, contractor, "update_ticket")
    assert not await can_call(gw, contractor, "delete_ticket")  # declared for supervisors
    assert gw.instance().trajectory[-1].role == "contractor"


@pytest.mark.parametrize("how", ["document", "gateway"])
async def test_with_strict_roles_an_undeclared_role_gets_nothing(how: str) -> None:
    if how == "document":
        env = Environment.from_spec(_spec(strict_roles=True))
        gw = Gateway(env)
    else:
        gw = Gateway(make_env(), strict_roles=True)
    assert gw.strict_roles
    stranger = Principal("agnet")  # a typo of "agent"
    assert names(gw, stranger) == []
    before = gw.instance().state.hash()
    result = await gw.call(stranger, "get_ticket", {"id": "t1"})
    assert result.denied
    assert result.error is not None and "unknown role 'agnet'" in result.error.message
    assert gw.instance().state.hash() == before
    assert gw.instance().trajectory[-1].denied
    assert await can_call(gw, AGENT, "get_ticket")
    assert await can_call(gw, Principal("default"), "get_ticket")  # the default role
    with pytest.raises(GatewayError, match="unknown role 'agnet'") as info:
        await gw.set_tool_access(SYSTEM, "disable", "agnet", ["get_ticket"])
    assert info.value.status == 400
    assert gw.instance().access.rules() == {}


def test_strict_roles_can_be_turned_off_at_the_gateway() -> None:
    gw = Gateway(Environment.from_spec(_spec(strict_roles=True)), strict_roles=False)
    assert names(gw, Principal("agnet")) == ["get_ticket", "list_tickets", "update_ticket"]


async def test_an_environment_that_declares_no_roles_serves_any_role_name() -> None:
    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "open",
            "state": {"notes": {"key": "id"}},
            "seed": {"notes": [{"id": "n1"}]},
            "tools": [{"name": "get_note", "crud": {"collection": "notes", "op": "get"}}],
        }
    )
    gw = Gateway(Environment.from_spec(spec))
    anyone = Principal("whoever")
    assert names(gw, anyone) == ["get_note"]
    assert (await gw.call(anyone, "get_note", {"id": "n1"})).ok


# -- the protocol's `default` role -----------------------------------------------------------


async def test_the_default_role_is_the_environments_default_role() -> None:
    gw = Gateway(make_env(default_role="supervisor"))
    nobody = Principal("default")  # what a gateway forwards when it has no role to forward
    assert names(gw, nobody) == ALL  # as the supervisor: delete_ticket is theirs
    assert await can_call(gw, nobody, "delete_ticket")
    assert gw.instance().trajectory[-1].role == "supervisor"


async def test_rules_for_default_apply_to_the_default_role_after_its_own() -> None:
    gw = Gateway(make_env(default_role="agent"))
    await gw.set_tool_access(SYSTEM, "disable", "default", ["get_ticket", "update_ticket"])
    await gw.set_tool_access(SYSTEM, "enable", "agent", ["update_ticket"])
    assert gw.instance().access.rules()["default"] == {"get_ticket": False, "update_ticket": False}
    for who in (AGENT, Principal("default")):
        assert names(gw, who) == ["list_tickets", "update_ticket"]
        await assert_listing_matches_calls(gw, who)
    assert names(gw, SUPERVISOR) == ALL  # not the default role: untouched


def test_a_document_rule_may_name_any_role() -> None:
    env = make_env([{"role": "contractor", "tools": ["update_ticket"]}])
    gw = Gateway(env)
    assert "update_ticket" not in names(gw, Principal("contractor"))
    assert "update_ticket" in names(gw, AGENT)


async def test_run_time_rules_may_name_any_role() -> None:
    gw = Gateway(make_env())
    rules = await gw.set_tool_access(SYSTEM, "disable", "contractor", ["update_ticket"])
    assert rules == {"contractor": {"update_ticket": False}}
    assert names(gw, Principal("contractor")) == ["get_ticket", "list_tickets"]


# -- how rules combine, as the protocol's gateways combine them --------------------------------


async def test_a_wildcard_role_rule_about_a_tool_overrides_each_roles_earlier_rule() -> None:
    gw = Gateway(make_env())
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["get_ticket"])
    rules = await gw.set_tool_access(SYSTEM, "enable", "*", ["get_ticket"])
    assert rules == {"agent": {"get_ticket": True}, "*": {"get_ticket": True}}
    assert "get_ticket" in names(gw, AGENT)
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["get_ticket"])  # a later one wins
    assert "get_ticket" not in names(gw, AGENT)


async def test_everything_for_everyone_starts_over() -> None:
    gw = Gateway(make_env())
    await gw.set_tool_access(SYSTEM, "enable", "agent", ["delete_ticket"])
    await gw.set_tool_access(SYSTEM, "disable", "auditor", "*")
    rules = await gw.set_tool_access(SYSTEM, "enable", "*", "*")
    assert rules == {"*": {"*": True}}
    assert "delete_ticket" not in names(gw, AGENT)  # the agent's grant went with the rest
    assert names(gw, AUDITOR) == ["get_ticket", "list_tickets", "update_ticket"]


# -- tools hidden by default ------------------------------------------------------------------

HIDDEN = _crud("reopen_ticket", "update", hidden_by_default=True)


def hidden_env(access: list | None = None) -> Environment:
    return make_env(access, tools=[HIDDEN])


async def test_a_hidden_tool_is_hidden_from_every_role_and_the_system_may_call_it() -> None:
    gw = Gateway(hidden_env())
    for who in (AGENT, SUPERVISOR, AUDITOR, Principal("contractor"), Principal("default")):
        assert "reopen_ticket" not in names(gw, who)
        await assert_listing_matches_calls(gw, who)
    out = await gw.call(AGENT, "reopen_ticket", {"id": "t1"})
    assert out.denied and out.error is not None
    assert out.error.message == "role 'agent' may not call 'reopen_ticket'"
    assert "reopen_ticket" in names(gw, SYSTEM)
    assert (await gw.call(SYSTEM, "reopen_ticket", {"id": "t1"})).ok


@pytest.mark.parametrize(
    "rule",
    [
        {"role": "agent", "action": "enable", "tools": "*"},
        {"role": "*", "action": "enable", "tools": "*"},
        {"role": "agent", "action": "enable", "tools": ["reopen*"]},
    ],
    ids=["role-star", "star-star", "prefix"],
)
async def test_a_rule_that_does_not_name_a_hidden_tool_leaves_it_hidden(rule: dict) -> None:
    gw = Gateway(hidden_env([rule]))
    assert "reopen_ticket" not in names(gw, AGENT)
    assert "update_ticket" in names(gw, AGENT)
    await assert_listing_matches_calls(gw, AGENT)


async def test_naming_a_hidden_tool_shows_it_to_that_role_only() -> None:
    gw = Gateway(hidden_env())
    await gw.set_tool_access(SYSTEM, "enable", "agent", ["reopen_ticket"])
    assert "reopen_ticket" in names(gw, AGENT)
    assert "reopen_ticket" not in names(gw, SUPERVISOR)
    await assert_listing_matches_calls(gw, AGENT)
    await gw.set_tool_access(SYSTEM, "disable", "agent", "*")  # a role's `*` replaces it
    assert names(gw, AGENT) == []
    await gw.set_tool_access(SYSTEM, "enable", "*", ["reopen_ticket"])  # every role
    assert "reopen_ticket" in names(gw, SUPERVISOR)
    assert names(gw, AGENT) == ["reopen_ticket"]


async def test_a_hidden_tool_is_listed_with_the_protocols_meta() -> None:
    gw = Gateway(hidden_env([{"role": "agent", "action": "enable", "tools": ["reopen_ticket"]}]))
    listed = {t.name: t for t in gw.list_tools(AGENT)}
    wire = listed["reopen_ticket"].model_dump(by_alias=True)
    assert wire["_meta"] == {"agentenv.io/hiddenByDefault": True}
    assert "_meta" not in listed["get_ticket"].model_dump(by_alias=True)
    assert "_meta" not in listed["get_ticket"].model_dump_json(by_alias=True)


PLUMBING_TOOLS = '''
from agentenv import tool


@tool(hidden_by_default=True)
def plumbing() -> str:
    """Task plumbing."""
    return "ok"


@tool
def visible() -> str:
    """For agents."""
    return "ok"
'''

PLUMBING_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: plumbing
tools:
  - {function: tools.py:plumbing}
  - {function: tools.py:visible, name: secret, hidden_by_default: true}
  - {function: tools.py:visible}
"""


def test_hidden_by_default_from_a_decorator_and_from_the_document(tmp_path: Path) -> None:
    (tmp_path / "tools.py").write_text(PLUMBING_TOOLS, encoding="utf-8")
    (tmp_path / "env.yaml").write_text(PLUMBING_ENV, encoding="utf-8")
    env = Environment.load(tmp_path)
    assert env.tools["plumbing"].hidden_by_default
    assert env.tools["secret"].hidden_by_default
    assert not env.tools["visible"].hidden_by_default
    assert names(Gateway(env), Principal("default")) == ["visible"]


# -- behind another gateway -------------------------------------------------------------------


async def test_behind_a_gateway_every_tool_is_listed_and_our_rules_still_refuse_calls() -> None:
    env = hidden_env([{"role": "auditor", "tools": ["update_ticket"]}])
    gw = Gateway(env, behind_gateway=True)
    every = [*ALL, "reopen_ticket"]
    for who in (AGENT, AUDITOR, Principal("default"), Principal("contractor")):
        assert names(gw, who) == every  # some role may call each of them
    wire = {t.name: t.model_dump(by_alias=True) for t in gw.list_tools(AGENT)}
    assert wire["reopen_ticket"]["_meta"] == {"agentenv.io/hiddenByDefault": True}
    assert await can_call(gw, AGENT, "reopen_ticket")  # the gateway in front hides it
    assert not await can_call(gw, AGENT, "delete_ticket")  # declared for supervisors
    assert not await can_call(gw, AUDITOR, "update_ticket")  # the document's rule


async def test_behind_a_gateway_a_tool_no_role_may_call_is_not_listed() -> None:
    rules = [{"role": "*", "tools": ["update_ticket"]}]
    gw = Gateway(make_env(rules), behind_gateway=True)
    assert "update_ticket" not in names(gw, AGENT)
    await gw.set_tool_access(SYSTEM, "enable", "contractor", ["update_ticket"])
    assert "update_ticket" in names(gw, AGENT)  # the contractor may: the front decides
    strict = Gateway(
        make_env([{"role": "*", "tools": "*"}], strict_roles=True), behind_gateway=True
    )
    assert names(strict, AGENT) == []


CHILD_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: child
state: {notes: {}}
tools:
  - {name: get_note, crud: {collection: notes, op: get}}
  - {name: purge, crud: {collection: notes, op: delete}, hidden_by_default: true}
access:
  - {role: ops, action: enable, tools: [purge]}
  - {role: agent, action: enable, tools: "*"}
"""


def test_a_composed_childs_hidden_tool_stays_hidden_under_its_namespace(tmp_path: Path) -> None:
    (tmp_path / "child").mkdir()
    (tmp_path / "child" / "env.yaml").write_text(CHILD_ENV, encoding="utf-8")
    (tmp_path / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: parent\n"
        "compose:\n  - {env: child, as: c}\n",
        encoding="utf-8",
    )
    gw = Gateway(Environment.load(tmp_path))
    assert names(gw, Principal("default")) == ["c__get_note"]
    assert names(gw, Principal("agent")) == ["c__get_note"]  # `*` became `c__*`: not named
    listed = {t.name: t.model_dump(by_alias=True) for t in gw.list_tools(Principal("ops"))}
    assert listed["c__purge"]["_meta"] == {"agentenv.io/hiddenByDefault": True}


async def test_tool_lists_are_cached_per_role_until_a_rule_changes() -> None:
    gw = Gateway(make_env())
    first = gw.list_tools(AGENT)
    assert gw.list_tools(AGENT) == first and gw.list_tools(AGENT) is not first  # a new list
    assert not any(a is b for a, b in zip(gw.list_tools(AGENT), first, strict=True))  # copies
    assert names(gw, SUPERVISOR) != names(gw, AGENT)  # one list per role
    before = names(gw, AGENT)
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["get_ticket"])
    assert names(gw, AGENT) == [n for n in before if n != "get_ticket"]  # the cache was emptied
    assert [t.name for t in gw.tools_for(AGENT)] == names(gw, AGENT)
    other = gw.create_instance()
    assert names(gw, AGENT, other.id) == before  # rules (and caches) are per instance


def test_a_caller_editing_its_tool_list_does_not_change_what_others_are_listed() -> None:
    # Tool lists are cached per role; a caller (an agent adapting schemas for its model,
    # say) that edits what it was given must not reach other gateways or later listings.
    env = make_env()
    first = Gateway(env).list_tools(AGENT)
    before = Gateway(env).list_tools(AGENT)[0].model_dump(by_alias=True)
    first[0].input_schema["properties"] = {"hacked": {}}
    first[0].description = "changed"
    for gw in (Gateway(env), Gateway(env)):
        assert gw.list_tools(AGENT)[0].model_dump(by_alias=True) == before
    assert env.tools[first[0].name].input_schema.get("properties") != {"hacked": {}}
