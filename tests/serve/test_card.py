"""The Environment Card at /.well-known/agent-env.json, in the protocol's exact shape."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agentenv import Gateway
from agentenv.serve import CARD_PATH, create_app

AGENT_TOOLS = [
    "get_ticket",
    "list_tickets",
    "create_ticket",
    "update_ticket",
    "add_note",
    "explode",
    "refuse",
    "tag_set",
    "slow",
    "ticket_ids",
]

# The protocol's extensions and their endpoints (PROTOCOL.md), as (method, path).
EXTENSIONS: dict[str, list[tuple[str, str]]] = {
    "urn:agentenv:step/v1": [("POST", "/step")],
    "urn:agentenv:clock/v1": [
        ("GET", "/clock/time"),
        ("PUT", "/clock/set-time"),
        ("POST", "/clock/clear"),
        ("GET", "/clock/state"),
    ],
    "urn:agentenv:triggers/v1": [
        ("POST", "/triggers/register"),
        ("POST", "/triggers/remove"),
        ("POST", "/triggers/clear"),
        ("GET", "/triggers/state"),
    ],
    "urn:agentenv:disable-tool/v1": [("POST", "/tools/disable")],
    "urn:agentenv:enable-tool/v1": [("POST", "/tools/enable")],
    "urn:agentenv:trajectory/v1": [("GET", "/trajectory")],
    "urn:agentenv:state/v1": [("GET", "/state")],
}


async def get_card(client: httpx.AsyncClient, prefix: str = "", **headers: str) -> dict[str, Any]:
    r = await client.get(prefix + CARD_PATH, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    return r.json()


def endpoints(card: dict[str, Any]) -> dict[str, list[tuple[str, str]]]:
    return {
        ext["uri"]: [(m["method"], m["endpoint"]) for m in ext["params"]["methods"]]
        for ext in card["capabilities"]["extensions"]
    }


async def test_the_card_has_the_protocol_fields(client: httpx.AsyncClient) -> None:
    card = await get_card(client)
    assert set(card) >= {
        "name",
        "protocolVersion",
        "url",
        "preferredTransport",
        "additionalInterfaces",
        "capabilities",
        "children_environments",
    }
    assert card["name"] == "test-desk"
    assert card["description"] == "A help desk for the transport tests."
    assert card["version"] == "1.2.3"
    assert card["protocolVersion"] == "1.0"
    assert card["url"] == "/agentenv"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["additionalInterfaces"] == [{"url": "/mcp", "transport": "mcp"}]
    assert card["children_environments"] is None
    assert set(card["capabilities"]) == {"tools", "extensions", "operations"}
    assert card["capabilities"]["operations"] == ["data/reset", "data/add", "data/get"]
    # No snake_case twins of the camelCase fields.
    for snake in ("protocol_version", "preferred_transport", "additional_interfaces"):
        assert snake not in card


async def test_the_card_lists_tools_in_mcp_shape(client: httpx.AsyncClient) -> None:
    tools = (await get_card(client))["capabilities"]["tools"]
    assert [t["name"] for t in tools] == AGENT_TOOLS
    for t in tools:
        assert set(t) == {"name", "description", "inputSchema"}
        assert t["inputSchema"]["type"] == "object"
    listed = await client.post("/step", json={"action": "list_tools"})
    assert tools == listed.json()["tools"]


async def test_the_card_advertises_all_seven_extensions(client: httpx.AsyncClient) -> None:
    card = await get_card(client)
    assert endpoints(card) == EXTENSIONS
    for ext in card["capabilities"]["extensions"]:
        assert set(ext) == {"uri", "description", "params", "required"}
        assert ext["description"]
        assert ext["required"] is False
        assert ext["params"]["endpoint"] == EXTENSIONS[ext["uri"]][0][1]
        for method in ext["params"]["methods"]:
            assert set(method) == {"method", "endpoint", "request-json-schema"}


async def test_extension_request_schemas_describe_the_bodies(client: httpx.AsyncClient) -> None:
    schemas = {
        (ext["uri"], m["endpoint"]): m["request-json-schema"]
        for ext in (await get_card(client))["capabilities"]["extensions"]
        for m in ext["params"]["methods"]
    }
    step = schemas[("urn:agentenv:step/v1", "/step")]
    assert step["properties"]["action"]["enum"] == ["list_tools", "call_tool"]
    assert {"tool_name", "arguments"} <= set(step["properties"])
    set_time = schemas[("urn:agentenv:clock/v1", "/clock/set-time")]
    assert {"virtual_time", "virtual_seconds_per_real_second"} <= set(set_time["properties"])
    assert "virtual_time" in set_time["required"]
    disable = schemas[("urn:agentenv:disable-tool/v1", "/tools/disable")]
    assert set(disable["required"]) == {"role", "tools"}
    register = schemas[("urn:agentenv:triggers/v1", "/triggers/register")]
    assert "triggers" in register["properties"]
    assert schemas[("urn:agentenv:clock/v1", "/clock/time")] is None
    assert schemas[("urn:agentenv:state/v1", "/state")] is None


@pytest.mark.parametrize("prefix", ["", "/instances/ep-1"])
async def test_every_endpoint_on_the_card_is_served(client: httpx.AsyncClient, prefix: str) -> None:
    """A client can use the card's endpoints as they stand: each one is routed."""
    assert (await client.post("/instances", json={"id": "ep-1"})).status_code == 201
    armed = await client.put(
        f"{prefix}/clock/set-time", json={"virtual_time": "2026-03-02T09:00:00Z"}
    )
    assert armed.status_code == 200  # so that /clock/time answers 200, not the unarmed 404
    card = await get_card(client, prefix)
    for uri, methods in endpoints(card).items():
        for method, endpoint in methods:
            r = await client.request(method, endpoint)
            assert r.status_code not in (404, 405), (uri, method, endpoint, r.text)
    r = await client.post(card["url"], json={"jsonrpc": "2.0", "id": 1, "method": "data/get"})
    assert r.status_code == 200
    assert "result" in r.json()


