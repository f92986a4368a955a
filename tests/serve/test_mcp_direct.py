"""The direct `tools/call` path (serve/_mcp_fast.py) answers exactly as the SDK's stateless
transport does: two real servers over two fresh gateways of one environment, one with the
direct path and one without, get the same raw requests in the same order, and every
answer (status, headers, body bytes), every state and every trajectory must agree.

The requests cover what a client can send to `tools/call`: every tool of the desk (reads,
writes, a crash, a ToolError, a timeout, a non-JSON result, a role-restricted tool),
good and bad arguments, odd ids and params, `_meta` roles and sessions, each protocol
version header, Accept and Content-Type variants, notifications, batches, other methods,
other eras and instance routes; the direct path must take the plain calls among them and
leave the rest to the SDK.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import uvicorn

from agentenv import Environment, Gateway
from agentenv.gateway.auth import Authenticator
from agentenv.serve import create_app
from agentenv.serve._mcp_fast import DirectToolCall
from agentenv.serve.mcp import McpHttp

JSON = "application/json"
BOTH = "application/json, text/event-stream"
HEADERS = {"content-type": JSON, "accept": BOTH}
SKIPPED_HEADERS = {"date", "server"}


def call(name: Any, arguments: Any = None, *, request_id: Any = 1, **params: Any) -> dict[str, Any]:
    """A tools/call message."""
    body: dict[str, Any] = {"name": name, **params}
    if arguments is not None:
        body["arguments"] = arguments
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": body}


# (label, path, headers, body): sent in this order to both servers.
Case = tuple[str, str, dict[str, str], bytes]


def cases() -> list[Case]:
    out: list[Case] = []

    def add(label: str, body: Any, headers: dict[str, str] | None = None, path: str = "/mcp"):
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        out.append((label, path, {**HEADERS, **(headers or {})}, raw))

    # every tool, good arguments
    add("get", call("get_ticket", {"id": "T-1"}))
    add("list", call("list_tickets", {}))
    add("create", call("create_ticket", {"id": "T-9", "subject": "New", "priority": 2}))
    add("create again", call("create_ticket", {"id": "T-9", "subject": "New"}))
    add("update", call("update_ticket", {"id": "T-9", "status": "open"}))
    add("note", call("add_note", {"ticket_id": "T-1", "text": "hi", "minutes": 3}))
    add("note default", call("add_note", {"ticket_id": "T-2", "text": "yo"}))
    add("explode", call("explode", {"ticket_id": "T-1"}))
    add("refuse", call("refuse", {"reason": "no way"}))
    add("tag set", call("tag_set", {"ticket_id": "T-2"}))
    add("slow", call("slow", {"ticket_id": "T-2", "seconds": 5}))
    add("ids", call("ticket_ids"))
    add("close as agent", call("close_ticket", {"ticket_id": "T-1"}))
    add(
        "close as supervisor",
        call("close_ticket", {"ticket_id": "T-1"}),
        {"agentenv-role": "supervisor"},
    )
    # bad arguments and names
    add("missing arg", call("get_ticket", {}))
    add("wrong type", call("add_note", {"ticket_id": "T-1", "text": 5}))
    add("extra arg", call("get_ticket", {"id": "T-1", "nope": 1}))
    add("no such record", call("get_ticket", {"id": "T-404"}))
    add("unknown tool", call("no_such_tool", {}))
    add("name not a string", call(7, {}))
    add("arguments not an object", call("get_ticket", [1, 2]))
    add(
        "arguments null",
        call("get_ticket", request_id=3) | {"params": {"name": "get_ticket", "arguments": None}},
    )
    add("no params", {"jsonrpc": "2.0", "id": 4, "method": "tools/call"})
    add("params null", {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": None})
    add("params a list", {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": [1]})
    add("extra params member", call("get_ticket", {"id": "T-1"}, extra={"x": 1}))
    add("extra top-level member", call("get_ticket", {"id": "T-1"}) | {"extra": True})
    add("unicode", call("add_note", {"ticket_id": "T-1", "text": "héllo ✓ \u2028 日本"}))
    add("nul", call("add_note", {"ticket_id": "T-1", "text": "a\u0000b"}))
    # ids
    for i, rid in enumerate(["abc", "", 0, -1, 2**53, 10**30, 1.5, True, None, [1], {"a": 1}]):
        add(f"id {rid!r}", call("get_ticket", {"id": "T-1"}, request_id=rid) | {"n": i})
    add(
        "no id (a notification)",
        {"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "ticket_ids"}},
    )
    add("jsonrpc 1.0", call("ticket_ids") | {"jsonrpc": "1.0"})
    # _meta
    meta_role = {"agentenv.io/role": "supervisor"}
    add("meta role", call("close_ticket", {"ticket_id": "T-2"}, _meta=meta_role))
    add("meta role default", call("ticket_ids", _meta={"agentenv.io/role": "default"}))
    add("meta role not a string", call("ticket_ids", _meta={"agentenv.io/role": 3}))
    add("meta role system", call("ticket_ids", _meta={"agentenv.io/role": "system"}))
    add("meta role unknown", call("ticket_ids", _meta={"agentenv.io/role": "ghost"}))
    add("meta session", call("ticket_ids", _meta={"agentenv.io/session": "s-1"}))
    add("meta progress token", call("ticket_ids", _meta={"progressToken": "p1"}))
    add("meta not an object", call("ticket_ids", _meta=5))
    add("session header", call("ticket_ids"), {"agentenv-session": "s-2"})
    add("system role header", call("ticket_ids"), {"agentenv-role": "system"})
    # protocol versions
    for version in [
        "2024-11-05",
        "2025-03-26",
        "2025-06-18",
        "2025-11-25",
        "2026-07-28",
        "1999-01-01",
        "",
    ]:
        add(f"version {version!r}", call("ticket_ids"), {"mcp-protocol-version": version})
    # Accept and Content-Type
    for accept in [JSON, "*/*", "application/*", "text/event-stream", "text/html", ""]:
        add(f"accept {accept!r}", call("ticket_ids"), {"accept": accept})
    for content_type in [
        "application/json; charset=utf-8",
        "application/json-rpc",
        "text/plain",
        "Application/JSON",
    ]:
        add(f"content-type {content_type!r}", call("ticket_ids"), {"content-type": content_type})
    # not one plain call
    add("batch", [call("ticket_ids"), call("get_ticket", {"id": "T-1"}, request_id=2)])
    add("tools/list", {"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    add("ping", {"jsonrpc": "2.0", "id": 8, "method": "ping"})
    add(
        "escaped method",
        b'{"jsonrpc":"2.0","id":9,"method":"tools\\/call","params":{"name":"ticket_ids"}}',
    )
    add(
        "method in a string only",
        {"jsonrpc": "2.0", "id": 10, "method": "ping", "params": {"x": "tools/call"}},
    )
    add("malformed json", b'{"jsonrpc":"2.0","method":"tools/call",')
    add("not an object", b'"tools/call"')
    add("whitespace", b"  \n" + json.dumps(call("ticket_ids")).encode() + b"\n ")
    add(
        "duplicate keys",
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_ticket","name":"ticket_ids"}}',
    )
    # instances
    add("on an instance", call("ticket_ids"), path="/instances/ep-1/mcp")
    add(
        "write on an instance",
        call("add_note", {"ticket_id": "T-1", "text": "i"}),
        path="/instances/ep-1/mcp",
    )
    add("unknown instance", call("ticket_ids"), path="/instances/nope/mcp")
    return out


def mcp_endpoint(app: Any) -> McpHttp:
    """The app's MCP endpoint (the object create_app mounted at /mcp)."""
    for route in app.router.routes:
        endpoint = getattr(route, "endpoint", None)
        if isinstance(endpoint, McpHttp):
            return endpoint
    raise AssertionError("no MCP endpoint in the app")


