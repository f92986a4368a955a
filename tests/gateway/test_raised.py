"""A tool that crashes: the agent reads one line; the call's record keeps the traceback
(its `detail`, cut to `TRACE_LIMIT`), which no answer to a client carries."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from agentenv import Environment, Gateway, Principal
from agentenv.env.tool import Tool, ToolContext, ToolError, tool
from agentenv.gateway.raised import TRACE_LIMIT, crash_trace
from agentenv.gateway.record import record_line
from agentenv.gateway.trajectory import Trajectory
from agentenv.serve import create_app
from agentenv.state import State

AGENT = Principal("agent")


def _helper(n: int) -> None:
    if n == 0:
        raise KeyError("oops")
    _other(n - 1)  # two functions in turn: Python does not fold their frames as repeats


def _other(n: int) -> None:
    _helper(n)


def crashes(ctx: ToolContext, depth: int = 0) -> None:
    """Crash `depth` calls deep."""
    ctx.state.put("notes", {"id": "n1"})
    _helper(depth)


async def crashes_async(ctx: ToolContext) -> None:
    """Crash after awaiting."""
    await asyncio.sleep(0)
    raise ValueError("async bug é")


@tool(blocking=True)
def crashes_blocking(ctx: ToolContext) -> None:
    """Crash in a thread."""
    raise ZeroDivisionError("in a thread")


def refuses(ctx: ToolContext) -> None:
    """A deliberate failure: no traceback."""
    raise ToolError("not allowed")


@pytest.fixture
def gw() -> Gateway:
    fns = (crashes, crashes_async, crashes_blocking, refuses)
    tools = {t.name: t for t in map(Tool.from_function, fns)}
    state = State.from_records({"notes": []})
    return Gateway(Environment(name="crashy", tools=tools, seed=state.snapshot()))


def _last(gw: Gateway) -> Any:
    return list(gw.instance().trajectory.records())[-1]


@pytest.mark.parametrize(
    ("name", "message", "raised_at"),
    [
        ("crashes", "KeyError: 'oops'", 'raise KeyError("oops")'),
        ("crashes_async", "ValueError: async bug é", 'raise ValueError("async bug é")'),
        ("crashes_blocking", "ZeroDivisionError: in a thread", "raise ZeroDivisionError"),
    ],
)
async def test_the_record_keeps_the_traceback_the_agent_reads_one_line(
    gw: Gateway, name: str, message: str, raised_at: str
) -> None:
    out = await gw.call(AGENT, name, {})
    assert out.error is not None and out.error.kind == "tool_error"
    assert out.error.message == message
    assert out.text == f"Error: {message}"  # what MCP and /step answer
    assert "Traceback" not in out.text
    record = _last(gw)
    assert record.error == out.error
    trace = record.detail
    assert trace.startswith("Traceback (most recent call last):")
    assert raised_at in trace and trace.endswith(message)
    assert __file__ in trace
    assert "gateway/gateway.py" not in trace  # the gateway's own frames are left out
    line = json.loads(record_line(record))
    assert line["detail"] == trace
    # the trajectory's own JSONL (rollouts, run folders) keeps it, byte for byte the same
    assert Trajectory.read_jsonl(gw.instance().trajectory.to_jsonl())[-1] == record


async def test_a_deliberate_failure_or_a_success_has_no_traceback(gw: Gateway) -> None:
    out = await gw.call(AGENT, "refuses", {})
    assert out.error is not None and out.error.message == "not allowed"
    assert _last(gw).detail is None
    await gw.call(AGENT, "nope", {})
    assert _last(gw).detail is None


async def test_a_long_traceback_is_cut_in_the_middle(gw: Gateway) -> None:
    out = await gw.call(AGENT, "crashes", {"depth": 400})
    assert out.error is not None and out.error.message == "KeyError: 'oops'"
    trace = _last(gw).detail
    assert len(trace) <= TRACE_LIMIT
    assert trace.startswith("Traceback (most recent call last):")
    assert "characters cut) ..." in trace
    assert trace.endswith("KeyError: 'oops'")
    assert len(crash_trace(RuntimeError("x"), limit=10_000)) < 200


async def test_no_answer_to_a_client_carries_it(gw: Gateway) -> None:
    transport = httpx.ASGITransport(app=create_app(gw))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        body = {"action": "call_tool", "tool_name": "crashes", "arguments": {}}
        step = await client.post("/step", json=body)
        assert step.status_code == 200
        assert step.json()["isError"] is True
        error = step.json()["error"]
        assert (error["kind"], error["message"]) == ("tool_error", "KeyError: 'oops'")
        assert "Traceback" not in step.text
        for query in ("", "?format=records"):
            page = await client.get(f"/trajectory{query}")
            assert page.status_code == 200 and page.text
            assert "Traceback" not in page.text and "_helper" not in page.text
    assert "Traceback" in _last(gw).detail  # still in the record itself
