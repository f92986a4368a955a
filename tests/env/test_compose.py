"""Composition: child environments served as one, under `<alias>__` namespaces.

Every test writes its own small documents into tmp_path (a `mail` and a `cal` service,
and parents that compose them), the way a user lays out a composed environment.
"""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from agentenv import SYSTEM, DocumentError, Environment, Gateway, Principal
from agentenv.serve import build_card

AGENT = Principal("agent")
USER = Principal("user")
BOSS = Principal("boss")
T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

MAIL_TOOLS = '''
from datetime import timedelta

from agentenv import ToolContext, ToolError, tool


@tool(duration=30)
def send(ctx: ToolContext, to: str, subject: str) -> dict:
    """Send an email.

    Args:
        to: The address.
        subject: The subject line.
    """
    if "@" not in to:
        raise ToolError(f"{to!r} is not an address")
    number = ctx.state.count("outbox") + 1
    return ctx.state.insert("outbox", {"id": f"M-{number}", "to": to, "subject": subject})


@tool(kind="read", duration=2)
def count_sent(ctx: ToolContext) -> dict:
    """How many emails were sent."""
    return {"sent": ctx.state.count("outbox"), "collections": ctx.state.collections}


@tool(duration=0)
def log(ctx: ToolContext, text: str) -> dict:
    """Plumbing for the child's own trigger."""
    return ctx.state.insert("log", {"id": f"L-{ctx.state.count('log') + 1}", "text": text})


@tool(duration=1)
async def wait(ctx: ToolContext, minutes: int) -> dict:
    """Let time pass (an async tool that spends extra virtual time)."""
    ctx.spend(timedelta(minutes=minutes))
    return {"waited": minutes}
'''

CAL_TOOLS = '''
from agentenv import ToolContext, ToolError, tool


@tool(duration=10)
def add_event(ctx: ToolContext, title: str, ref: str | None = None) -> dict:
    """Add an event; a second event with the same title is a clash."""
    if ctx.state.find("events", title=title):
        raise ToolError(f"an event {title!r} exists")
    number = ctx.state.count("events") + 1
    return ctx.state.insert("events", {"id": f"E-{number}", "title": title, "ref": ref})


@tool(kind="read", duration=2)
def list_events(ctx: ToolContext) -> dict:
    """Every event."""
    return {"events": ctx.state.list("events")}


@tool(duration=5)
def add_then_fail(ctx: ToolContext, title: str) -> dict:
    """Writes an event and a second record, then fails: nothing may stay."""
    ctx.state.insert("events", {"id": "E-99", "title": title, "ref": None})
    ctx.state.update("events", "E-1", {"title": "changed"})
    raise ToolError("calendar is read-only today")
'''


def mail_doc(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": "mail",
        "roles": [
            {"name": "agent", "description": "Sends mail"},
            {"name": "user"},
            {"name": "boss"},
        ],
        "state": {
            "outbox": {"schema": {"type": "object", "required": ["id", "to", "subject"]}},
            "log": {},
        },
        "seed": {"outbox": [{"id": "M-0", "to": "a@b.example", "subject": "old"}]},
        "tools": [{"module": "tools.py"}],
        "triggers": [
            {
                "id": "log-urgent",
                "when": {
                    "type": "action",
                    "tool": "send",
                    "where": {"args.subject": {"regex": "^urgent"}},
                    "repeat": True,
                },
                "actions": [{"type": "tool", "tool": "log", "args": {"text": "${args.subject}"}}],
            },
            {
                "id": "lock-after-spam",
                "when": {"type": "action", "tool": "send", "where": {"args.to": "spam@x.example"}},
                "actions": [
                    {"type": "permission", "role": "user", "action": "disable", "tools": ["send"]}
                ],
            },
        ],
        "access": [
            {"role": "*", "action": "disable", "tools": ["log"]},
            {"role": "boss", "action": "disable", "tools": "*"},
        ],
    }
    doc.update(fields)
    return doc


def cal_doc(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": "cal",
        "roles": [{"name": "agent"}, {"name": "boss", "description": "Runs the calendar"}],
        "state": {"events": {"key": "id"}},
        "seed": {"events": [{"id": "E-1", "title": "Standup", "ref": None}]},
        "tools": [{"module": "tools.py"}],
        "clock": {"start": "2026-03-09T09:00:00Z", "mode": "stepped"},
    }
    doc.update(fields)
    return doc


