"""Arguments are held to the tool's JSON schema where pydantic's lax mode is laxer: a
boolean is neither an integer nor a number (JSON Schema draft 2020-12), while `1.0` is an
integer (and `1.5` is not)."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import BaseModel

from agentenv import Environment, Gateway, Principal
from agentenv.env.tool import Tool, ToolContext
from agentenv.state import State

AGENT = Principal("agent")


class Line(BaseModel):
    sku: str
    qty: int


def pay(ctx: ToolContext, amount: int, price: float = 1.0, note: str = "") -> dict[str, Any]:
    """Pay an amount."""
    return {"amount": amount, "price": price}


def flags(
    ctx: ToolContext,
    on: bool = False,
    maybe: int | None = None,
    either: int | bool = 0,
    size: Literal[1, 2] = 1,
    colour: Literal["red", "blue"] = "red",
    anything: Any = None,
) -> dict[str, Any]:
    """Flags and optional numbers."""
    return {"on": on, "maybe": maybe, "either": either, "anything": anything}


def order(ctx: ToolContext, counts: list[int], lines: list[Line] | None = None) -> int:
    """An order of counts and lines."""
    return sum(counts) + sum(line.qty for line in lines or [])


@pytest.fixture
def gw() -> Gateway:
    tools = {t.name: t for t in map(Tool.from_function, (pay, flags, order))}
    return Gateway(Environment(name="args", tools=tools, seed=State().snapshot()))


REFUSED = [
    ("pay", {"amount": True}, "argument 'amount': expected integer, got boolean true"),
    ("pay", {"amount": False}, "argument 'amount': expected integer, got boolean false"),
    ("pay", {"amount": 1, "price": True}, "argument 'price': expected number, got boolean true"),
    ("flags", {"maybe": True}, "argument 'maybe': expected integer, got boolean true"),
    ("flags", {"size": True}, "argument 'size': expected integer, got boolean true"),
    ("order", {"counts": [1, True]}, "argument 'counts[1]': expected integer, got boolean true"),
    (
        "order",
        {"counts": [], "lines": [{"sku": "a", "qty": False}]},
        "argument 'lines[0].qty': expected integer, got boolean false",
    ),
]


@pytest.mark.parametrize(("tool", "args", "message"), REFUSED)
async def test_a_boolean_is_not_a_number(
    gw: Gateway, tool: str, args: dict[str, Any], message: str
) -> None:
    out = await gw.call(AGENT, tool, args)
    assert not out.ok
    assert out.error is not None and out.error.kind == "invalid_arguments"
    assert out.error.message == f"invalid arguments for {tool!r}: {message}"
    record = list(gw.instance().trajectory.records())[-1]
    assert record.error == out.error and record.args == args  # recorded as given


ACCEPTED = [
    ("pay", {"amount": 1.0}, {"amount": 1, "price": 1.0}),  # 1.0 is an integer
    ("pay", {"amount": 3, "price": 2}, {"amount": 3, "price": 2.0}),  # an integer is a number
    ("flags", {"on": True}, {"on": True, "maybe": None, "either": 0, "anything": None}),
    ("flags", {"either": True}, {"on": False, "maybe": None, "either": True, "anything": None}),
    ("flags", {"anything": True}, {"on": False, "maybe": None, "either": 0, "anything": True}),
    ("order", {"counts": [1, 2.0], "lines": [{"sku": "a", "qty": 1}]}, 4),
]


@pytest.mark.parametrize(("tool", "args", "value"), ACCEPTED)
async def test_what_json_schema_accepts_still_passes(
    gw: Gateway, tool: str, args: dict[str, Any], value: Any
) -> None:
    out = await gw.call(AGENT, tool, args)
    assert out.ok, out.error
    assert out.value == value


async def test_a_fraction_is_not_an_integer(gw: Gateway) -> None:
    out = await gw.call(AGENT, "pay", {"amount": 1.5})
    assert out.error is not None and out.error.kind == "invalid_arguments"
    assert "amount: Input should be a valid integer" in out.error.message


async def test_a_boolean_for_a_string_choice_is_pydantics_to_refuse(gw: Gateway) -> None:
    out = await gw.call(AGENT, "flags", {"colour": True})
    assert out.error is not None and out.error.kind == "invalid_arguments"
    assert "expected integer" not in out.error.message and "colour" in out.error.message


async def test_a_crud_tool_declared_integer_refuses_a_boolean(tmp_path: Any) -> None:
    (tmp_path / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: shop\n"
        "state:\n  items:\n    schema: {type: object, properties: {id: {type: string}, "
        "stock: {type: integer}}}\n"
        "tools:\n  - name: add_item\n    crud: {collection: items, op: create}\n"
    )
    gw = Gateway(Environment.load(tmp_path))
    schema = gw.env.tools["add_item"].input_schema
    assert "stock" in str(schema)
    out = await gw.call(AGENT, "add_item", {"id": "i1", "stock": True})
    assert out.error is not None and out.error.kind == "invalid_arguments", out
    assert "expected integer, got boolean true" in out.error.message
    ok = await gw.call(AGENT, "add_item", {"id": "i2", "stock": 2})
    assert ok.ok, ok.error