async def test_the_card_tools_follow_the_role_header(client: httpx.AsyncClient) -> None:
    agent = await get_card(client, **{"AgentEnv-Role": "agent"})
    supervisor = await get_card(client, **{"AgentEnv-Role": "supervisor"})
    anonymous = await get_card(client)
    assert [t["name"] for t in agent["capabilities"]["tools"]] == AGENT_TOOLS
    assert [t["name"] for t in anonymous["capabilities"]["tools"]] == AGENT_TOOLS
    assert [t["name"] for t in supervisor["capabilities"]["tools"]] == [
        *AGENT_TOOLS,
        "close_ticket",
    ]


async def test_the_card_follows_tool_access_and_the_clock(client: httpx.AsyncClient) -> None:
    await client.post("/tools/disable", json={"role": "agent", "tools": ["explode"]})
    await client.put("/clock/set-time", json={"virtual_time": "2026-03-02T09:00:00Z"})
    names = [t["name"] for t in (await get_card(client))["capabilities"]["tools"]]
    assert names == [*(t for t in AGENT_TOOLS if t != "explode"), "get_time"]


async def test_an_instance_card_has_prefixed_endpoints(client: httpx.AsyncClient) -> None:
    r = await client.post("/instances", json={"id": "ep-2"})
    assert r.status_code == 201
    await client.post("/instances/ep-2/tools/disable", json={"role": "agent", "tools": "*"})
    card = await get_card(client, "/instances/ep-2")
    assert card["url"] == "/instances/ep-2/agentenv"
    assert endpoints(card) == {
        uri: [(method, "/instances/ep-2" + path) for method, path in methods]
        for uri, methods in EXTENSIONS.items()
    }
    for ext in card["capabilities"]["extensions"]:
        assert ext["params"]["endpoint"].startswith("/instances/ep-2/")
    assert card["capabilities"]["tools"] == []  # the instance's own rules
    default = await get_card(client)
    assert [t["name"] for t in default["capabilities"]["tools"]] == AGENT_TOOLS


async def test_the_mcp_interface_is_listed_and_prefixed(client: httpx.AsyncClient) -> None:
    assert (await client.post("/instances", json={"id": "ep-3"})).status_code == 201
    card = await get_card(client, "/instances/ep-3")
    assert card["additionalInterfaces"] == [{"url": "/instances/ep-3/mcp", "transport": "mcp"}]


async def test_without_mcp_no_additional_interface_is_listed(gateway: Gateway, app_client) -> None:
    async with app_client(create_app(gateway, mcp=False)) as c:
        assert (await get_card(c))["additionalInterfaces"] == []


async def test_the_card_of_a_clocked_environment_lists_get_time(
    clocked_client: httpx.AsyncClient,
) -> None:
    card = await get_card(clocked_client)
    assert card["name"] == "clocked-desk"
    assert [t["name"] for t in card["capabilities"]["tools"]] == [
        "update_ticket",
        "create_note",
        "get_time",
    ]
