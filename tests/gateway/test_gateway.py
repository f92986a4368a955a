"""Gateway.call: the one door. Every bad call is a structured result, recorded, harmless."""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from agentenv import SYSTEM, Environment, Gateway, Principal
from agentenv.gateway import (
    DEFAULT_INSTANCE,
    DataError,
    Forbidden,
    GatewayError,
    UnknownInstance,
)
from agentenv.gateway.blocking import BLOCKING_THREADS
from agentenv.spec import (
    DataPart,
    FileContent,
    FilePart,
    TextPart,
    TriggerRegistration,
    parse_environment_spec,
)
from agentenv.state import State
from agentenv.tasks.context import DeployedEnv


def _balance(gw: Gateway, account: str, instance: str = DEFAULT_INSTANCE) -> int:
    return gw.instance(instance).state.require("accounts", account)["balance"]


# -- a good call -----------------------------------------------------------------------------


async def test_a_good_call(gw: Gateway, agent: Principal) -> None:
    state = gw.instance().state
    changes = state.changes
    out = await gw.call(agent, "deposit", {"account_id": "a1", "amount": 5}, session="s-1")
    assert out.ok
    assert out.error is None
    assert out.value == {"id": "a1", "owner": "Ada", "balance": 105}
    assert json.loads(out.text) == out.value
    assert out.changelog_id == changes + 1 == state.changes
    assert out.state_hash == state.hash()
    assert out.seq == 0
    assert not out.denied

    record = gw.instance().trajectory[0]
    assert record.kind == "call"
    assert (record.role, record.principal, record.session) == ("agent", "ada", "s-1")
    assert record.tool == "deposit"
    assert record.args == {"account_id": "a1", "amount": 5}
    assert record.result == out.value
    assert record.error is None and record.denied is False
    assert (record.state_hash, record.changelog_id) == (out.state_hash, out.changelog_id)


async def test_the_wire_forms_of_a_result(gw: Gateway, agent: Principal) -> None:
    out = await gw.call(agent, "get_account", {"account_id": "a2"})
    wire = out.to_wire()
    assert wire == {
        "content": [{"type": "text", "text": out.text}],
        "isError": False,
        "structuredContent": {"id": "a2", "owner": "Bob", "balance": 50},
        "changelog_id": out.changelog_id,
    }
    assert out.to_step_result().model_dump(by_alias=True, exclude_none=True) == wire


async def test_text_and_non_object_results(gw: Gateway, agent: Principal) -> None:
    text = await gw.call(agent, "returns_text")
    assert (text.value, text.text, text.structured) == (
        "plain text",
        "plain text",
        {"result": "plain text"},
    )
    listed = await gw.call(agent, "returns_list", {})
    assert listed.text == '[1, "two"]'
    assert listed.structured == {"result": [1, "two"]}


async def test_defaults_and_no_arguments(gw: Gateway, agent: Principal) -> None:
    out = await gw.call(agent, "list_accounts", None)
    assert out.ok and out.value["total"] == 3


async def test_the_tool_sees_the_caller_and_the_instance(gw: Gateway, agent: Principal) -> None:
    gw.create_instance("ep-7")
    out = await gw.call(agent, "whoami", {}, instance="ep-7")
    assert out.value["role"] == "agent"
    assert out.value["name"] == "ada"
    assert out.value["instance"] == "ep-7"


# -- every bad call: structured result, recorded, state untouched ----------------------------

