"""Hostile tools and hostile arguments at the one door (issue 11, defects 3, 9 and 5).

A tool that writes and then returns what no transport can carry, or raises what is not an
`Exception` (KeyboardInterrupt, SystemExit, GeneratorExit, CancelledError), fails like any
other bad call: a structured tool error, the state rolled back, the call recorded, the
gateway (and the real REST server in front of it) still serving. Arguments nested past the
limit of `spec.limits` are refused by `Gateway.call` itself, so every transport is covered.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentenv import Environment, Gateway, Principal
from agentenv.gateway.blocking import stuck_count
from agentenv.serve import make_server
from agentenv.spec import CheckStep
from agentenv.spec.limits import MAX_JSON_DEPTH, depth_message

HOSTILE_TOOLS = '''
import asyncio

from agentenv import ToolContext, tool

RAISED = {
    "KeyboardInterrupt": KeyboardInterrupt,
    "SystemExit": SystemExit,
    "GeneratorExit": GeneratorExit,
    "CancelledError": asyncio.CancelledError,
    "RecursionError": RecursionError,
    "MemoryError": MemoryError,
}


def _nested(depth: int) -> object:
    value: object = "bottom"
    for _ in range(depth):
        value = [value]
    return value


BAD_RESULTS = {
    "surrogate": lambda: chr(0xD800),
    "surrogate_inside": lambda: {"items": [{"name": "ok"}, {"name": "a" + chr(0xDC80)}]},
    "surrogate_key": lambda: {"k" + chr(0xD800): 1},
    "deep_100": lambda: _nested(100),
    "deep_600": lambda: _nested(600),
    "deep_5000": lambda: _nested(5000),
    "nan_inside": lambda: {"scores": [1.0, float("nan")]},
    "set_inside": lambda: {"tags": {"a", "b"}},
}


@tool
def write_then_return(ctx: ToolContext, what: str) -> object:
    """Write a note, then return one of the results no transport can carry."""
    ctx.state.put("notes", {"id": "written"})
    return BAD_RESULTS[what]()


@tool
def write_then_nested(ctx: ToolContext, depth: int) -> object:
    """Write a note, then return a list nested `depth` levels."""
    ctx.state.put("notes", {"id": "written"})
    return _nested(depth)


@tool
def sync_raise(ctx: ToolContext, what: str) -> dict:
    """Write a note, then raise `what`."""
    ctx.state.put("notes", {"id": "written"})
    raise RAISED[what]()


@tool
async def async_raise(ctx: ToolContext, what: str) -> dict:
    """Write a note, yield to the loop, then raise `what`."""
    ctx.state.put("notes", {"id": "written"})
    await asyncio.sleep(0)
    raise RAISED[what]()


@tool(timeout=30)
async def timed_raise(ctx: ToolContext, what: str) -> dict:
    """`async_raise` with a timeout (so it runs in a task of its own)."""
    ctx.state.put("notes", {"id": "written"})
    await asyncio.sleep(0)
    raise RAISED[what]()


@tool(blocking=True)
def blocking_raise(ctx: ToolContext, what: str) -> dict:
    """`sync_raise` in the pool for blocking tools."""
    ctx.state.put("notes", {"id": "written"})
    raise RAISED[what]()


@tool
async def wait_forever(ctx: ToolContext) -> dict:
    """Write a note, then wait until cancelled."""
    ctx.state.put("notes", {"id": "waiting"})
    await asyncio.Event().wait()
    return {}


@tool
def keep(ctx: ToolContext, data: object = None) -> dict:
    """Store any value (deeply nested arguments land here)."""
    ctx.state.put("notes", {"id": "kept"})
    return {"kept": True}


@tool(kind="read")
def check_raise(ctx: ToolContext, what: str) -> dict:
    """A check tool that raises `what`."""
    raise RAISED[what]()


@tool
def add_note(ctx: ToolContext, id: str) -> dict:
    """A good tool: write a note."""
    return ctx.state.put("notes", {"id": id})
'''

HOSTILE_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: hostile
state:
  notes:
    key: id
tools:
  - module: hostile_tools.py
"""

AGENT = Principal("default")
RAISED = [
    "KeyboardInterrupt",
    "SystemExit",
    "GeneratorExit",
    "CancelledError",
    "RecursionError",
    "MemoryError",
]
FLAVOURS = ["sync_raise", "async_raise", "timed_raise", "blocking_raise"]


@pytest.fixture(scope="module")
def hostile_env(tmp_path_factory: pytest.TempPathFactory) -> Environment:
    folder: Path = tmp_path_factory.mktemp("hostile")
    (folder / "hostile_tools.py").write_text(HOSTILE_TOOLS)
    (folder / "env.yaml").write_text(textwrap.dedent(HOSTILE_ENV))
    return Environment.load(folder)


@pytest.fixture
def gw(hostile_env: Environment) -> Gateway:
    return Gateway(hostile_env)


def _notes(gw: Gateway) -> list[str]:
    return gw.instance().state.keys("notes")


