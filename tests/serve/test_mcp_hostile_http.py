"""Hostile input to MCP over Streamable HTTP, against a real uvicorn server: reserved roles
(header and `_meta`), deep nesting, lone surrogates, NUL, huge bodies, wrong content types,
foreign Origin/Host, odd methods. The official `mcp` client sends what it can send (both
protocol eras); raw httpx sends what it cannot.

Every answer is checked: never a 5xx or a traceback; a refusal is a JSON-RPC error whose
message says why; nothing refused reaches a tool, the state or the trajectory; the server
keeps serving.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from agentenv import Environment, Gateway

MODES = ["auto", "legacy"]
META_ROLE = "agentenv.io/role"
WAIT_S = 30
LEGACY_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "hostile", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
ERAS = ["legacy", "modern"]


def era_headers(era: str, method: str, name: str | None = None) -> dict[str, str]:
    """The headers of a raw request in either era (modern: what the SDK client sends)."""
    if era == "legacy":
        return dict(LEGACY_HEADERS)
    headers = {**LEGACY_HEADERS, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def era_meta(era: str) -> str:
    """The `_meta` member a raw request carries in its era, as JSON text."""
    return json.dumps(MODERN_META) if era == "modern" else "{}"


# -- a real server ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(notes_env_dir: Path) -> Environment:
    return Environment.load(notes_env_dir)


@dataclass
class Served:
    url: str
    gateway: Gateway

    @property
    def mcp(self) -> str:
        return self.url + "/mcp"


@pytest.fixture
def served(env: Environment, live_server: Callable[..., Any]) -> Iterator[Served]:
    """A fresh gateway in trusted local mode."""
    gateway = Gateway(env)
    with live_server(gateway) as url:
        yield Served(url, gateway)


@pytest.fixture
def tokened(env: Environment, live_server: Callable[..., Any]) -> Iterator[Served]:
    """A fresh gateway with tokens: `s1` is an agent, `s2` the admin."""
    gateway = Gateway(env)
    with live_server(gateway, tokens={"s1": "agent", "s2": "admin"}) as url:
        yield Served(url, gateway)


async def _checked(response: httpx.Response) -> None:
    await response.aread()
    assert response.status_code < 500, response.text
    assert "Traceback" not in response.text, response.text


@contextlib.asynccontextmanager
async def raw(url: str, headers: dict[str, str] | None = None) -> AsyncIterator[httpx.AsyncClient]:
    """A plain HTTP client; every answer is checked for 5xx and tracebacks."""
    async with httpx.AsyncClient(
        base_url=url, headers=headers or {}, timeout=WAIT_S, event_hooks={"response": [_checked]}
    ) as client:
        yield client


@contextlib.asynccontextmanager
async def sdk(url: str, *, headers: dict[str, str] | None = None, mode: str = "auto") -> Any:
    """The official client over Streamable HTTP, custom headers on its httpx2 client."""
    async with (
        httpx2.AsyncClient(headers=headers or {}, timeout=WAIT_S) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode=mode,  # type: ignore[arg-type]
            cache=None,
            read_timeout_seconds=WAIT_S,
        ) as client,
    ):
        yield client


def mcp_error_in(exc: BaseException) -> MCPError:
    """The MCPError the client raised: itself, or the one in its task group's exception
    group (when it fails while connecting)."""
    if isinstance(exc, MCPError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            with contextlib.suppress(AssertionError):
                return mcp_error_in(inner)
    raise AssertionError(f"no MCPError in {exc!r}")


def refusal_of(r: httpx.Response, status: int, code: int) -> dict[str, Any]:
    """An HTTP refusal at /mcp, checked to be the JSON-RPC error clients can show."""
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json"), r.headers
    answer = r.json()
    assert answer["jsonrpc"] == "2.0", answer
    assert answer["error"]["code"] == code, answer
    assert answer["error"]["message"], answer
    return answer


async def snapshot(http: httpx.AsyncClient) -> tuple[str, list[dict[str, Any]]]:
    """The state hash and the trajectory's call records (both must stay readable)."""
    state = await http.get("/state")
    assert state.status_code == 200, state.text
    records = await http.get("/trajectory?format=records")
    assert records.status_code == 200, records.text
    calls = [json.loads(line) for line in records.text.splitlines() if line.strip()]
    return state.json()["state_hash"], calls


async def still_serving(served: Served, http: httpx.AsyncClient) -> None:
    """The server answers a plain call afterwards, over MCP."""
    async with sdk(served.mcp) as client:
        read = await client.call_tool("get_note", {"note_id": "N-1"})
    assert not read.is_error, read
    assert read.structured_content == {"id": "N-1", "text": "first"}