BAD_CALLS = [
    ("nope", {}, "unknown_tool", "unknown tool 'nope'"),
    (
        "deposit",
        {"account_id": "a1", "amount": "lots"},
        "invalid_arguments",
        "invalid arguments for 'deposit': amount: Input should be a valid integer",
    ),
    (
        "deposit",
        {"account_id": "a1"},
        "invalid_arguments",
        "invalid arguments for 'deposit': amount: missing required argument",
    ),
    (
        "deposit",
        {"account_id": "a1", "amount": 1, "colour": "red"},
        "invalid_arguments",
        "invalid arguments for 'deposit': colour: unknown argument",
    ),
    ("deposit", ["a1", 5], "invalid_arguments", "arguments must be an object"),
    ("deposit", "a1", "invalid_arguments", "arguments must be an object"),
    ("deposit", {"account_id": "a1", "amount": -5}, "tool_error", "amount must be positive"),
    (
        "transfer",
        {"source": "a1", "target": "zz", "amount": 10},
        "tool_error",
        "no record 'zz' in 'accounts'",
    ),
    (
        "transfer",
        {"source": "a2", "target": "a1", "amount": 500},
        "tool_error",
        "invalid record accounts['a2']: balance: -450 is less than the minimum of 0",
    ),
    ("explode", {}, "tool_error", "RuntimeError: boom"),
    ("silent_failure", {}, "tool_error", "ToolError"),
    ("returns_set", {}, "invalid_result", "the tool's result cannot be sent"),
    ("returns_object", {}, "invalid_result", "the tool's result cannot be sent"),
    ("returns_nan", {}, "invalid_result", "the tool's result cannot be sent"),
    (
        "sneaky_read",
        {"account_id": "a1"},
        "tool_error",
        "read tool 'sneaky_read' tried to change the state",
    ),
    ("hang", {}, "timeout", "'hang' took longer than 0.01 s"),
    ("freeze", {"account_id": "a1"}, "denied", "role 'agent' may not call 'freeze'"),
]


@pytest.mark.parametrize(
    ("tool", "args", "kind", "message"), BAD_CALLS, ids=[f"{c[0]}-{c[2]}" for c in BAD_CALLS]
)
async def test_a_bad_call_is_a_structured_recorded_harmless_result(
    gw: Gateway, agent: Principal, tool: str, args, kind: str, message: str
) -> None:
    inst = gw.instance()
    before = (inst.state.hash(), inst.state.changes, inst.state.to_dict())

    out = await gw.call(agent, tool, args)

    assert not out.ok
    assert out.value is None
    assert out.error is not None
    assert out.error.kind == kind
    assert out.error.message.startswith(message)
    assert out.text == f"Error: {out.error.message}"
    assert out.denied == (kind == "denied")
    assert out.structured is None
    assert out.to_wire()["isError"] is True
    assert out.to_wire()["error"] == {"kind": kind, "message": out.error.message}

    # The state is exactly as before ...
    assert (inst.state.hash(), inst.state.changes, inst.state.to_dict()) == before
    assert (out.state_hash, out.changelog_id) == before[:2]
    # ... the call is in the trajectory ...
    assert len(inst.trajectory) == 1
    record = inst.trajectory[0]
    assert record.kind == "call"
    assert record.tool == tool
    assert record.error == out.error
    assert record.denied == (kind == "denied")
    assert record.result is None
    assert record.state_hash == before[0]
    assert record.args == (args if isinstance(args, dict) else {"_invalid": repr(args)})
    # ... and the gateway keeps serving.
    again = await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    assert again.ok
    assert again.seq == 1


async def test_a_partial_write_is_rolled_back(gw: Gateway, agent: Principal) -> None:
    out = await gw.call(agent, "transfer", {"source": "a1", "target": "zz", "amount": 10})
    assert not out.ok
    assert _balance(gw, "a1") == 100
    assert gw.instance().state.count("audit") == 0


async def test_a_timed_out_async_tool_leaves_no_write(gw: Gateway, agent: Principal) -> None:
    out = await gw.call(agent, "hang", {})
    assert out.error is not None and out.error.kind == "timeout"
    assert gw.instance().state.count("audit") == 0
    assert out.to_wire()["error"]["kind"] == "timeout"


async def test_an_unknown_instance_raises(gw: Gateway, agent: Principal) -> None:
    with pytest.raises(UnknownInstance, match="no instance 'ghost'") as info:
        await gw.call(agent, "get_account", {"account_id": "a1"}, instance="ghost")
    assert info.value.status == 404


# -- async, concurrent and blocking tools ----------------------------------------------------


async def test_calls_on_one_instance_are_serialised(gw: Gateway, agent: Principal) -> None:
    results = await asyncio.gather(
        *(gw.call(agent, "async_deposit", {"account_id": "a1", "amount": 1}) for _ in range(20))
    )
    assert all(r.ok for r in results)
    assert _balance(gw, "a1") == 120
    assert sorted(r.value for r in results) == list(range(101, 121))


