"""The JSON-RPC 2.0 data plane at the card's `url` (/agentenv): data/get, add, reset."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

SEED = {
    "tickets": [
        {"id": "T-1", "subject": "Printer on fire", "priority": 1, "status": "open"},
        {"id": "T-2", "subject": "Password reset", "priority": 3, "status": "open"},
    ],
    "notes": [],
}


async def rpc(
    client: httpx.AsyncClient,
    method: str,
    params: Any = None,
    request_id: Any = 1,
    prefix: str = "",
    **headers: str,
) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    r = await client.post(f"{prefix}/agentenv", json=body, headers=headers)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["jsonrpc"] == "2.0"
    assert answer["id"] == request_id
    assert ("result" in answer) != ("error" in answer)
    return answer


async def records(client: httpx.AsyncClient, prefix: str = "") -> dict[str, Any]:
    answer = await rpc(client, "data/get", prefix=prefix)
    return answer["result"]["parts"][0]["data"]


def data(**collections: list[dict[str, Any]]) -> dict[str, Any]:
    return {"kind": "data", "data": collections}


def error_code(answer: dict[str, Any]) -> int:
    assert set(answer["error"]) == {"code", "message", "data"}
    assert isinstance(answer["error"]["message"], str) and answer["error"]["message"]
    # As upstream's SDK: `data.code` names the failure; `data.detail` says what went wrong.
    assert set(answer["error"]["data"]) == {"code", "detail"}
    assert answer["error"]["data"]["detail"] == answer["error"]["message"]
    return answer["error"]["code"]


def data_code(answer: dict[str, Any]) -> str:
    return answer["error"]["data"]["code"]


async def state_hash(client: httpx.AsyncClient) -> str:
    return (await client.get("/state")).json()["state_hash"]


async def test_data_get_returns_every_collection_as_a_data_part(
    client: httpx.AsyncClient,
) -> None:
    answer = await rpc(client, "data/get")
    assert answer["result"] == {"parts": [{"kind": "data", "data": SEED}]}


async def test_data_add_writes_records_that_tools_then_see(client: httpx.AsyncClient) -> None:
    new = {"id": "T-3", "subject": "Screen flickers", "priority": 2}
    changed = {"id": "T-1", "subject": "Printer fixed", "status": "closed"}
    answer = await rpc(client, "data/add", {"parts": [data(tickets=[new, changed])]})
    assert answer["result"] == {}  # upstream's AddDataResponse: nothing
    tickets = {t["id"]: t for t in (await records(client))["tickets"]}
    assert tickets["T-3"] == new
    assert tickets["T-1"] == changed  # upsert: the record is replaced
    r = await client.post(
        "/step",
        json={"action": "call_tool", "tool_name": "get_ticket", "arguments": {"id": "T-3"}},
    )
    assert r.json()["structuredContent"] == new


async def test_data_add_keeps_text_and_file_parts(client: httpx.AsyncClient) -> None:
    text = {"kind": "text", "text": "The customer is impatient."}
    file = {
        "kind": "file",
        "file": {"uri": "file:///tmp/manual.pdf", "mimeType": "application/pdf"},
    }
    answer = await rpc(client, "data/add", {"parts": [text, file]})
    assert answer["result"] == {}
    parts = (await rpc(client, "data/get"))["result"]["parts"]
    assert parts[0]["kind"] == "data"
    assert parts[1:] == [text, file]


BAD_ADDS = [
    (
        "unknown-collection",
        [data(tickets=[{"id": "T-9", "subject": "x"}]), data(nope=[{"id": "x"}])],
        "nope",
    ),
    (
        "schema-violation",
        [data(tickets=[{"id": "T-9", "subject": "x"}, {"id": "T-10"}])],
        "subject",
    ),
    ("no-key", [data(notes=[{"text": "no id"}])], "id"),
]


@pytest.mark.parametrize(
    ("parts", "names"), [c[1:] for c in BAD_ADDS], ids=[c[0] for c in BAD_ADDS]
)
async def test_a_bad_data_add_is_an_error_and_applies_nothing(
    client: httpx.AsyncClient, parts: list[dict[str, Any]], names: str
) -> None:
    before = await state_hash(client)
    answer = await rpc(client, "data/add", {"parts": [*parts, {"kind": "text", "text": "note"}]})
    assert error_code(answer) == -32000
    assert data_code(answer) == "add_failed"
    assert names in answer["error"]["message"]
    assert await state_hash(client) == before
    assert (await rpc(client, "data/get"))["result"] == {"parts": [{"kind": "data", "data": SEED}]}


async def test_data_reset_empties_the_environment(client: httpx.AsyncClient) -> None:
    await rpc(client, "data/add", {"parts": [{"kind": "text", "text": "kept until reset"}]})
    answer = await rpc(client, "data/reset")
    assert answer["result"] == {}
    assert (await rpc(client, "data/get"))["result"] == {
        "parts": [{"kind": "data", "data": {"tickets": [], "notes": []}}]
    }
    r = await client.post(
        "/step",
        json={"action": "call_tool", "tool_name": "get_ticket", "arguments": {"id": "T-1"}},
    )
    assert r.json()["error"]["kind"] == "tool_error"
    assert r.json()["isError"] is True
    # Seeding after a reset is data/add with data parts.
    await rpc(client, "data/add", {"parts": [data(tickets=[{"id": "T-7", "subject": "fresh"}])]})
    assert (await records(client))["tickets"] == [{"id": "T-7", "subject": "fresh"}]


async def test_the_data_plane_is_per_instance(client: httpx.AsyncClient) -> None:
    assert (await client.post("/instances", json={"id": "ep"})).status_code == 201
    await rpc(client, "data/reset", prefix="/instances/ep")
    await rpc(
        client,
        "data/add",
        {"parts": [data(notes=[{"id": "N-1", "text": "only here"}])]},
        prefix="/instances/ep",
    )
    assert (await records(client, "/instances/ep")) == {
        "tickets": [],
        "notes": [{"id": "N-1", "text": "only here"}],
    }
    assert await records(client) == SEED


async def test_an_unknown_method_is_32601(client: httpx.AsyncClient) -> None:
    answer = await rpc(client, "data/delete-everything")
    assert error_code(answer) == -32601
    assert data_code(answer) == "method_not_found"
    assert "data/delete-everything" in answer["error"]["message"]


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"parts": []},
        {"parts": [{"kind": "video", "url": "x"}]},
        {"parts": [{"kind": "file", "file": {"bytes": "aGk=", "uri": "file:///x"}}]},
        {"parts": [{"kind": "data", "data": "not an object"}]},
        {"parts": "all of them"},
    ],
    ids=["no-parts", "empty-parts", "unknown-kind", "file-two-sources", "data-not-object", "str"],
)
async def test_invalid_params_are_32602(client: httpx.AsyncClient, params: dict[str, Any]) -> None:
    before = await state_hash(client)
    answer = await rpc(client, "data/add", params)
    assert error_code(answer) == -32602
    assert data_code(answer) == "invalid_params"
    assert "parts" in answer["error"]["message"]
    assert await state_hash(client) == before


async def test_malformed_json_is_32700(client: httpx.AsyncClient) -> None:
    r = await client.post("/agentenv", content=b'{"jsonrpc": "2.0", "method": ')
    assert r.status_code == 200
    answer = r.json()
    assert answer["id"] is None
    assert error_code(answer) == -32700


@pytest.mark.parametrize(
    "body",
    [
        {"jsonrpc": "1.0", "id": 1, "method": "data/get"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "method": 5},
        "data/get",
    ],
    ids=["old-version", "no-method", "method-not-str", "not-an-object"],
)
async def test_an_invalid_request_is_32600(client: httpx.AsyncClient, body: Any) -> None:
    r = await client.post("/agentenv", json=body)
    assert r.status_code == 200
    assert error_code(r.json()) == -32600


async def test_a_batch_answers_each_request_in_order(client: httpx.AsyncClient) -> None:
    batch = [
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "data/add",
            "params": {"parts": [data(notes=[{"id": "N-1"}])]},
        },
        {
            "jsonrpc": "2.0",
            "method": "data/add",
            "params": {"parts": [data(notes=[{"id": "N-2"}])]},
        },
        {"jsonrpc": "2.0", "id": "b", "method": "data/nothing"},
        {"jsonrpc": "2.0", "id": "c", "method": "data/get"},
    ]
    r = await client.post("/agentenv", json=batch)
    assert r.status_code == 200
    answers = r.json()
    assert [a["id"] for a in answers] == ["a", "b", "c"]  # the notification gets no answer
    assert answers[0]["result"] == {}
    assert answers[1]["error"]["code"] == -32601
    notes = answers[2]["result"]["parts"][0]["data"]["notes"]
    assert notes == [{"id": "N-1"}, {"id": "N-2"}]  # the notification was still carried out


async def test_notifications_alone_get_no_body(client: httpx.AsyncClient) -> None:
    r = await client.post("/agentenv", json={"jsonrpc": "2.0", "method": "data/reset"})
    assert r.status_code == 204
    assert r.content == b""
    assert (await records(client))["tickets"] == []
    r = await client.post("/agentenv", json=[{"jsonrpc": "2.0", "method": "data/get"}])
    assert r.status_code == 204


async def test_an_empty_batch_is_an_invalid_request(client: httpx.AsyncClient) -> None:
    r = await client.post("/agentenv", json=[])
    assert error_code(r.json()) == -32600


async def test_string_ids_are_echoed(client: httpx.AsyncClient) -> None:
    answer = await rpc(client, "data/get", request_id="req-42")
    assert answer["id"] == "req-42"


async def test_an_agent_token_cannot_write_data(token_client: httpx.AsyncClient) -> None:
    agent = {"Authorization": "Bearer s1"}
    admin = {"Authorization": "Bearer s2"}
    for method, params in (
        ("data/reset", None),
        ("data/add", {"parts": [data(notes=[{"id": "N"}])]}),
    ):
        answer = await rpc(token_client, method, params, **agent)
        assert error_code(answer) == -32003
        assert data_code(answer) == "permission_denied"
    answer = await rpc(token_client, "data/get", **admin)
    assert answer["result"]["parts"][0]["data"] == SEED
    r = await token_client.post("/agentenv", json={"jsonrpc": "2.0", "id": 1, "method": "data/get"})
    assert r.status_code == 401
    answer = await rpc(token_client, "data/add", {"parts": [data(notes=[{"id": "N"}])]}, **admin)
    assert answer["result"] == {}


async def test_upstreams_request_shape_is_answered(client: httpx.AsyncClient) -> None:
    """What upstream's client sends: id 1, params always present, members we do not use."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "data/reset", "params": {}, "extra": True}
    r = await client.post("/agentenv", json=body)
    assert r.json() == {"jsonrpc": "2.0", "id": 1, "result": {}}
    parts = [{"kind": "data", "data": {"notes": [{"id": "N-5"}]}, "metadata": {"from": "x"}}]
    answer = await rpc(client, "data/add", {"parts": parts})
    assert answer["result"] == {}
    assert (await records(client))["notes"] == [{"id": "N-5"}]