async def _assert_failed_cleanly(gw: Gateway, out: Any, tool: str, kind: str) -> None:
    """The failed call: a structured error, nothing written, recorded; the gateway serves."""
    inst = gw.instance()
    assert not out.ok
    assert out.value is None
    assert out.error is not None and out.error.kind == kind
    assert out.text == f"Error: {out.error.message}"
    out.error.message.encode("utf-8")  # the message itself can be sent
    json.dumps(out.to_wire(), ensure_ascii=False, allow_nan=False).encode("utf-8")
    assert _notes(gw) == []
    assert inst.state.changes == 0
    assert len(inst.trajectory) == 1
    record = inst.trajectory[0]
    assert (record.tool, record.error, record.result) == (tool, out.error, None)
    again = await gw.call(AGENT, "add_note", {"id": "after"})
    assert again.ok, again.error
    assert _notes(gw) == ["after"]


# -- defect 3: a result no transport can carry ------------------------------------------------

BAD_RESULTS = {
    "surrogate": "result holds a lone surrogate ('\\ud800' at character 0)",
    "surrogate_inside": "result.items[1].name holds a lone surrogate ('\\udc80' at character 1)",
    "surrogate_key": "result has a key that holds a lone surrogate",
    "deep_100": f"result[0][0][0][0][0][0]...[0][0][0] is {depth_message()}",
    "deep_600": f"is {depth_message()}",
    "deep_5000": f"is {depth_message()}",
    "nan_inside": "result.scores[1] is nan, which JSON cannot carry",
    "set_inside": "result.tags is of type set, which JSON cannot carry",
}


@pytest.mark.parametrize("what", list(BAD_RESULTS))
async def test_a_result_no_transport_can_carry_fails_the_call_and_keeps_no_write(
    gw: Gateway, what: str
) -> None:
    out = await gw.call(AGENT, "write_then_return", {"what": what})
    await _assert_failed_cleanly(gw, out, "write_then_return", "invalid_result")
    assert out.error is not None
    assert out.error.message.startswith("the tool's result cannot be sent: ")
    assert BAD_RESULTS[what] in out.error.message


async def test_a_result_at_the_nesting_limit_is_sent(gw: Gateway) -> None:
    # The list itself is a level: MAX_JSON_DEPTH lists around a string is the deepest allowed.
    out = await gw.call(AGENT, "write_then_nested", {"depth": MAX_JSON_DEPTH})
    assert out.ok, out.error
    assert _notes(gw) == ["written"]
    out = await gw.call(AGENT, "write_then_nested", {"depth": MAX_JSON_DEPTH + 1})
    assert out.error is not None and out.error.kind == "invalid_result"
    assert _notes(gw) == ["written"]  # the second write was rolled back


async def test_an_unsendable_result_in_performance_mode_lands_nothing(
    hostile_env: Environment,
) -> None:
    gw = Gateway(hostile_env, mode="performance")
    out = await gw.call(AGENT, "write_then_return", {"what": "surrogate_inside"})
    await _assert_failed_cleanly(gw, out, "write_then_return", "invalid_result")


# -- defect 9: what a tool raises that is not an Exception --------------------------------------


@pytest.mark.parametrize("what", RAISED)
@pytest.mark.parametrize("tool", FLAVOURS)
async def test_a_tool_raising_a_base_exception_is_a_tool_error(
    gw: Gateway, tool: str, what: str
) -> None:
    out = await gw.call(AGENT, tool, {"what": what})
    await _assert_failed_cleanly(gw, out, tool, "tool_error")
    assert out.error is not None and out.error.message.startswith(what)


@pytest.mark.parametrize("what", ["KeyboardInterrupt", "SystemExit", "CancelledError"])
async def test_a_base_exception_in_performance_mode_is_a_tool_error(
    hostile_env: Environment, what: str
) -> None:
    gw = Gateway(hostile_env, mode="performance")
    out = await gw.call(AGENT, "async_raise", {"what": what})
    await _assert_failed_cleanly(gw, out, "async_raise", "tool_error")


async def test_the_pool_for_blocking_tools_survives_what_they_raise(gw: Gateway) -> None:
    for _ in range(3):
        out = await gw.call(AGENT, "blocking_raise", {"what": "KeyboardInterrupt"})
        assert out.error is not None and out.error.kind == "tool_error"
    assert stuck_count() == 0


async def test_cancelling_the_call_itself_still_cancels_it(gw: Gateway) -> None:
    """A real cancellation (the caller gives up, the server shuts down) is not swallowed:
    the call ends with CancelledError, its write rolled back, and the instance is free."""
    call = asyncio.create_task(gw.call(AGENT, "wait_forever", {}))
    while gw.instance().state.get("notes", "waiting") is None:
        await asyncio.sleep(0)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert _notes(gw) == []
    assert not gw.instance().lock.locked()
    again = await gw.call(AGENT, "add_note", {"id": "after"})
    assert again.ok