async def test_instances_run_concurrently_and_stay_isolated(gw: Gateway, agent: Principal) -> None:
    ids = [f"ep-{i}" for i in range(5)]
    for i in ids:
        gw.create_instance(i)
    await asyncio.gather(
        *(
            gw.call(agent, "deposit", {"account_id": "a1", "amount": n + 1}, instance=i)
            for n, i in enumerate(ids)
        )
    )
    assert [_balance(gw, "a1", i) for i in ids] == [101, 102, 103, 104, 105]
    assert _balance(gw, "a1") == 100
    assert [len(gw.instance(i).trajectory) for i in ids] == [1] * 5
    assert len(gw.instance().trajectory) == 0


async def test_a_blocking_tool_runs_in_a_thread_and_its_writes_are_merged(
    gw: Gateway, agent: Principal
) -> None:
    out = await gw.call(agent, "blocking_audit", {"account_id": "a1"})
    assert out.ok, out.error
    assert out.value == {"in_thread": True}
    state = gw.instance().state
    assert _balance(gw, "a1") == 101
    assert state.get("audit", "blocking") == {"id": "blocking", "account": "a1"}
    assert not state.has("accounts", "a3")
    assert out.state_hash == state.hash()
    # The merged state is the state the same writes would give directly.
    expected = gw.env.new_state()
    expected.update("accounts", "a1", {"balance": 101})
    expected.put("audit", {"id": "blocking", "account": "a1"})
    expected.delete("accounts", "a3")
    assert state.hash() == expected.hash()


BLOCKING_TOOLS = """
import threading
from agentenv import tool

RELEASE = threading.Event()
DONE = threading.Event()


@tool(blocking=True, timeout=0.01)
def slow_write(ctx) -> str:
    ctx.state.put("log", {"id": "late"})
    RELEASE.wait(10)
    ctx.state.put("log", {"id": "later"})
    DONE.set()
    return "done"
"""


async def test_a_timed_out_blocking_tool_writes_only_to_its_dropped_fork(tmp_path: Path) -> None:
    (tmp_path / "slow.py").write_text(textwrap.dedent(BLOCKING_TOOLS))
    (tmp_path / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: slow\n"
        "state: {log: {}}\ntools: [{module: slow.py}]\n"
    )
    gw = Gateway(Environment.load(tmp_path))
    module = sys.modules[gw.env.tools["slow_write"].source.split(":")[0]]
    before = gw.instance().state.hash()

    out = await gw.call(Principal("default"), "slow_write", {})
    assert out.error is not None and out.error.kind == "timeout"

    module.RELEASE.set()
    assert await asyncio.to_thread(module.DONE.wait, 10)
    assert gw.instance().state.hash() == before
    assert gw.instance().state.count("log") == 0


HUNG_TOOLS = """
import threading
from agentenv import tool

RELEASE = threading.Event()
WOKEN = threading.Semaphore(0)


@tool(blocking=True, timeout=0.01)
def wedge() -> str:
    \"\"\"Blocking code that hangs (a stuck network read) until the test lets it go.\"\"\"
    try:
        RELEASE.wait(60)
    finally:
        WOKEN.release()
    return "late"


@tool(blocking=True, timeout=10)
def quick() -> str:
    \"\"\"Blocking, but instant.\"\"\"
    return "quick"
"""


async def test_hung_blocking_tools_do_not_starve_the_event_loops_executor(tmp_path: Path) -> None:
    (tmp_path / "hung.py").write_text(textwrap.dedent(HUNG_TOOLS))
    (tmp_path / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: hung\ntools: [{module: hung.py}]\n"
    )
    gw = Gateway(Environment.load(tmp_path))
    module = sys.modules[gw.env.tools["wedge"].source.split(":")[0]]
    who = Principal("default")
    # A default executor as small as the hung calls: were they run there, it would starve.
    hung = 6
    assert hung < BLOCKING_THREADS
    loop = asyncio.get_running_loop()
    default = ThreadPoolExecutor(hung, thread_name_prefix="test-default")
    loop.set_default_executor(default)
    calls = 0
    try:
        for _ in range(hung):
            calls += 1
            out = await gw.call(who, "wedge", {})
            assert out.error is not None and out.error.kind == "timeout"
        out = await gw.call(who, "quick", {})
        assert (out.ok, out.value) == (True, "quick")
        assert await asyncio.wait_for(loop.getaddrinfo("localhost", 80), 10)
        assert await asyncio.wait_for(asyncio.to_thread(lambda: "free"), 10) == "free"
    finally:
        module.RELEASE.set()  # the hung threads end; wait for every one of them

        def all_woken() -> bool:
            return all(module.WOKEN.acquire(timeout=30) for _ in range(calls))

        assert await asyncio.wait_for(asyncio.to_thread(all_woken), 60)
        default.shutdown(wait=True)


