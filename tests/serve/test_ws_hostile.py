"""Hostile frames over a real server: whatever a client sends, every frame gets one answer,
an observation, a state or an error frame (never an internal error, never a traceback), its `id`
repeated, and the connection stays open for the next.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect

from agentenv import Gateway
from agentenv.serve.ws_client import ws_url

TOOLS = [
    "get_ticket",
    "create_ticket",
    "add_note",
    "explode",
    "refuse",
    "tag_set",
    "close_ticket",
    "nope",
    "",
]

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
arguments = st.dictionaries(
    st.sampled_from(["id", "ticket_id", "subject", "text", "reason", "minutes", "x"]),
    values,
    max_size=4,
)
step_data = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["call_tool", "list_tools", "other"]) | values,
        "action": st.sampled_from(["call_tool", "list_tools"]) | values,
        "tool_name": st.sampled_from(TOOLS) | values,
        "arguments": arguments | values,
        "metadata": values,
    },
)
frames = st.fixed_dictionaries(
    {"type": st.sampled_from(["step", "step", "step", "state", "reset"]) | values},
    optional={"data": step_data | values, "id": st.integers() | st.text(max_size=5) | values},
)
texts = st.text(max_size=50) | frames.map(json.dumps) | frames.map(lambda f: json.dumps(f)[:-1])


@pytest.fixture(scope="module")
def served(desk_env, live_server) -> Iterator[tuple[Gateway, str]]:
    gateway = Gateway(desk_env)
    with live_server(gateway) as url:
        yield gateway, url


async def play(url: str, sent: list[Any]) -> list[dict[str, Any]]:
    answers = []
    async with connect(ws_url(url), compression=None) as connection:
        for item in sent:
            await connection.send(item if isinstance(item, str) else json.dumps(item))
            answers.append(json.loads(await connection.recv()))
        await connection.send(json.dumps({"type": "state", "id": "last"}))
        answers.append(json.loads(await connection.recv()))
    return answers


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sent=st.lists(frames | texts, min_size=1, max_size=12))
def test_every_hostile_frame_gets_one_answer_and_the_session_goes_on(served, sent) -> None:
    gateway, url = served
    sent = [f for f in sent if not closes(f)]
    answers = asyncio.run(play(url, sent))
    assert answers[-1]["type"] == "state" and answers[-1]["id"] == "last"
    for item, answer in zip(sent, answers, strict=False):
        assert answer["type"] in {"observation", "state", "error"}, (item, answer)
        text = json.dumps(answer)
        assert "Traceback" not in text
        if answer["type"] == "error":
            assert answer["data"]["error"]["kind"] != "internal_error", (item, answer)
        if isinstance(item, dict) and answer.get("id") is not None:
            assert answer["id"] == item.get("id")
    deadline = time.monotonic() + 10  # the server ends the session once the close is in
    while gateway.instances != ["default"]:  # every reset's instance is dropped then
        assert time.monotonic() < deadline, gateway.instances
        time.sleep(0.01)


def closes(item: Any) -> bool:
    """Whether a frame is a `close` (the session would end there)."""
    if isinstance(item, str):
        try:
            item = json.loads(item)
        except ValueError:
            return False
    return isinstance(item, dict) and item.get("type") == "close"
