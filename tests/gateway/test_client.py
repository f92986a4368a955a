"""ToolClient: one principal's tools on one or more environment instances, by name."""

from __future__ import annotations

from agentenv import Gateway, Principal
from agentenv.gateway.client import Binding, ToolClient


async def test_one_environment_keeps_plain_tool_names(gw: Gateway, agent: Principal) -> None:
    client = ToolClient(agent, [Binding("bank", gw)])
    assert client.env_ids == ["bank"]
    assert [t.name for t in client.list_tools()] == [t.name for t in gw.list_tools(agent)]
    out = await client.call("deposit", {"account_id": "a1", "amount": 1})
    assert out.ok and out.value["balance"] == 101


async def test_the_same_environment_bound_twice_is_one_binding(
    gw: Gateway, agent: Principal
) -> None:
    client = ToolClient(agent, [Binding("bank", gw), Binding("bank", gw)])
    assert client.env_ids == ["bank"]
    names = [t.name for t in client.list_tools()]
    assert names == [t.name for t in gw.list_tools(agent)]
    assert "deposit" in names and not any("__" in n for n in names)
    out = await client.call("deposit", {"account_id": "a1", "amount": 1})
    assert out.ok and out.value["balance"] == 101
    assert not (await client.call("bank__deposit", {"account_id": "a1", "amount": 1})).ok
    assert gw.instance().state.get("accounts", "a1")["balance"] == 101


async def test_several_environments_prefix_the_tool_names(gw: Gateway, agent: Principal) -> None:
    gw.create_instance("other")
    client = ToolClient(agent, [Binding("bank", gw), Binding("spare", gw, "other")])
    names = [t.name for t in client.list_tools()]
    assert "bank__deposit" in names and "spare__deposit" in names
    assert "deposit" not in names
    out = await client.call("spare__deposit", {"account_id": "a1", "amount": 2})
    assert out.ok
    assert gw.instance("other").state.get("accounts", "a1")["balance"] == 102
    assert gw.instance().state.get("accounts", "a1")["balance"] == 100
    unknown = await client.call("deposit", {"account_id": "a1", "amount": 1})
    assert unknown.error is not None and unknown.error.kind == "unknown_tool"