async def test_a_call_in_flight_is_not_seen_until_it_commits(gw: Gateway, agent: Principal) -> None:
    deployed = DeployedEnv("bank", gw.env, gw)
    before = gw.status()
    live = gw.instance().state
    call = asyncio.ensure_future(gw.call(agent, "stall", {}))  # writes, then waits forever
    for _ in range(1000):  # let the call make its write; no clock involved
        if live.has("audit", "stall"):
            break
        await asyncio.sleep(0)
    assert live.has("audit", "stall")  # the call's own write, in flight

    snap = deployed.snapshot()
    assert snap.to_dict()["audit"] == []
    assert snap.hash() == before.state_hash
    assert gw.data_get()[0].data["audit"] == []
    status = gw.status()
    assert (status.state_hash, status.changelog_id) == (before.state_hash, before.changelog_id)
    assert live.has("audit", "stall")  # looking did not undo the write

    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert live.list("audit") == []
    assert live.hash() == snap.hash() == gw.status().state_hash

    out = await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})
    assert deployed.snapshot().hash() == out.state_hash == gw.status().state_hash
    assert gw.data_get()[0].data["accounts"][0]["balance"] == 101


# -- instances -------------------------------------------------------------------------------


def test_the_default_instance_always_exists(gw: Gateway) -> None:
    assert gw.instances == [DEFAULT_INSTANCE]
    assert gw.instance().id == DEFAULT_INSTANCE
    with pytest.raises(GatewayError, match="the default instance cannot be dropped"):
        gw.drop_instance(DEFAULT_INSTANCE)


async def test_create_and_drop_instances(gw: Gateway, agent: Principal) -> None:
    named = gw.create_instance("episode-1")
    auto = gw.create_instance()
    assert named.id == "episode-1"
    assert len(auto.id) == 12
    assert gw.instances == [DEFAULT_INSTANCE, "episode-1", auto.id]
    assert named.state.hash() == gw.instance().state.hash() == gw.env.seed.hash()

    await gw.call(agent, "deposit", {"account_id": "a2", "amount": 7}, instance="episode-1")
    assert _balance(gw, "a2", "episode-1") == 57
    assert _balance(gw, "a2", auto.id) == 50
    assert _balance(gw, "a2") == 50

    with pytest.raises(GatewayError, match="instance 'episode-1' already exists"):
        gw.create_instance("episode-1")
    gw.drop_instance("episode-1")
    assert "episode-1" not in gw.instances
    with pytest.raises(UnknownInstance):
        gw.drop_instance("episode-1")
    with pytest.raises(UnknownInstance):
        await gw.call(agent, "get_account", {"account_id": "a1"}, instance="episode-1")
    # A fresh instance with a dropped id starts from the seed again.
    assert _balance(gw, "a2", gw.create_instance("episode-1").id) == 50


@pytest.mark.parametrize(
    "bad", ["..", ".", "", ".env", "-x", "a/b", "a b", "é", "x" * 129, None, 7], ids=repr
)
def test_an_instance_id_must_be_a_safe_path_segment(gw: Gateway, bad: object) -> None:
    """Ids become URL path segments and file names: `..` once reached the default instance."""
    if bad is None:
        assert gw.create_instance(bad).id != DEFAULT_INSTANCE  # None: a fresh id
        return
    with pytest.raises(GatewayError, match=r"is not allowed: an id is 1 to 128 characters"):
        gw.create_instance(bad)  # type: ignore[arg-type]
    assert gw.instances == [DEFAULT_INSTANCE]


