"""Hostile input to the JSON-RPC data plane (/agentenv and a composed child's
/svc/<key>/agentenv), against a real uvicorn server on 127.0.0.1.

A body the server will not parse (malformed, too deep) is a JSON-RPC parse error (-32700,
id null); a request it cannot make sense of is -32600; data the state cannot hold is the
method's own error (-32000, `add_failed`). Every answer: no 5xx, nothing half-applied.
HTTP-level refusals (content type, Origin, Host, credentials, size) answer before any
JSON-RPC is spoken, in the REST error shape, as 401 and 413 always have.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentenv import Gateway
from agentenv.serve._http import BODY_DEPTH
from agentenv.spec.limits import MAX_JSON_DEPTH, depth_message

TOO_DEEP = f"the request body is {depth_message(BODY_DEPTH)}"

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def served(desk_env, live_server, http_client) -> Iterator[httpx.Client]:
    """A client of one real server of the desk app (trusted local mode) for the module;
    tests that store something store it under ids of their own."""
    with live_server(Gateway(desk_env)) as url, http_client(url) as client:
        yield client


def rpc(method: str, params: Any = None, request_id: Any = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def add(*records: dict[str, Any], collection: str = "notes") -> dict[str, Any]:
    return rpc("data/add", {"parts": [{"kind": "data", "data": {collection: list(records)}}]})


def answer_of(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["jsonrpc"] == "2.0"
    return answer


def error_of(r: httpx.Response, code: int) -> dict[str, Any]:
    answer = answer_of(r)
    assert answer["error"]["code"] == code, answer
    assert answer["error"]["data"]["detail"] == answer["error"]["message"]
    return answer


def everything(client: httpx.Client) -> dict[str, Any]:
    answer = answer_of(client.post("/agentenv", json=rpc("data/get")))
    return {"parts": answer["result"]["parts"], "hash": client.get("/state").json()["state_hash"]}


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


# -- nesting ----------------------------------------------------------------------------------


def deep_add(levels: str) -> str:
    """A data/add body whose record holds `levels` (JSON text: json.dumps would recurse)."""
    return json.dumps(add({"id": "N-1", "deep": "HOLE"})).replace('"HOLE"', levels)


@pytest.mark.parametrize(
    "body",
    [
        "[" * 1000 + "]" * 1000,
        deep_add('{"k": ' * 1000 + '"leaf"' + "}" * 1000),
        "[" * 100_000,
    ],
    ids=["arrays", "deep-record", "unterminated"],
)
def test_a_body_nested_too_deep_is_a_parse_error(served: httpx.Client, body: str) -> None:
    before = everything(served)
    answer = error_of(served.post("/agentenv", content=body, headers=JSON), -32700)
    assert answer["id"] is None
    assert answer["error"]["message"] == TOO_DEEP
    assert everything(served) == before


def test_a_batch_holding_one_deep_request_is_refused_whole(served: httpx.Client) -> None:
    """The body is refused before it is parsed: no request of the batch is carried out."""
    before = everything(served)
    reset = json.dumps(rpc("data/reset"))
    deep = deep_add("[" * 500 + "]" * 500)
    r = served.post("/agentenv", content=f"[{reset}, {deep}]", headers=JSON)
    assert error_of(r, -32700)["error"]["message"] == TOO_DEEP
    assert everything(served) == before


def test_a_record_within_the_limit_is_stored(served: httpx.Client) -> None:
    # body, params, parts list, part, data, collection list, record: 7 levels around it
    record = {"id": "N-deep", "deep": nested(MAX_JSON_DEPTH - 8)}
    answer = answer_of(served.post("/agentenv", json=add(record)))
    assert answer["result"] == {}
    assert record in everything(served)["parts"][0]["data"]["notes"]


# -- strings UTF-8 cannot carry, NUL, numbers ------------------------------------------------


def test_a_lone_surrogate_in_a_record_is_add_failed_and_nothing_is_kept(
    served: httpx.Client,
) -> None:
    before = everything(served)
    body = json.dumps(add({"id": "N-1", "text": "fine"}, {"id": "N-2", "text": "\ud800"}))
    assert "\\ud800" in body
    answer = error_of(served.post("/agentenv", content=body, headers=JSON), -32000)
    assert answer["id"] == 1
    assert answer["error"]["data"]["code"] == "add_failed"
    assert everything(served) == before  # the valid first record was not kept either
    assert answer_of(served.post("/agentenv", json=rpc("data/get")))["result"]


def test_nul_and_a_surrogate_in_a_text_part_round_trip(served: httpx.Client) -> None:
    text = "nul\x00 and \udfff"
    body = json.dumps(rpc("data/add", {"parts": [{"kind": "text", "text": text}]}))
    assert answer_of(served.post("/agentenv", content=body, headers=JSON))["result"] == {}
    parts = everything(served)["parts"]
    assert parts[-1] == {"kind": "text", "text": text}


def test_nul_in_a_record_round_trips(served: httpx.Client) -> None:
    record = {"id": "N-\x00", "text": "a\x00b"}
    assert answer_of(served.post("/agentenv", json=add(record)))["result"] == {}
    assert record in everything(served)["parts"][0]["data"]["notes"]


@pytest.mark.parametrize(
    "raw",
    [b"1" * 10_000, b"1e999999", b"NaN"],
    ids=["ten-thousand-digits", "overflowing-float", "nan"],
)
def test_numbers_json_cannot_carry_are_refused(served: httpx.Client, raw: bytes) -> None:
    before = everything(served)
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "data/add", "params": {"parts": '
    body += b'[{"kind": "data", "data": {"notes": [{"id": "N-1", "n": ' + raw + b"}]}}]}}"
    answer = served.post("/agentenv", content=body, headers=JSON).json()
    assert answer["error"]["code"] in (-32700, -32000), answer
    assert everything(served) == before


def test_bytes_that_are_not_utf8_are_a_parse_error(served: httpx.Client) -> None:
    body = json.dumps(add({"id": "N-1", "text": "HOLE"})).encode().replace(b"HOLE", b"\xed\xa0\x80")
    before = everything(served)
    answer = error_of(served.post("/agentenv", content=body, headers=JSON), -32700)
    assert "UTF-8" in answer["error"]["message"]
    assert everything(served) == before


# -- ids and shapes --------------------------------------------------------------------------


@pytest.mark.parametrize("request_id", [True, {"a": [1]}, [1, 2]], ids=["bool", "object", "array"])
def test_an_id_that_is_not_one_is_32600_with_id_null(served: httpx.Client, request_id: Any) -> None:
    before = everything(served)
    answer = error_of(
        served.post("/agentenv", json=rpc("data/reset", request_id=request_id)), -32600
    )
    assert answer["id"] is None
    assert "id" in answer["error"]["message"]
    assert everything(served) == before  # not carried out


def test_a_batch_of_junk_answers_each_item(served: httpx.Client) -> None:
    junk = [1, "x", None, [], {}, {"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "method": 5, "id": 1}]
    answers = served.post("/agentenv", json=junk).json()
    assert len(answers) == len(junk)
    assert {a["error"]["code"] for a in answers} == {-32600}


def test_a_thousand_requests_in_one_batch_are_answered_in_order(served: httpx.Client) -> None:
    batch = [rpc("data/get", request_id=i) for i in range(1000)]
    answers = served.post("/agentenv", json=batch).json()
    assert [a["id"] for a in answers] == list(range(1000))


def test_params_of_the_wrong_type_are_32602(served: httpx.Client) -> None:
    for params in ([1, 2], "parts", 5):
        body = {"jsonrpc": "2.0", "id": 1, "method": "data/add", "params": params}
        r = served.post("/agentenv", json=body)
        assert r.json()["error"]["code"] in (-32600, -32602), r.text


# -- HTTP-level refusals ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status", "kind"),
    [
        ({"Content-Type": "text/plain"}, 415, "unsupported_media_type"),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"),
        ({"Content-Type": "multipart/form-data; boundary=b"}, 415, "unsupported_media_type"),
        ({"Origin": "http://evil.example", **JSON}, 403, "foreign_origin"),
        ({"Host": "evil.example", **JSON}, 421, "misdirected_host"),
        ({"AgentEnv-Role": "system", **JSON}, 401, "unauthenticated"),
    ],
    ids=["text", "form", "multipart", "origin", "host", "system-role"],
)
def test_a_reset_a_page_could_forge_is_refused(
    served: httpx.Client, headers: dict[str, str], status: int, kind: str
) -> None:
    before = everything(served)
    r = served.post("/agentenv", content=json.dumps(rpc("data/reset")), headers=headers)
    assert r.status_code == status, r.text
    assert r.json()["error"]["kind"] == kind
    assert everything(served) == before


def test_a_body_over_the_limit_is_413(desk_env, live_server, http_client) -> None:
    with live_server(Gateway(desk_env), max_body=1000) as url, http_client(url) as client:
        before = everything(client)
        r = client.post("/agentenv", json=add({"id": "N-1", "text": "x" * 2000}))
        assert r.status_code == 413
        assert r.json()["error"]["kind"] == "too_large"
        assert everything(client) == before