class Counted:
    """The real DirectToolCall, counting the requests it answered."""

    def __init__(self, inner: DirectToolCall) -> None:
        self.inner = inner
        self.answered = 0
        self.cases: set[str] = set()
        """The `x-case` headers of the requests it answered."""

    async def answer(self, request: Any, *args: Any) -> bool:
        done = await self.inner.answer(request, *args)
        if done:
            self.answered += 1
            self.cases.add(request.headers.get("x-case", ""))
        return done


@contextlib.contextmanager
def serving(
    gateway: Gateway, *, direct: bool, auth: Authenticator | None = None
) -> Iterator[tuple[str, Counted]]:
    """The gateway's app (create_app, as make_server builds it) under a real uvicorn in a
    thread, its direct path on or off and counted."""
    app = create_app(gateway, auth=auth)
    endpoint = mcp_endpoint(app)
    endpoint.direct.enabled = direct
    counted = Counted(endpoint.direct)
    endpoint.direct = counted  # type: ignore[assignment]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        yield f"http://127.0.0.1:{port}", counted
    finally:
        server.should_exit = True
        thread.join(timeout=15)


def answer_of(response: httpx.Response) -> tuple[int, list[tuple[str, str]], bytes]:
    headers = [(k, v) for k, v in response.headers.items() if k not in SKIPPED_HEADERS]
    return response.status_code, headers, response.content