async def test_instances_have_their_own_rules_clock_and_trajectory(
    gw: Gateway, agent: Principal
) -> None:
    gw.create_instance("b")
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["deposit"], instance="b")
    await gw.set_clock(SYSTEM, datetime(2026, 1, 1, tzinfo=UTC), instance="b")
    assert (await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1}, instance="b")).denied
    assert (await gw.call(agent, "deposit", {"account_id": "a1", "amount": 1})).ok
    assert gw.clock_state("b").armed and not gw.clock_state().armed
    assert len(gw.instance().trajectory.calls()) == 1


# -- status ----------------------------------------------------------------------------------


async def test_status(gw: Gateway, agent: Principal) -> None:
    await gw.set_tool_access(SYSTEM, "disable", "agent", ["transfer"])
    status = gw.status()
    assert status.name == "bank"
    assert status.version == "2.0.0"
    assert status.instance == DEFAULT_INSTANCE
    assert status.tools == sorted(gw.env.tools)
    assert status.roles == ["agent", "supervisor"]
    assert status.changelog_id == gw.instance().state.changes
    assert status.state_hash == gw.instance().state.hash()
    assert status.role_rules == {"agent": {"transfer": False}}
    assert status.clock_armed is False
    assert status.instances == 1
    assert status.servers[0]["name"] == "bank"
    assert status.servers[0]["tools"] == sorted(gw.env.tools)


# -- the control plane is for admins only ----------------------------------------------------

CONTROL = [
    ("set_clock", lambda gw, p: gw.set_clock(p, datetime(2026, 1, 1, tzinfo=UTC))),
    ("advance_clock", lambda gw, p: gw.advance_clock(p, timedelta(hours=1))),
    ("clear_clock", lambda gw, p: gw.clear_clock(p)),
    (
        "register_triggers",
        lambda gw, p: gw.register_triggers(
            p,
            TriggerRegistration.model_validate(
                {
                    "triggers": [
                        {
                            "id": "t",
                            "when": {"type": "action", "tool": "deposit"},
                            "actions": [{"type": "nl", "text": "x"}],
                        }
                    ]
                }
            ),
        ),
    ),
    ("remove_triggers", lambda gw, p: gw.remove_triggers(p, None)),
    ("set_tool_access", lambda gw, p: gw.set_tool_access(p, "enable", "agent", "*")),
    ("data_reset", lambda gw, p: gw.data_reset(p)),
    (
        "data_add",
        lambda gw, p: gw.data_add(p, [DataPart(kind="data", data={"audit": [{"id": "x"}]})]),
    ),
]


@pytest.mark.parametrize("op", [c[1] for c in CONTROL], ids=[c[0] for c in CONTROL])
async def test_the_control_plane_refuses_a_non_admin(gw: Gateway, op) -> None:
    await gw.set_clock(SYSTEM, datetime(2026, 1, 1, tzinfo=UTC))
    inst = gw.instance()
    before = (inst.state.hash(), len(inst.trajectory), gw.status(), gw.triggers_state())
    with pytest.raises(Forbidden, match="may not use the control plane") as info:
        await op(gw, Principal("agent", name="ada"))
    assert info.value.status == 403
    assert (inst.state.hash(), len(inst.trajectory), gw.status(), gw.triggers_state()) == before
    # An admin principal of any role may.
    await op(gw, Principal("ops", admin=True))


# -- the data plane --------------------------------------------------------------------------