def parent_doc(**fields: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": "office",
        "roles": [{"name": "agent"}],
        "compose": [{"env": "../mail"}, {"env": "../cal"}],
    }
    doc.update(fields)
    return doc


def write_env(folder: Path, doc: dict[str, Any], tools: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "env.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    if tools is not None:
        (folder / "tools.py").write_text(textwrap.dedent(tools))
    return folder


@pytest.fixture
def services(tmp_path: Path) -> Path:
    """`mail/` and `cal/` written into tmp_path; parents go beside them."""
    write_env(tmp_path / "mail", mail_doc(), MAIL_TOOLS)
    write_env(tmp_path / "cal", cal_doc(), CAL_TOOLS)
    return tmp_path


def compose(root: Path, name: str = "office", **fields: Any) -> Environment:
    return Environment.load(write_env(root / name, parent_doc(**fields)))


def document_error(root: Path, name: str = "office", **fields: Any) -> DocumentError:
    with pytest.raises(DocumentError) as info:
        compose(root, name, **fields)
    return info.value


async def ok(gw: Gateway, who: Principal, tool: str, **args: Any) -> Any:
    result = await gw.call(who, tool, args)
    assert result.ok, f"{tool} failed: {result.text}"
    return result.value


# -- names ------------------------------------------------------------------------------------


def test_child_tools_and_collections_are_namespaced(services: Path) -> None:
    env = compose(services)
    assert sorted(env.tools) == [
        "cal__add_event",
        "cal__add_then_fail",
        "cal__list_events",
        "mail__count_sent",
        "mail__log",
        "mail__send",
        "mail__wait",
    ]
    seed = env.seed.to_dict()
    assert sorted(seed) == ["cal__events", "mail__log", "mail__outbox"]
    assert seed["mail__outbox"] == [{"id": "M-0", "to": "a@b.example", "subject": "old"}]
    assert [alias for alias, _ in env.children] == ["mail", "cal"]
    assert env.children[0][1].name == "mail"
    # tool options survive the renaming
    send = env.tools["mail__send"]
    assert send.duration == timedelta(seconds=30)
    assert send.input_schema["required"] == ["to", "subject"]
    assert env.tools["cal__list_events"].kind == "read"
    assert send.source.startswith("mail:")


def test_an_alias_renames_the_namespace(services: Path) -> None:
    env = compose(services, compose=[{"env": "../mail", "as": "inbox"}, {"env": "../cal"}])
    assert "inbox__send" in env.tools
    assert "mail__send" not in env.tools
    assert "inbox__outbox" in env.seed.to_dict()


async def test_child_tools_use_their_own_collections_through_a_view(services: Path) -> None:
    gw = Gateway(compose(services))
    sent = await ok(gw, AGENT, "mail__send", to="jo@x.example", subject="hello")
    assert sent == {"id": "M-2", "to": "jo@x.example", "subject": "hello"}
    state = gw.instance().state
    assert state.get("mail__outbox", "M-2") == sent
    assert "outbox" not in state.collections
    counted = await ok(gw, AGENT, "mail__count_sent")
    assert counted["sent"] == 2
    assert sorted(counted["collections"]) == ["log", "outbox"]  # only its own, unprefixed
    await ok(gw, AGENT, "cal__add_event", title="Lunch")
    events = await ok(gw, AGENT, "cal__list_events")
    assert [e["title"] for e in events["events"]] == ["Standup", "Lunch"]


def test_roles_are_the_union_parent_first(services: Path) -> None:
    env = compose(services)
    assert env.roles == ("agent", "user", "boss")
    assert env.default_role == "agent"
    assert env.role_descriptions["boss"] == "Runs the calendar"
    assert env.role_descriptions["agent"] == ""  # the parent's own description wins


# -- access -----------------------------------------------------------------------------------


def test_child_access_rules_are_namespaced(services: Path) -> None:
    env = compose(services)
    rules = [(r.role, r.action, r.tools) for r in env.access]
    assert ("*", "disable", ["mail__log"]) in rules
    assert ("boss", "disable", ["mail__*"]) in rules  # a child's `*` covers only its tools


async def test_child_access_rules_apply_in_the_parent(services: Path) -> None:
    gw = Gateway(compose(services))
    for who in (AGENT, USER, BOSS):
        assert "mail__log" not in {t.name for t in gw.list_tools(who)}
    boss_tools = {t.name for t in gw.list_tools(BOSS)}
    assert not any(name.startswith("mail__") for name in boss_tools)
    assert {"cal__add_event", "cal__list_events"} <= boss_tools
    denied = await gw.call(BOSS, "mail__send", {"to": "a@b.example", "subject": "x"})
    assert denied.denied
    await ok(gw, BOSS, "cal__add_event", title="Board meeting")


async def test_parent_access_rules_address_child_tools_exactly_and_by_prefix(
    services: Path,
) -> None:
    env = compose(
        services,
        access=[
            {"role": "user", "action": "disable", "tools": ["cal__*"]},
            {"role": "user", "action": "enable", "tools": ["cal__list_events"]},
            {"role": "agent", "action": "disable", "tools": ["mail__send"]},
        ],
    )
    gw = Gateway(env)
    user_tools = {t.name for t in gw.list_tools(USER)}
    assert "cal__list_events" in user_tools  # the exact rule beats the prefix rule
    assert "cal__add_event" not in user_tools
    assert "mail__send" in user_tools
    agent_tools = {t.name for t in gw.list_tools(AGENT)}
    assert "mail__send" not in agent_tools
    assert "mail__count_sent" in agent_tools

    denied = await gw.call(USER, "cal__add_event", {"title": "x"})
    assert denied.denied
    denied = await gw.call(AGENT, "mail__send", {"to": "a@b.example", "subject": "x"})
    assert denied.denied
    assert [r.denied for r in gw.instance().trajectory.calls()] == [True, True]
    await ok(gw, USER, "cal__list_events")


def test_a_parent_rule_on_an_unknown_child_tool_is_located(services: Path) -> None:
    error = document_error(
        services,
        access=[
            {"role": "agent", "action": "disable", "tools": ["mail__send"]},
            {"role": "user", "action": "disable", "tools": ["mail__count_sent", "mail__delete"]},
        ],
    )
    assert error.path == "access[1].tools[1]"
    assert "mail__delete" in error.problem


def test_a_prefix_rule_must_match_some_tool(services: Path) -> None:
    error = document_error(
        services, access=[{"role": "user", "action": "disable", "tools": ["chat__*"]}]
    )
    assert error.path == "access[0].tools[0]"


def test_a_parent_rule_may_name_a_role_only_a_child_declares(services: Path) -> None:
    env = compose(services, access=[{"role": "boss", "action": "disable", "tools": ["cal__*"]}])
    assert env.access[-1].role == "boss"
    error = document_error(
        services,
        access=[{"role": "ghost", "action": "disable", "tools": ["cal__*"]}],
        strict_roles=True,  # without it, a rule may name any role
    )
    assert error.path == "access[0].role"


# -- triggers ---------------------------------------------------------------------------------


def test_child_triggers_are_namespaced(services: Path) -> None:
    env = compose(services)
    triggers = {t.id: t for t in env.triggers.triggers}
    assert sorted(triggers) == ["mail__lock-after-spam", "mail__log-urgent"]
    urgent = triggers["mail__log-urgent"]
    assert urgent.when.tool == "mail__send"  # type: ignore[union-attr]
    assert urgent.actions[0].tool == "mail__log"  # type: ignore[union-attr]
    lock = triggers["mail__lock-after-spam"]
    assert lock.actions[0].tools == ["mail__send"]  # type: ignore[union-attr]


async def test_child_triggers_still_fire(services: Path) -> None:
    gw = Gateway(compose(services))
    await ok(gw, AGENT, "mail__send", to="a@b.example", subject="hello")
    await ok(gw, AGENT, "mail__send", to="a@b.example", subject="urgent: server down")
    state = gw.instance().state
    assert state.list("mail__log") == [{"id": "L-1", "text": "urgent: server down"}]
    fired = [r for r in gw.instance().trajectory if r.kind == "trigger" and r.tool]
    assert [(r.tool, r.trigger_id) for r in fired] == [("mail__log", "mail__log-urgent")]


async def test_a_child_permission_trigger_changes_access_to_its_own_tool(services: Path) -> None:
    gw = Gateway(compose(services))
    await ok(gw, USER, "mail__send", to="spam@x.example", subject="win a prize")
    assert "mail__send" not in {t.name for t in gw.list_tools(USER)}
    denied = await gw.call(USER, "mail__send", {"to": "a@b.example", "subject": "x"})
    assert denied.denied
    await ok(gw, AGENT, "mail__send", to="a@b.example", subject="still fine for agents")


async def test_a_parent_trigger_watches_one_child_and_acts_on_another(services: Path) -> None:
    trigger = {
        "id": "invite-to-calendar",
        "when": {
            "type": "action",
            "tool": "mail__send",
            "where": {"args.subject": {"regex": "^Invite: "}},
            "repeat": True,
        },
        "actions": [
            {
                "type": "tool",
                "tool": "cal__add_event",
                "args": {"title": "${args.subject}", "ref": "${result.id}"},
            }
        ],
    }
    gw = Gateway(compose(services, triggers=[trigger]))
    assert {t.id for t in gw.triggers_state().triggers} >= {"invite-to-calendar"}
    await ok(gw, AGENT, "mail__send", to="jo@x.example", subject="no invite here")
    await ok(gw, AGENT, "mail__send", to="jo@x.example", subject="Invite: Design review")
    events = gw.instance().state.list("cal__events")
    assert events[-1] == {"id": "E-2", "title": "Invite: Design review", "ref": "M-3"}
    assert len(events) == 2

    # a failing action (a clash) is logged on the trigger; the email stays sent
    await ok(gw, AGENT, "mail__send", to="jo@x.example", subject="Invite: Design review")
    assert gw.instance().state.count("mail__outbox") == 4
    assert gw.instance().state.count("cal__events") == 2
    info = {t.id: t for t in gw.triggers_state().triggers}["invite-to-calendar"]
    assert (info.fire_count, info.failure_count) == (1, 1)
    assert info.status == "armed"  # repeat: one failure does not silence it
    assert "exists" in (info.error or "")


# -- clock ------------------------------------------------------------------------------------


def test_the_clock_of_the_first_armed_child_when_the_parent_has_none(services: Path) -> None:
    env = compose(services)  # mail has no clock; cal starts on 2026-03-09 09:00
    assert env.clock.start == datetime(2026, 3, 9, 9, 0, tzinfo=UTC)
    assert Gateway(env).clock_time() == datetime(2026, 3, 9, 9, 0, tzinfo=UTC)


async def test_the_parents_clock_wins(services: Path) -> None:
    env = compose(services, clock={"start": "2026-03-02T08:00:00Z", "mode": "stepped"})
    assert env.clock.start == T0
    gw = Gateway(env)
    await ok(gw, AGENT, "mail__send", to="a@b.example", subject="x")  # 30 s
    await ok(gw, AGENT, "cal__add_event", title="y")  # 10 s
    assert gw.clock_time() == T0 + timedelta(seconds=40)


def test_no_clock_anywhere_stays_unarmed(services: Path) -> None:
    write_env(services / "cal", cal_doc(clock={"mode": "stepped"}), CAL_TOOLS)
    env = compose(services)
    assert env.clock.start is None
    assert not Gateway(env).clock_state().armed


async def test_an_async_child_tool_can_spend_virtual_time(services: Path) -> None:
    gw = Gateway(compose(services, clock={"start": "2026-03-02T08:00:00Z"}))
    await ok(gw, AGENT, "mail__wait", minutes=15)
    assert gw.clock_time() == T0 + timedelta(minutes=15, seconds=1)


async def test_a_blocking_child_tool_can_spend_virtual_time(tmp_path: Path) -> None:
    tools = """
        from agentenv import ToolContext, tool


        @tool(duration=1, blocking=True)
        def crunch(ctx: ToolContext) -> str:
            \"\"\"Blocking work that takes ten virtual minutes.\"\"\"
            ctx.spend(600)
            return "done"
    """
    write_env(tmp_path / "worker", cal_doc(name="worker", tools=[{"module": "tools.py"}]), tools)
    gw = Gateway(
        compose(tmp_path, compose=[{"env": "../worker"}], clock={"start": "2026-03-02T08:00:00Z"})
    )
    await ok(gw, AGENT, "worker__crunch")
    assert gw.clock_time() == T0 + timedelta(minutes=10, seconds=1)


async def test_a_parents_watch_roles_do_not_narrow_a_childs_triggers(services: Path) -> None:
    env = compose(services, triggers={"watch_roles": ["user"], "triggers": []})
    gw = Gateway(env)
    await ok(gw, AGENT, "mail__send", to="a@b.example", subject="urgent: agent calls too")
    assert gw.instance().state.count("mail__log") == 1


# -- transactions -----------------------------------------------------------------------------


async def test_a_failing_child_tool_leaves_every_collection_unchanged(services: Path) -> None:
    gw = Gateway(compose(services))
    await ok(gw, AGENT, "mail__send", to="a@b.example", subject="before")
    state = gw.instance().state
    before_hash, before = state.hash(), state.to_dict()
    result = await gw.call(AGENT, "cal__add_then_fail", {"title": "doomed"})
    assert not result.ok
    assert result.error is not None and result.error.kind == "tool_error"
    assert "read-only" in result.error.message
    assert state.hash() == before_hash == result.state_hash
    assert state.to_dict() == before
    assert gw.instance().trajectory.calls()[-1].state_hash == before_hash


async def test_instances_of_a_composed_env_are_isolated(services: Path) -> None:
    gw = Gateway(compose(services))
    gw.create_instance("other")
    await ok(gw, AGENT, "cal__add_event", title="only here")
    other = await gw.call(AGENT, "cal__list_events", {}, instance="other")
    assert [e["title"] for e in other.value["events"]] == ["Standup"]


# -- nesting, card, status --------------------------------------------------------------------


@pytest.fixture
def nested(services: Path) -> Environment:
    """top composes mid (as `mid`), which composes mail (as `inbox`) and cal."""
    write_env(
        services / "mid",
        parent_doc(name="mid", compose=[{"env": "../mail", "as": "inbox"}, {"env": "../cal"}]),
    )
    top = parent_doc(
        name="top",
        compose=[{"env": "../mid"}],
        access=[{"role": "user", "action": "disable", "tools": ["mid__cal__*"]}],
        triggers=[
            {
                "id": "nested-invite",
                "when": {"type": "action", "tool": "mid__inbox__send"},
                "actions": [
                    {"type": "tool", "tool": "mid__cal__add_event", "args": {"title": "${args.to}"}}
                ],
            }
        ],
    )
    return Environment.load(write_env(services / "top", top))


async def test_a_composed_env_can_be_composed_again(nested: Environment) -> None:
    assert "mid__inbox__send" in nested.tools
    assert "mid__cal__add_event" in nested.tools
    assert "mid__inbox__outbox" in nested.seed.to_dict()
    assert {t.id for t in nested.triggers.triggers} == {
        "nested-invite",
        "mid__inbox__log-urgent",
        "mid__inbox__lock-after-spam",
    }
    rules = [(r.role, r.tools) for r in nested.access]
    assert ("*", ["mid__inbox__log"]) in rules

    gw = Gateway(nested)
    await ok(gw, AGENT, "mid__inbox__send", to="deep@x.example", subject="urgent: deep")
    counted = await ok(gw, AGENT, "mid__inbox__count_sent")
    assert counted["sent"] == 2
    state = gw.instance().state
    assert state.get("mid__inbox__outbox", "M-2")["to"] == "deep@x.example"
    assert state.list("mid__inbox__log") == [{"id": "L-1", "text": "urgent: deep"}]
    assert state.list("mid__cal__events")[-1]["title"] == "deep@x.example"
    assert "mid__cal__add_event" not in {t.name for t in gw.list_tools(USER)}


def test_the_card_nests_children_to_depth_two(nested: Environment) -> None:
    card = build_card(Gateway(nested), AGENT).to_json()
    assert card["name"] == "top"
    (mid,) = card["children_environments"]
    assert mid["name"] == "mid"
    assert [c["name"] for c in mid["children_environments"]] == ["mail", "cal"]
    inbox, cal = mid["children_environments"]
    assert inbox["children_environments"] is None
    assert {t["name"] for t in inbox["capabilities"]["tools"]} == {
        "mid__inbox__send",
        "mid__inbox__count_sent",
        "mid__inbox__wait",
    }
    assert all(t["name"].startswith("mid__cal__") for t in cal["capabilities"]["tools"])
    assert all(t["name"].startswith("mid__") for t in mid["capabilities"]["tools"])


def test_the_card_shows_only_what_the_role_may_call(nested: Environment) -> None:
    card = build_card(Gateway(nested), USER).to_json()
    cal = card["children_environments"][0]["children_environments"][1]
    assert cal["capabilities"]["tools"] == []


def test_status_lists_one_server_per_environment(nested: Environment) -> None:
    servers = Gateway(nested).status().servers
    assert [(s["name"], s["namespace"]) for s in servers] == [
        ("top", ""),
        ("mid", "mid__"),
        ("mail", "mid__inbox__"),
        ("cal", "mid__cal__"),
    ]
    assert servers[0]["tools"] == [] and servers[1]["tools"] == []
    assert "mid__inbox__send" in servers[2]["tools"]
    assert servers[3]["tools"] == [
        "mid__cal__add_event",
        "mid__cal__add_then_fail",
        "mid__cal__list_events",
    ]


def test_a_parent_may_have_tools_of_its_own(services: Path) -> None:
    write_env(
        services / "office",
        parent_doc(
            state={"memos": {}},
            tools=[{"name": "list_memos", "crud": {"collection": "memos", "op": "list"}}],
        ),
    )
    env = Environment.load(services / "office")
    assert "list_memos" in env.tools
    servers = Gateway(env).status().servers
    assert servers[0] == {"name": "office", "namespace": "", "tools": ["list_memos"]}


# -- errors -----------------------------------------------------------------------------------


def test_a_missing_child_is_located(services: Path) -> None:
    error = document_error(services, compose=[{"env": "../nowhere"}])
    assert error.path == "compose[0].env"
    assert error.file == str(services / "office" / "env.yaml")


def test_a_broken_child_names_its_own_file(services: Path) -> None:
    write_env(services / "cal", cal_doc(tools=[{"function": "tools.py:nope"}]), CAL_TOOLS)
    error = document_error(services)
    assert error.file == str(services / "cal" / "env.yaml")
    assert error.path == "tools[0].function"


def test_a_cycle_is_an_error(services: Path) -> None:
    write_env(services / "a", parent_doc(name="a", compose=[{"env": "../b"}]))
    write_env(services / "b", parent_doc(name="b", compose=[{"env": "../a"}]))
    with pytest.raises(DocumentError) as info:
        Environment.load(services / "a")
    assert "cycle" in str(info.value)
    assert info.value.path == "compose[0].env"


def test_composing_itself_is_a_cycle(services: Path) -> None:
    error = document_error(services, compose=[{"env": "."}])
    assert "cycle" in error.problem


def test_two_children_with_one_alias_are_an_error(services: Path) -> None:
    error = document_error(
        services, compose=[{"env": "../mail", "as": "box"}, {"env": "../cal", "as": "box"}]
    )
    assert error.path == "compose[1]"
    assert "box" in error.problem


def test_the_same_child_twice_needs_two_aliases(services: Path) -> None:
    env = compose(services, compose=[{"env": "../mail", "as": "work"}, {"env": "../mail"}])
    assert {"work__send", "mail__send"} <= set(env.tools)
    error = document_error(services, compose=[{"env": "../mail"}, {"env": "../mail"}])
    assert error.path == "compose[1]"


def test_two_children_with_the_same_name_are_an_error(services: Path) -> None:
    write_env(services / "mail2", mail_doc(), MAIL_TOOLS)
    error = document_error(services, compose=[{"env": "../mail"}, {"env": "../mail2"}])
    assert error.path.startswith("compose[1]")


def test_children_may_be_named_by_their_document_file(services: Path) -> None:
    env = compose(services, compose=[{"env": "../mail/env.yaml"}, {"env": "../cal/env.yaml"}])
    assert {"mail__send", "cal__add_event"} <= set(env.tools)


@pytest.mark.parametrize("alias", ["bad alias", "a__b", "-lead", "trail_", "dot.ted"])
def test_a_bad_alias_is_located(services: Path, alias: str) -> None:
    error = document_error(services, compose=[{"env": "../mail", "as": alias}])
    assert error.path == "compose[0].as"


def test_a_child_name_that_cannot_be_a_namespace_needs_an_alias(services: Path) -> None:
    write_env(services / "mail", mail_doc(name="mail__v2"), MAIL_TOOLS)
    error = document_error(services)
    assert error.path == "compose[0].env"
    assert "set 'as'" in error.problem
    assert "m2__send" in compose(services, compose=[{"env": "../mail", "as": "m2"}]).tools


def test_a_parent_seed_cannot_fill_a_child_collection(services: Path) -> None:
    error = document_error(services, seed={"mail__outbox": []})
    assert error.path == "seed.mail__outbox"


async def test_calls_made_by_a_composed_env_are_deterministic(services: Path) -> None:
    env = compose(services, clock={"start": "2026-03-02T08:00:00Z"})
    hashes = []
    for _ in range(2):
        gw = Gateway(env)
        await ok(gw, AGENT, "mail__send", to="a@b.example", subject="urgent: x")
        await ok(gw, AGENT, "cal__add_event", title="t")
        await gw.advance_clock(SYSTEM, timedelta(minutes=5))
        hashes.append(gw.instance().state.hash())
    assert hashes[0] == hashes[1] != env.seed.hash()
