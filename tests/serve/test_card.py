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

# Upstream's gateway extensions, in its order: uri -> method name -> (verb, endpoint), the
# endpoint as upstream's client resolves it (the method's own, else the extension's).
EXTENSIONS: dict[str, dict[str, tuple[str, str]]] = {
    "urn:agentenv:disable-tool/v1": {"disable": ("POST", "/tools/disable")},
    "urn:agentenv:enable-tool/v1": {"enable": ("POST", "/tools/enable")},
    "urn:agentenv:triggers/v1": {
        "register": ("POST", "/triggers/register"),
        "remove": ("POST", "/triggers/remove"),
        "clear": ("POST", "/triggers/clear"),
        "state": ("GET", "/triggers/state"),
    },
    "urn:agentenv:clock/v1": {
        "get_time": ("GET", "/clock/time"),
        "set_time": ("PUT", "/clock/set-time"),
        "clear": ("POST", "/clock/clear"),
        "state": ("GET", "/clock/state"),
    },
    "urn:agentenv:trajectory/v1": {"get": ("GET", "/trajectory")},
    "urn:agentenv:step/v1": {"step": ("POST", "/step")},
    "urn:agentenv:state/v1": {"get": ("GET", "/state")},
    "urn:agentenv:changes/v1": {"get": ("GET", "/changes")},
}


async def get_card(client: httpx.AsyncClient, prefix: str = "", **headers: str) -> dict[str, Any]:
    r = await client.get(prefix + CARD_PATH, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/json")
    return r.json()


def endpoints(card: dict[str, Any]) -> dict[str, dict[str, tuple[str, str]]]:
    return {
        ext["uri"]: {
            name: (m["method"], m.get("endpoint") or ext["params"]["endpoint"])
            for name, m in ext["params"]["methods"].items()
        }
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
    listed = (await client.post("/step", json={"action": "list_tools"})).json()["tools"]
    assert [(t["name"], t["description"], t["inputSchema"]) for t in tools] == [
        (t["name"], t["description"], t["parameters"]) for t in listed
    ]


async def test_the_card_advertises_upstreams_eight_extensions(client: httpx.AsyncClient) -> None:
    card = await get_card(client)
    assert endpoints(card) == EXTENSIONS
    assert list(endpoints(card)) == list(EXTENSIONS)  # upstream's order
    for ext in card["capabilities"]["extensions"]:
        assert set(ext) == {"uri", "description", "params", "required"}
        assert ext["description"]
        assert ext["required"] is False
        assert isinstance(ext["params"]["methods"], dict)
        for method in ext["params"]["methods"].values():
            assert set(method) <= {"method", "endpoint", "request"}
    by_uri = {e["uri"]: e for e in card["capabilities"]["extensions"]}
    # Upstream's tool-access methods name no endpoint of their own: the extension's is used.
    assert by_uri["urn:agentenv:disable-tool/v1"]["params"] == {
        "endpoint": "/tools/disable",
        "methods": {"disable": {"method": "POST", "request": ANY_OBJECT_SCHEMA}},
    }


ANY_OBJECT_SCHEMA = {
    "type": "object",
    "properties": {
        "role": {"type": "string"},
        "tools": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"const": "*"}]},
    },
    "required": ["role", "tools"],
}


async def test_the_triggers_extension_declares_the_supported_features(
    client: httpx.AsyncClient,
) -> None:
    from agentenv.gateway.triggers import SUPPORTED_TRIGGER_FEATURES

    card = await get_card(client)
    (triggers,) = [
        e for e in card["capabilities"]["extensions"] if e["uri"] == "urn:agentenv:triggers/v1"
    ]
    assert triggers["params"]["features"] == list(SUPPORTED_TRIGGER_FEATURES)
    others = [e for e in card["capabilities"]["extensions"] if e is not triggers]
    assert all("features" not in e["params"] for e in others)


async def test_extension_request_schemas_describe_the_bodies(client: httpx.AsyncClient) -> None:
    schemas = {
        (ext["uri"], name): m.get("request")
        for ext in (await get_card(client))["capabilities"]["extensions"]
        for name, m in ext["params"]["methods"].items()
    }
    step = schemas[("urn:agentenv:step/v1", "step")]
    assert step["properties"]["action"]["enum"] == ["list_tools", "call_tool"]
    assert {"tool_name", "arguments"} <= set(step["properties"])
    set_time = schemas[("urn:agentenv:clock/v1", "set_time")]
    assert {"virtual_time", "virtual_seconds_per_real_second"} <= set(set_time["properties"])
    assert "virtual_time" in set_time["required"]
    disable = schemas[("urn:agentenv:disable-tool/v1", "disable")]
    assert set(disable["required"]) == {"role", "tools"}
    register = schemas[("urn:agentenv:triggers/v1", "register")]
    assert "triggers" in register["properties"]
    changes = schemas[("urn:agentenv:changes/v1", "get")]
    assert set(changes["properties"]) == {"after_id", "limit"}
    assert schemas[("urn:agentenv:clock/v1", "get_time")] is None
    assert schemas[("urn:agentenv:state/v1", "get")] is None


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
        for method, endpoint in methods.values():
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
        uri: {name: (verb, "/instances/ep-2" + path) for name, (verb, path) in methods.items()}
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


# -- composed environments: one card and one data plane per child ------------------------------

CHILD_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: {name}
state:
  items: {{key: id}}
seed:
  items:
    - {{id: "{name}-1", label: first}}
tools:
  - name: list_items
    crud: {{collection: items, op: list}}
"""

PARENT_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: office
state:
  memos: {key: id}
compose:
  - {env: ../mail, as: mail}
  - {env: ../stock, as: inv}
"""