@pytest.mark.parametrize("mode", ["trusted", "tokens"])
def test_the_direct_path_answers_every_request_as_the_sdk_does(
    desk_env: Environment, mode: str
) -> None:
    direct_gateway, sdk_gateway = Gateway(desk_env), Gateway(desk_env)
    for gw in (direct_gateway, sdk_gateway):
        gw.create_instance("ep-1")
    all_cases = cases()
    auth = None
    if mode == "tokens":  # every case with an agent's token (headers and `_meta` roles unread)
        auth = Authenticator({"s1": "agent", "s2": "supervisor"}, default_role="agent")
        all_cases = [
            (label, p, {"authorization": "Bearer s1", **h}, b) for label, p, h, b in all_cases
        ]
        plain = json.dumps(call("close_ticket", {"ticket_id": "T-2"})).encode()
        for label, token in [
            ("supervisor token", "Bearer s2"),
            ("bad token", "Bearer nope"),
            ("no token", ""),
        ]:
            all_cases.append((label, "/mcp", {**HEADERS, "authorization": token}, plain))
    with (
        serving(direct_gateway, direct=True, auth=auth) as (direct_url, direct_path),
        serving(sdk_gateway, direct=False, auth=auth) as (sdk_url, sdk_path),
        httpx.Client(base_url=direct_url, timeout=30) as direct_client,
        httpx.Client(base_url=sdk_url, timeout=30) as sdk_client,
    ):
        for label, path, headers, body in all_cases:
            headers = {**headers, "x-case": label}
            ours = direct_client.post(path, content=body, headers=headers)
            theirs = sdk_client.post(path, content=body, headers=headers)
            assert answer_of(ours) == answer_of(theirs), label
            assert ours.status_code != 500, label
    taken = direct_path.cases  # read once both servers stopped: every answer is counted
    assert sdk_path.answered == 0
    # The plain calls went the direct way, and only they did.
    assert {"get", "create", "explode", "slow", "tag set", "unknown tool", "missing arg"} <= taken
    assert {"meta role", "version '2025-11-25'", "version '2024-11-05'", "on an instance"} <= taken
    assert {"accept '*/*'", "content-type 'application/json; charset=utf-8'"} <= taken
    assert taken.isdisjoint(
        {
            "batch",
            "tools/list",
            "ping",
            "escaped method",
            "no id (a notification)",
            "version '2026-07-28'",
            "version '1999-01-01'",
            "accept 'text/html'",
            "content-type 'text/plain'",
            "malformed json",
            "unknown instance",
            "bad token",
            "no token",
        }
        | ({"system role header"} if mode == "trusted" else set())
    )
    if mode == "tokens":
        assert {"supervisor token", "system role header", "meta role"} <= taken
    for instance in ("default", "ep-1"):
        a, b = direct_gateway.instance(instance), sdk_gateway.instance(instance)
        assert a.state.hash() == b.state.hash(), instance
        mine = [(r.tool, r.principal, r.session, r.args, r.result, r.error) for r in a.trajectory]
        theirs = [(r.tool, r.principal, r.session, r.args, r.result, r.error) for r in b.trajectory]
        assert mine == theirs, instance
        assert len(mine) > (30 if instance == "default" else 1), instance