async def test_data_add_upserts_records_and_keeps_other_parts(gw: Gateway) -> None:
    text = TextPart(kind="text", text="policy: be nice")
    file = FilePart(kind="file", file=FileContent(uri="file:///x.pdf", mimeType="application/pdf"))
    written = await gw.data_add(
        SYSTEM,
        [
            DataPart(
                kind="data",
                data={
                    "accounts": [
                        {"id": "a1", "owner": "Ada", "balance": 1},
                        {"id": "a9", "owner": "Zed", "balance": 9},
                    ],
                    "audit": {"id": "single"},  # one record need not be a list
                },
            ),
            text,
            file,
        ],
    )
    assert written == 3
    state = gw.instance().state
    assert _balance(gw, "a1") == 1
    assert state.get("accounts", "a9")["owner"] == "Zed"
    assert state.has("audit", "single")
    parts = gw.data_get()
    assert parts[0].kind == "data"
    assert parts[0].data == state.to_dict()
    assert parts[1:] == [text, file]
    control = gw.instance().trajectory[-1]
    assert (control.kind, control.event) == ("control", "data_add")


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {
                "accounts": [
                    {"id": "a7", "owner": "X", "balance": 1},
                    {"id": "a8", "owner": "Y", "balance": -1},
                ]
            },
            "parts[0].data.accounts[1]: invalid record accounts['a8']: balance",
        ),
        (
            {"accounts": [{"id": "a7", "owner": "X", "balance": 1}], "nope": [{"id": "x"}]},
            "parts[0].data.nope: unknown collection 'nope'",
        ),
        ({"audit": [{"id": "ok"}, {"no_id": 1}]}, "parts[0].data.audit[1]: invalid record audit"),
        ({"audit": ["not a record"]}, "parts[0].data.audit[0]: invalid record audit"),
        # Records no tool could ever send back are refused on arrival, naming the place.
        (
            {"audit": [{"id": "ok"}, {"id": "x", "note": "\ud800"}]},
            "parts[0].data.audit[1].note holds a lone surrogate",
        ),
        ({"audit": [{"id": "x", "n": float("nan")}]}, "parts[0].data.audit[0].n is nan"),
        ({"audit": [{"id": "x", "deep": _deep(80)}]}, "parts[0].data.audit[0].deep[0][0]"),
    ],
)
async def test_data_add_is_all_or_nothing(gw: Gateway, data: dict, message: str) -> None:
    inst = gw.instance()
    before = (inst.state.hash(), inst.state.changes, gw.data_get(), len(inst.trajectory))
    with pytest.raises(DataError) as info:
        await gw.data_add(
            SYSTEM,
            [DataPart(kind="data", data=data), TextPart(kind="text", text="only on success")],
        )
    assert str(info.value).startswith(message)
    assert info.value.status == 400
    assert (inst.state.hash(), inst.state.changes, gw.data_get(), len(inst.trajectory)) == before


async def test_data_reset_empties_every_collection_and_the_parts(gw: Gateway) -> None:
    await gw.data_add(SYSTEM, [TextPart(kind="text", text="note")])
    await gw.data_reset(SYSTEM)
    state = gw.instance().state
    assert state.collections == ["accounts", "audit"]
    assert state.count("accounts") == 0
    assert gw.data_get() == [DataPart(kind="data", data={"accounts": [], "audit": []})]
    assert state.hash() == State({"accounts": "id", "audit": "id"}).hash()
    assert gw.instance().trajectory[-1].event == "data_reset"


async def test_data_plane_is_per_instance(gw: Gateway) -> None:
    gw.create_instance("b")
    await gw.data_reset(SYSTEM, instance="b")
    assert gw.instance("b").state.count("accounts") == 0
    assert gw.instance().state.count("accounts") == 3


async def test_when_every_blocking_thread_is_stuck_new_blocking_calls_are_refused_clearly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    from agentenv.env.tool import Tool, tool
    from agentenv.gateway import blocking as blocking_module

    release = threading.Event()

    @tool(blocking=True, timeout=0.05, kind="read")
    def hang() -> str:
        """Wait until the test lets go."""
        release.wait(10)
        return "done"

    @tool(blocking=True, kind="read")
    def quick() -> str:
        """Answer at once."""
        return "quick"

    spec = parse_environment_spec(
        {"apiVersion": "agentenv/v1", "kind": "Environment", "name": "stuck"}
    )
    env = replace(
        Environment.from_spec(spec),
        tools={"hang": Tool.from_function(hang), "quick": Tool.from_function(quick)},
    )
    gw = Gateway(env)
    who = Principal("default")
    monkeypatch.setattr(blocking_module, "BLOCKING_THREADS", 2)
    try:
        for _ in range(2):
            assert (await gw.call(who, "hang", {})).error.kind == "timeout"
        refused = await gw.call(who, "quick", {})
        assert refused.error is not None and refused.error.kind == "tool_error"
        assert "threads for blocking tools are still running calls that timed out" in (
            refused.error.message
        )
    finally:
        release.set()
    for _ in range(200):  # the stuck threads end and are no longer counted
        if blocking_module.stuck_count() == 0:
            break
        await asyncio.sleep(0.01)
    assert blocking_module.stuck_count() == 0
    assert (await gw.call(who, "quick", {})).value == "quick"