@pytest.fixture
async def composed(tmp_path: Any, app_client: Any) -> Any:
    from agentenv import Environment

    from .conftest import write_env

    write_env(tmp_path / "mail", CHILD_YAML.format(name="mail"))
    write_env(tmp_path / "stock", CHILD_YAML.format(name="stock"))
    env = Environment.load(write_env(tmp_path / "office", PARENT_YAML))
    async with app_client(create_app(Gateway(env))) as c:
        yield c


async def rpc(client: httpx.AsyncClient, url: str, method: str, params: Any = None) -> Any:
    body = {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}}
    r = await client.post(url, json=body)
    assert r.status_code == 200, r.text
    return r.json()


async def test_each_child_card_has_its_own_data_plane_under_svc(
    composed: httpx.AsyncClient,
) -> None:
    card = await get_card(composed)
    mail, stock = card["children_environments"]
    assert (mail["name"], stock["name"]) == ("mail", "stock")
    assert mail["url"] == "/svc/mail/agentenv"
    assert stock["url"] == "/svc/inv/agentenv"  # keyed by the namespace it is composed under
    for child in (mail, stock):
        # As upstream's rewrite leaves a backing server's card: no interfaces of its own (its
        # tools are on the parent's MCP endpoint), the gateway's operations at their routes.
        assert child["additionalInterfaces"] == []
        assert child["children_environments"] is None
        assert endpoints(child) == EXTENSIONS
        assert child["capabilities"]["operations"] == ["data/reset", "data/add", "data/get"]
    assert [t["name"] for t in stock["capabilities"]["tools"]] == ["inv__list_items"]


async def test_a_childs_card_is_served_under_its_prefix(composed: httpx.AsyncClient) -> None:
    nested = (await get_card(composed))["children_environments"][1]
    assert await get_card(composed, "/svc/inv") == nested
    assert await get_card(composed, "/svc/mcp-inv") == nested  # upstream's key for MCP services
    assert await get_card(composed, "/svc/mcp-stock") == nested  # the child's name, if unique
    r = await composed.get("/svc/nobody" + CARD_PATH)
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"
    assert r.json()["error"]["hint"] == "children: mail, inv"


async def test_a_childs_data_plane_sees_only_its_collections(composed: httpx.AsyncClient) -> None:
    got = await rpc(composed, "/svc/inv/agentenv", "data/get")
    assert got["result"] == {
        "parts": [{"kind": "data", "data": {"items": [{"id": "stock-1", "label": "first"}]}}]
    }
    added = await rpc(
        composed,
        "/svc/inv/agentenv",
        "data/add",
        {"parts": [{"kind": "data", "data": {"items": [{"id": "stock-2"}]}}]},
    )
    assert added["result"] == {}
    listed = await composed.post(
        "/step", json={"action": "call_tool", "tool_name": "inv__list_items", "arguments": {}}
    )
    assert [i["id"] for i in listed.json()["structuredContent"]["items"]] == [
        "stock-1",
        "stock-2",
    ]
    assert (await rpc(composed, "/svc/inv/agentenv", "data/reset"))["result"] == {}
    everything = (await rpc(composed, "/agentenv", "data/get"))["result"]["parts"][0]["data"]
    assert everything["inv__items"] == []
    assert everything["mail__items"] == [{"id": "mail-1", "label": "first"}]  # untouched


async def test_a_childs_data_plane_refuses_another_childs_collection(
    composed: httpx.AsyncClient,
) -> None:
    answer = await rpc(
        composed,
        "/svc/inv/agentenv",
        "data/add",
        {"parts": [{"kind": "data", "data": {"mail__items": [{"id": "x"}]}}]},
    )
    assert answer["error"]["code"] == -32000
    assert answer["error"]["data"]["code"] == "add_failed"
    assert "mail__items" in answer["error"]["message"]
    r = await composed.post("/svc/nobody/agentenv", json={"jsonrpc": "2.0", "id": 1})
    assert r.status_code == 404


async def test_an_instances_children_have_prefixed_data_planes(composed: httpx.AsyncClient) -> None:
    assert (await composed.post("/instances", json={"id": "ep-9"})).status_code == 201
    card = await get_card(composed, "/instances/ep-9")
    stock = card["children_environments"][1]
    assert stock["url"] == "/instances/ep-9/svc/inv/agentenv"
    assert await get_card(composed, "/instances/ep-9/svc/inv") == stock
    add = {"parts": [{"kind": "data", "data": {"items": [{"id": "only-ep-9"}]}}]}
    assert (await rpc(composed, stock["url"], "data/add", add))["result"] == {}
    mine = (await rpc(composed, stock["url"], "data/get"))["result"]["parts"][0]["data"]
    default = (await rpc(composed, "/svc/inv/agentenv", "data/get"))["result"]["parts"][0]["data"]
    assert [i["id"] for i in mine["items"]] == ["stock-1", "only-ep-9"]
    assert [i["id"] for i in default["items"]] == ["stock-1"]


async def test_text_parts_added_to_a_child_stay_with_that_child(
    composed: httpx.AsyncClient,
) -> None:
    note = {"kind": "text", "text": "inventory counted on Monday"}
    assert (await rpc(composed, "/svc/inv/agentenv", "data/add", {"parts": [note]}))["result"] == {}
    assert (await rpc(composed, "/svc/inv/agentenv", "data/get"))["result"]["parts"][1:] == [note]
    assert (await rpc(composed, "/svc/mail/agentenv", "data/get"))["result"]["parts"][1:] == []
    assert (await rpc(composed, "/agentenv", "data/reset"))["result"] == {}  # resets them all
    assert (await rpc(composed, "/svc/inv/agentenv", "data/get"))["result"]["parts"][1:] == []