@pytest.mark.parametrize("clients", [1, 8])
def test_concurrent_direct_calls_each_get_their_own_answer(
    desk_env: Environment, clients: int
) -> None:
    import concurrent.futures

    gateway = Gateway(desk_env)
    with serving(gateway, direct=True) as (url, counted):

        def one(i: int) -> None:
            with httpx.Client(base_url=url, timeout=30) as http:
                for j in range(20):
                    rid = f"{i}-{j}"
                    body = call("add_note", {"ticket_id": "T-1", "text": rid}, request_id=rid)
                    answer = http.post("/mcp", json=body, headers=HEADERS).json()
                    assert answer["id"] == rid
                    assert json.loads(answer["result"]["content"][0]["text"])["text"] == rid

        with concurrent.futures.ThreadPoolExecutor(clients) as pool:
            list(pool.map(one, range(clients)))
    assert counted.answered == clients * 20
    assert gateway.instance().state.count("notes") == clients * 20


VALUES: list[Any] = [
    {"id": "T-1", "tags": ["a", "b"], "n": 1.5, "none": None, "deep": {"x": [{"y": None}]}},
    {},
    [1, 2, 3],
    "text",
    "",
    0,
    -7,
    2**70,
    1e300,
    True,
    None,
    {"\u2028": "日本", "nul": "a\u0000b"},
    [{"a": None}, None],
]


@pytest.mark.parametrize(
    "version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]
)
def test_a_tool_result_is_the_sdk_models_dump_in_every_protocol_version(version: str) -> None:
    """`tool_result` (a dict) is what the CallToolResult model would have dumped, before and
    after the SDK shapes it for each protocol version, for values, errors and texts."""
    from mcp.types import CallToolResult, TextContent
    from mcp_types import methods

    from agentenv.gateway.results import CallResult
    from agentenv.serve.mcp import tool_result
    from agentenv.spec.wire import CallError

    results = [
        CallResult(True, value, json.dumps(value), None, i, i, "h")
        for i, value in enumerate(VALUES)
    ]
    for kind in ("tool_error", "denied", "timeout", "invalid_arguments"):
        error = CallError(kind=kind, message=f"{kind}: no")
        results.append(CallResult(False, None, f"Error: {kind}", error, 0, 0, "h"))
    for result in results:
        model = CallToolResult(
            content=[TextContent(text=result.text)],
            is_error=not result.ok,
            structured_content=result.structured,
        )
        dumped = model.model_dump(by_alias=True, mode="json", exclude_none=True)
        mine = tool_result(result)
        assert json.dumps(mine) == json.dumps(dumped), result
        shaped = methods.serialize_server_result("tools/call", version, dict(mine))
        assert shaped == methods.serialize_server_result("tools/call", version, dumped)


def test_an_sdk_without_the_internals_of_the_direct_path_still_serves(tmp_path: Any) -> None:
    # The direct path is built on private parts of the mcp SDK; a release that moved them
    # must cost speed only: the app still builds and every request takes the SDK's path.
    import subprocess
    import sys

    script = """
import mcp.shared.jsonrpc_dispatcher as dispatcher
del dispatcher.handler_exception_to_error_data  # as if this SDK release had renamed it
from agentenv import Environment, Gateway
from agentenv.serve import create_app, mcp
assert mcp.DirectToolCall is None
app = create_app(Gateway(Environment.load("examples/envs/support-desk")))
endpoints = [getattr(r, "endpoint", None) for r in app.router.routes]
endpoints = [e for e in endpoints if isinstance(e, mcp.McpHttp)]
assert endpoints and all(e.direct is None for e in endpoints), endpoints
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