async def test_a_check_tool_raising_keyboard_interrupt_is_a_tool_error(gw: Gateway) -> None:
    from agentenv.env.tool import ToolError

    step = CheckStep(tool="check_raise", args={"what": "KeyboardInterrupt"})
    with pytest.raises(ToolError, match="check tool 'check_raise' raised KeyboardInterrupt"):
        await gw.probe(gw.instance(), step, None)


# -- defect 5 (the gateway's part): arguments nested past the limit ----------------------------


def _nested_arg(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 600, 5000])
async def test_arguments_nested_past_the_limit_are_refused_with_the_path(
    gw: Gateway, depth: int
) -> None:
    # The arguments object is the first level, so `data` may nest one level less.
    out = await gw.call(AGENT, "keep", {"data": _nested_arg(depth)})
    assert out.error is not None and out.error.kind == "invalid_arguments"
    assert out.error.message.startswith("invalid arguments for 'keep': data.0.0.0")
    assert out.error.message.endswith(depth_message())
    # A 64-step path is shown by its ends, so the message stays short.
    assert "data.0.0.0.0.0...0.0.0:" in out.error.message and len(out.error.message) < 140
    assert _notes(gw) == []
    record = gw.instance().trajectory[0]
    assert record.error == out.error
    assert record.args == {
        "_invalid": out.error.message.removeprefix("invalid arguments for 'keep': ")
    }
    assert (await gw.call(AGENT, "add_note", {"id": "after"})).ok


async def test_arguments_at_the_limit_are_accepted(gw: Gateway) -> None:
    out = await gw.call(AGENT, "keep", {"data": _nested_arg(MAX_JSON_DEPTH - 1)})
    assert out.ok, out.error
    out = await gw.call(AGENT, "keep", {"data": {"a": [1, 2, {"b": None}]}})
    assert out.ok


# -- the same through a real REST server --------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def _served(gw: Gateway) -> Iterator[httpx.Client]:
    """A real uvicorn server over `gw` in a thread, and a client of it."""
    port = _free_port()
    server = make_server(gw, host="127.0.0.1", port=port)
    thread = threading.Thread(target=server.run, name=f"uvicorn-{port}", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 15
        while not server.started:
            assert thread.is_alive(), "the server thread died during startup"
            assert time.monotonic() < deadline, "the server did not start within 15 s"
            time.sleep(0.02)
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=15) as client:
            yield client
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        assert not thread.is_alive(), "the server did not stop within 15 s"


def _step(client: httpx.Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    response = client.post(
        "/step", json={"action": "call_tool", "tool_name": tool, "arguments": arguments}
    )
    assert response.status_code == 200, response.text
    return response.json()


REST_CASES = [
    ("write_then_return", {"what": "surrogate_inside"}, "invalid_result"),
    ("write_then_return", {"what": "deep_600"}, "invalid_result"),
    ("sync_raise", {"what": "KeyboardInterrupt"}, "tool_error"),
    ("timed_raise", {"what": "KeyboardInterrupt"}, "tool_error"),
    ("timed_raise", {"what": "SystemExit"}, "tool_error"),
    ("blocking_raise", {"what": "KeyboardInterrupt"}, "tool_error"),
    ("async_raise", {"what": "CancelledError"}, "tool_error"),
    ("sync_raise", {"what": "GeneratorExit"}, "tool_error"),
    ("async_raise", {"what": "GeneratorExit"}, "tool_error"),
]


@pytest.mark.parametrize(
    ("tool", "args", "kind"), REST_CASES, ids=[f"{c[0]}-{c[1]['what']}" for c in REST_CASES]
)
def test_over_rest_a_failed_call_is_a_recorded_tool_error_and_the_server_serves_on(
    hostile_env: Environment, tool: str, args: dict[str, Any], kind: str
) -> None:
    gw = Gateway(hostile_env)
    with _served(gw) as client:
        answer = _step(client, tool, args)
        assert answer["isError"] is True, answer
        assert answer["error"]["kind"] == kind, answer
        assert answer["structuredContent"] is None
        assert _notes(gw) == []  # no write was kept
        lines = client.get("/trajectory", params={"format": "records"})
        assert lines.status_code == 200, lines.text
        records = [json.loads(line) for line in lines.text.splitlines()]
        assert [(r["tool"], r["error"]["kind"]) for r in records] == [(tool, kind)]
        good = _step(client, "add_note", {"id": "after"})
        assert good["isError"] is False
        assert _notes(gw) == ["after"]


def test_over_rest_deep_arguments_are_a_recorded_invalid_arguments_error(
    hostile_env: Environment,
) -> None:
    gw = Gateway(hostile_env)
    with _served(gw) as client:
        response = client.post(
            "/step",
            json={
                "action": "call_tool",
                "tool_name": "keep",
                "arguments": {"data": _nested_arg(MAX_JSON_DEPTH)},
            },
        )
        # The transport may refuse the body itself (400) before the gateway sees it;
        # either way it is a structured refusal, never a 500, and nothing is written.
        assert response.status_code in (200, 400), response.text
        body = response.json()
        assert depth_message() in json.dumps(body)
        assert _notes(gw) == []
        assert _step(client, "add_note", {"id": "after"})["isError"] is False