def nested(depth: int, leaf: Any = 1) -> Any:
    """A value of `depth` levels of lists around `leaf` (built without recursion)."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# -- reserved roles --------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("role", ["system", " system "])
async def test_a_meta_role_of_system_is_refused_and_reaches_no_tool(
    served: Served, mode: str, role: str
) -> None:
    # Before, `system` passed every access rule: an agent listed and called `purge`.
    meta = {META_ROLE: role}
    async with raw(served.url) as http:
        before = await snapshot(http)
        async with sdk(served.mcp, mode=mode) as client:
            with pytest.raises(MCPError) as listed:
                await client.list_tools(meta=meta)  # type: ignore[arg-type]
            with pytest.raises(MCPError) as called:
                await client.call_tool("purge", {"note_id": "N-1"}, meta=meta)
            # The same session goes on as the default role.
            refused = await client.call_tool("purge", {"note_id": "N-1"})
        for caught in (listed, called):
            assert caught.value.error.code == -32005
            assert "the role 'system' is reserved for the gateway itself" in str(caught.value)
        assert refused.is_error
        assert "role 'agent' may not call 'purge'" in refused.content[0].text
        state, calls = await snapshot(http)
        assert state == before[0]
        assert [(c["tool"], c["role"], c["denied"]) for c in calls] == [("purge", "agent", True)]


@pytest.mark.parametrize("mode", MODES)
async def test_a_system_role_header_is_401_and_the_client_says_why(
    served: Served, mode: str
) -> None:
    with pytest.raises((MCPError, BaseExceptionGroup)) as caught:
        async with sdk(served.mcp, headers={"AgentEnv-Role": "system"}, mode=mode) as client:
            await client.call_tool("purge", {"note_id": "N-1"})
    error = mcp_error_in(caught.value)
    assert error.error.code == -32005
    assert "the role 'system' is reserved" in str(error)
    async with raw(served.url) as http:
        r = await http.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={**LEGACY_HEADERS, "AgentEnv-Role": "system"},
        )
        answer = refusal_of(r, 401, -32005)
        assert answer["error"]["data"]["code"] == "unauthenticated"
        assert (await snapshot(http))[1] == []


async def test_with_tokens_a_meta_role_of_system_grants_nothing(tokened: Served) -> None:
    # Beyond trusted mode neither the header nor `_meta` is read: the token decides.
    meta = {META_ROLE: "system"}
    agent = {"Authorization": "Bearer s1", "AgentEnv-Role": "system"}
    async with raw(tokened.url, {"Authorization": "Bearer s2"}) as http:
        async with sdk(tokened.mcp, headers=agent) as client:
            refused = await client.call_tool("purge", {"note_id": "N-1"}, meta=meta)
        assert refused.is_error
        _, calls = await snapshot(http)
        assert [(c["tool"], c["role"], c["denied"]) for c in calls] == [("purge", "agent", True)]


# -- deep nesting ----------------------------------------------------------------------------


def deep_body(kind: str, meta: str) -> str:
    """A request nested far too deep, in one of several places and ways."""
    head = '{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": ' + meta
    if kind == "params-1000":
        return head + ', "x": ' + "[" * 1000 + "]" * 1000 + "}}"
    if kind == "params-100000":
        return head + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    if kind == "unterminated-2000":
        return head + ', "x": ' + "[" * 2000
    if kind == "objects-1000":
        return head + ', "x": ' + '{"k": ' * 1000 + "1" + "}" * 1000 + "}}"
    assert kind == "arguments-500"
    arguments = json.dumps({"payload": {"deep": nested(500)}})
    return (
        '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "keep", '
        f'"arguments": {arguments}, "_meta": {meta}}}}}'
    )


DEEP_BODIES = [
    "params-1000",
    "params-100000",
    "unterminated-2000",
    "objects-1000",
    "arguments-500",
]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("kind", DEEP_BODIES)
async def test_a_deeply_nested_body_is_a_400_json_rpc_error_that_says_so(
    served: Served, era: str, kind: str
) -> None:
    # Before: the SDK's bare "Parse error", or (2026 era, arguments) an internal error
    # from a RecursionError inside the gateway.
    body = deep_body(kind, era_meta(era))
    async with raw(served.url) as http:
        before = await snapshot(http)
        r = await http.post("/mcp", content=body, headers=era_headers(era, "tools/list"))
        answer = refusal_of(r, 400, -32700)
        assert answer["error"]["message"] == (
            "the request body is JSON nested deeper than 128 levels"
        )
        assert answer["error"]["data"]["code"] == "too_deep"
        assert answer["id"] == 1  # read from the opening members, without parsing
        assert await snapshot(http) == before
        await still_serving(served, http)


@pytest.mark.parametrize("mode", MODES)
async def test_arguments_nested_200_levels_are_refused_and_the_client_says_why(
    served: Served, mode: str
) -> None:
    # 200, not 500: the SDK client's own serializer stops near 255 levels (raw httpx sends
    # 500 in the test above).
    async with raw(served.url) as http:
        before = await snapshot(http)
        async with sdk(served.mcp, mode=mode) as client:
            with pytest.raises(MCPError) as caught:
                await client.call_tool("keep", {"payload": {"deep": nested(200)}})
            assert "nested deeper than 128 levels" in str(caught.value)
            ok = await client.call_tool("add_note", {"note_id": "N-2", "text": "after"})
            assert not ok.is_error, ok
        state, calls = await snapshot(http)
        assert state != before[0]
        assert [c["tool"] for c in calls] == ["add_note"]


@pytest.mark.parametrize("mode", MODES)
async def test_arguments_past_the_gateways_limit_are_a_recorded_tool_error(
    served: Served, mode: str
) -> None:
    # Within the body's limit, the gateway holds arguments to 64 levels: a tool error like
    # any bad argument, recorded, nothing written.
    async with raw(served.url) as http:
        before = await snapshot(http)
        async with sdk(served.mcp, mode=mode) as client:
            refused = await client.call_tool("keep", {"payload": {"deep": nested(100)}})
        assert refused.is_error, refused
        assert "JSON nested deeper than 64 levels" in refused.content[0].text
        state, calls = await snapshot(http)
        assert state == before[0]
        [record] = calls
        assert (record["tool"], record["error"]["kind"]) == ("keep", "invalid_arguments")


@pytest.mark.parametrize("mode", MODES)
async def test_arguments_at_the_limit_are_served(served: Served, mode: str) -> None:
    # args (1) > payload (2) > deep (3) > 61 lists > leaf: 64 levels, the most allowed.
    payload = {"deep": nested(61)}
    async with sdk(served.mcp, mode=mode) as client:
        kept = await client.call_tool("keep", {"payload": payload})
    assert not kept.is_error, kept
    assert kept.structured_content == payload


# -- surrogates, NUL, bytes that are not UTF-8 -----------------------------------------------

SURROGATE_ARGS = [
    pytest.param('{"note_id": "S-1", "text": "\\ud800"}', id="lone-high"),
    pytest.param('{"note_id": "S-1", "text": "\\udfff\\ud800"}', id="reversed-pair"),
    pytest.param('{"note_id": "\\ud800", "text": "x"}', id="in-a-key-value"),
]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("arguments", SURROGATE_ARGS)
async def test_lone_surrogates_never_get_a_500_nor_break_the_trajectory(
    served: Served, era: str, arguments: str
) -> None:
    body = (
        '{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "add_note", '
        f'"arguments": {arguments}, "_meta": {era_meta(era)}}}}}'
    )
    async with raw(served.url) as http:
        r = await http.post(
            "/mcp", content=body, headers=era_headers(era, "tools/call", "add_note")
        )
        assert r.status_code in (200, 400), r.text
        answer = r.json()
        assert answer["jsonrpc"] == "2.0"
        assert "result" in answer or answer["error"]["message"], answer
        # Whatever was accepted is recorded readably, and the state is readable too.
        await snapshot(http)
        await still_serving(served, http)


@pytest.mark.parametrize("era", ERAS)
async def test_a_result_holding_a_lone_surrogate_is_an_error_and_writes_nothing(
    served: Served, era: str
) -> None:
    # Raw: the SDK client cannot send one (it encodes its body as strict UTF-8). The legacy
    # era's parser refuses the escape; the 2026 era's takes it, the tool answers it back,
    # and the gateway refuses the result it cannot encode (rolling the write back).
    body = (
        '{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "keep", '
        f'"arguments": {{"payload": {{"text": "\\ud800"}}}}, "_meta": {era_meta(era)}}}}}'
    )
    async with raw(served.url) as http:
        before = await snapshot(http)
        r = await http.post("/mcp", content=body, headers=era_headers(era, "tools/call", "keep"))
        answer = r.json()
        if era == "legacy":
            refusal_of(r, 400, -32700)
        else:
            assert r.status_code == 200, r.text
            assert answer["result"]["isError"] is True, answer
        state, calls = await snapshot(http)
        assert state == before[0]
        assert all(c["error"] for c in calls), calls
        await still_serving(served, http)


@pytest.mark.parametrize("mode", MODES)
async def test_nul_in_a_string_is_just_a_character(served: Served, mode: str) -> None:
    text = "before\x00after"
    async with sdk(served.mcp, mode=mode) as client:
        added = await client.call_tool("add_note", {"note_id": "N\x00", "text": text})
        assert not added.is_error, added
        read = await client.call_tool("get_note", {"note_id": "N\x00"})
    assert read.structured_content == {"id": "N\x00", "text": text}


BAD_BYTES = [
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}\x00', id="nul-after"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/l\x00ist"}', id="raw-nul"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}', id="not-utf8"),
    pytest.param(b'{"jsonrpc": "2.0", "id": 1, "method": "\xed\xa0\x80"}', id="utf8-surrogate"),
]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("body", BAD_BYTES)
async def test_bytes_that_are_not_json_text_are_a_json_rpc_error(
    served: Served, era: str, body: bytes
) -> None:
    async with raw(served.url) as http:
        r = await http.post("/mcp", content=body, headers=era_headers(era, "tools/list"))
        assert 400 <= r.status_code < 500, r.text
        assert r.json()["error"]["message"], r.text
        assert (await snapshot(http))[1] == []


# -- huge bodies -----------------------------------------------------------------------------


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "streamed"])
async def test_a_huge_body_is_413_and_reaches_nothing(served: Served, declared: bool) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "add_note", "arguments": {"note_id": "B", "text": "x" * 2**21}},
        }
    ).encode()

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    async with raw(served.url) as http:
        before = await snapshot(http)
        content: Any = body if declared else chunks()
        r = await http.post("/mcp", content=content, headers=LEGACY_HEADERS)
        assert r.status_code == 413, r.text
        assert "over the limit" in r.text
        assert await snapshot(http) == before
        await still_serving(served, http)


# -- content types, Origin, Host, methods ----------------------------------------------------

CONTENT_TYPES = [
    pytest.param("text/plain", id="text-plain"),
    pytest.param("application/x-www-form-urlencoded", id="form"),
    pytest.param("multipart/form-data; boundary=x", id="multipart"),
    pytest.param("application/xml", id="xml"),
    pytest.param(None, id="none"),
]


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("content_type", CONTENT_TYPES)
async def test_a_body_not_declared_json_is_refused_with_a_json_rpc_error(
    served: Served, era: str, content_type: str | None
) -> None:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "add_note", "arguments": {"note_id": "C", "text": "x"}},
        }
    )
    headers = era_headers(era, "tools/call", "add_note")
    headers.pop("Content-Type")
    if content_type is not None:
        headers["Content-Type"] = content_type
    async with raw(served.url) as http:
        before = await snapshot(http)
        r = await http.post("/mcp", content=body, headers=headers)
        assert r.status_code in (400, 415), r.text
        answer = refusal_of(r, r.status_code, -32600)
        assert "Content-Type" in answer["error"]["message"], answer
        assert await snapshot(http) == before


@pytest.mark.parametrize(
    ("headers", "status", "words"),
    [
        pytest.param({"Origin": "http://evil.example"}, 403, "origin", id="foreign-origin"),
        pytest.param({"Origin": "null"}, 403, "origin", id="null-origin"),
        pytest.param({"Host": "evil.example"}, 421, "Host", id="foreign-host"),
        pytest.param({"Host": "evil.example:80"}, 421, "Host", id="foreign-host-port"),
    ],
)
async def test_foreign_origins_and_hosts_are_refused_with_a_json_rpc_error(
    served: Served, headers: dict[str, str], status: int, words: str
) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "purge", "arguments": {"note_id": "N-1"}},
    }
    async with raw(served.url) as http:
        before = await snapshot(http)
        r = await http.post(
            "/mcp", json=body, headers={**LEGACY_HEADERS, "AgentEnv-Role": "supervisor", **headers}
        )
        answer = refusal_of(r, status, -32600)
        assert words in answer["error"]["message"], answer
        assert await snapshot(http) == before

    # The SDK client is told why too.
    with pytest.raises((MCPError, BaseExceptionGroup)) as caught:
        async with sdk(served.mcp, headers=headers) as client:
            await client.list_tools()
    assert words in str(mcp_error_in(caught.value))


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE"])
async def test_other_methods_are_405_with_a_json_rpc_error(served: Served, method: str) -> None:
    async with raw(served.url) as http:
        r = await http.request(method, "/mcp", headers=LEGACY_HEADERS, content=b"{}")
        refusal_of(r, 405, -32600)
        assert r.headers["allow"] == "POST"
