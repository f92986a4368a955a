"""@tool and Tool.from_function: schema from type hints and docstrings, ctx, options."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Literal

import pytest
from pydantic import ValidationError

from agentenv import SYSTEM, Principal, Tool, ToolContext, tool
from agentenv.env import ToolOptions, tool_options
from agentenv.state import State


def _ctx(state: State | None = None) -> ToolContext:
    return ToolContext(
        state or State(),
        datetime(2026, 3, 2, 9, 0, tzinfo=UTC),
        Principal("agent", name="ada"),
        "inst-1",
    )


def _run(t: Tool, args: dict, ctx: ToolContext | None = None):
    """Validate like the gateway does, then invoke."""
    values = dict(t.args_model.model_validate(args).__dict__)
    out = t.invoke(ctx or _ctx(), values)
    return asyncio.run(out) if asyncio.iscoroutine(out) else out


@tool(kind="read", duration=5, timeout=2.5, roles=["agent", "supervisor"])
def transfer(
    ctx: ToolContext,
    amount: int,
    to: str,
    currency: Literal["EUR", "USD"] = "EUR",
    memo: str | None = None,
) -> dict:
    """Move money between two accounts.

    Money leaves the caller's account at once.

    Args:
        amount: How much, in cents.
        to: The receiving account.
        currency: Which currency.
    """
    return {
        "amount": amount,
        "to": to,
        "currency": currency,
        "memo": memo,
        "who": ctx.principal.role,
    }


def test_the_decorator_returns_the_function_unchanged() -> None:
    assert transfer.__name__ == "transfer"
    options = tool_options(transfer)
    assert options == ToolOptions(
        kind="read",
        duration=timedelta(seconds=5),
        timeout=2.5,
        roles=("agent", "supervisor"),
    )
    assert tool_options(lambda: None) is None


def test_schema_from_type_hints_and_google_docstring() -> None:
    t = Tool.from_function(transfer)
    assert t.name == "transfer"
    assert (
        t.description
        == "Move money between two accounts.\n\nMoney leaves the caller's account at once."
    )
    assert t.input_schema == {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "amount": {"type": "integer", "description": "How much, in cents."},
            "to": {"type": "string", "description": "The receiving account."},
            "currency": {
                "type": "string",
                "enum": ["EUR", "USD"],
                "default": "EUR",
                "description": "Which currency.",
            },
            "memo": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
        },
        "required": ["amount", "to"],
    }
    assert "ctx" not in t.input_schema["properties"]


def test_decorator_options_land_on_the_tool() -> None:
    t = Tool.from_function(transfer)
    assert t.kind == "read"
    assert t.duration == timedelta(seconds=5)
    assert t.timeout == 2.5
    assert t.roles == ("agent", "supervisor")
    assert t.is_async is False
    assert t.blocking is False
    assert t.source.endswith(":transfer")


def test_info_is_what_agents_see() -> None:
    info = Tool.from_function(transfer).info()
    assert info.name == "transfer"
    assert info.input_schema["required"] == ["amount", "to"]
    assert info.model_dump(by_alias=True)["inputSchema"] == info.input_schema


def test_invoke_passes_the_context_and_defaults() -> None:
    t = Tool.from_function(transfer)
    assert _run(t, {"amount": 5, "to": "b"}) == {
        "amount": 5,
        "to": "b",
        "currency": "EUR",
        "memo": None,
        "who": "agent",
    }


def test_extra_arguments_are_rejected() -> None:
    t = Tool.from_function(transfer)
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        t.args_model.model_validate({"amount": 5, "to": "b", "colour": "red"})


def test_missing_and_mistyped_arguments_are_rejected() -> None:
    t = Tool.from_function(transfer)
    with pytest.raises(ValidationError) as info:
        t.args_model.model_validate({"amount": "lots"})
    locs = {e["loc"][0]: e["type"] for e in info.value.errors()}
    assert locs == {"amount": "int_parsing", "to": "missing"}


def test_a_literal_is_an_enum_and_other_values_are_rejected() -> None:
    t = Tool.from_function(transfer)
    with pytest.raises(ValidationError, match="'EUR' or 'USD'"):
        t.args_model.model_validate({"amount": 1, "to": "b", "currency": "GBP"})


def test_a_context_is_found_by_annotation_or_by_the_name_ctx() -> None:
    def by_name(ctx, x: int) -> int:
        return x + (1 if isinstance(ctx, ToolContext) else 0)

    def by_annotation(context: ToolContext, x: int) -> int:
        return x + (1 if isinstance(context, ToolContext) else 0)

    def no_context(x: int) -> int:
        return x

    for fn, expected in ((by_name, 3), (by_annotation, 3), (no_context, 2)):
        t = Tool.from_function(fn)
        assert list(t.input_schema["properties"]) == ["x"]
        assert _run(t, {"x": 2}) == expected


def test_a_context_that_is_not_first_is_an_argument() -> None:
    def odd(x: int, ctx: str = "") -> str:
        return ctx

    assert set(Tool.from_function(odd).input_schema["properties"]) == {"x", "ctx"}


def test_the_context_carries_state_time_principal_and_instance() -> None:
    def look(ctx: ToolContext) -> dict:
        return {
            "records": ctx.state.count("t"),
            "now": ctx.now.isoformat(),
            "who": str(ctx.principal),
            "instance": ctx.instance_id,
        }

    state = State.from_records({"t": [{"id": "1"}]})
    assert _run(Tool.from_function(look), {}, _ctx(state)) == {
        "records": 1,
        "now": "2026-03-02T09:00:00+00:00",
        "who": "ada(agent)",
        "instance": "inst-1",
    }


def test_untyped_parameters_accept_anything_and_keep_defaults() -> None:
    def plain(x, y=3):
        return [x, y]

    t = Tool.from_function(plain)
    assert t.input_schema["properties"] == {"x": {}, "y": {"default": 3}}
    assert t.input_schema["required"] == ["x"]
    assert _run(t, {"x": {"any": "thing"}}) == [{"any": "thing"}, 3]
    # With no docstring, the description falls back to the name.
    assert t.description == "plain"


def test_a_parameter_called_title_is_kept() -> None:
    def rename(title: str) -> str:
        return title

    assert Tool.from_function(rename).input_schema["properties"] == {"title": {"type": "string"}}


def test_nested_types_give_nested_schemas() -> None:
    def tag(ids: list[int], labels: dict[str, str] | None = None) -> int:
        return len(ids)

    t = Tool.from_function(tag)
    assert t.input_schema["properties"]["ids"] == {"type": "array", "items": {"type": "integer"}}
    assert _run(t, {"ids": [1, 2]}) == 2
    with pytest.raises(ValidationError):
        t.args_model.model_validate({"ids": ["x"]})


@pytest.mark.parametrize("fn", [lambda *xs: None, lambda **kw: None])
def test_star_args_cannot_be_tool_parameters(fn) -> None:
    with pytest.raises(TypeError, match=r"\*args and \*\*kwargs cannot be tool parameters"):
        Tool.from_function(fn, name="star")


def test_name_and_description_overrides() -> None:
    @tool(name="pay", description="Pay someone.")
    def transfer_money(to: str) -> str:
        """Ignored docstring."""
        return to

    t = Tool.from_function(transfer_money)
    assert (t.name, t.description) == ("pay", "Pay someone.")
    again = Tool.from_function(transfer_money, name="send", description="Send.")
    assert (again.name, again.description) == ("send", "Send.")
    assert again.args_model.__name__ == "send_args"


def test_document_overrides_win_over_the_decorator() -> None:
    t = Tool.from_function(
        transfer, kind="write", duration=timedelta(minutes=1), timeout=9, roles=["auditor"]
    )
    assert t.kind == "write"
    assert t.duration == timedelta(minutes=1)
    assert t.timeout == 9
    assert t.roles == ("auditor",)


def test_defaults_without_the_decorator() -> None:
    def f(x: int) -> int:
        return x

    t = Tool.from_function(f)
    assert (t.kind, t.duration, t.timeout, t.roles, t.blocking, t.is_async) == (
        "write",
        None,
        None,
        None,
        False,
        False,
    )


def test_durations_in_seconds_become_timedeltas() -> None:
    @tool(duration=1.5)
    def f() -> None:
        return None

    assert Tool.from_function(f).duration == timedelta(seconds=1.5)


def test_blocking_and_async_are_recorded() -> None:
    @tool(blocking=True)
    def slow() -> int:
        return 1

    @tool
    async def fetch(n: int) -> int:
        await asyncio.sleep(0)
        return n * 2

    assert Tool.from_function(slow).blocking is True
    t = Tool.from_function(fetch)
    assert t.is_async is True
    assert _run(t, {"n": 21}) == 42


def test_a_bare_decorator_and_a_called_one_mark_alike() -> None:
    @tool
    def a() -> None:
        return None

    @tool()
    def b() -> None:
        return None

    assert tool_options(a) == tool_options(b) == ToolOptions()


def test_a_method_skips_self_when_bound_self() -> None:
    class Shop:
        def buy(self, item: str, qty: int = 1) -> str:
            """Buy something.

            Args:
                item: What to buy.
            """
            return f"{qty} x {item}"

    t = Tool.from_function(Shop.buy, bound_self=True)
    assert list(t.input_schema["properties"]) == ["item", "qty"]
    assert t.input_schema["properties"]["item"]["description"] == "What to buy."


def test_with_options_replaces_only_what_is_given() -> None:
    t = Tool.from_function(transfer)
    changed = t.with_options(description="New.", kind=None, timeout=1.0)
    assert changed.description == "New."
    assert changed.kind == "read"
    assert changed.timeout == 1.0
    assert t.description.startswith("Move money")  # the original is untouched


def test_principal_text_and_system_principal() -> None:
    assert str(Principal("agent")) == "agent"
    assert str(Principal("agent", name="ada")) == "ada(agent)"
    assert Principal("agent").admin is False
    assert SYSTEM.admin is True and SYSTEM.role == "system"


def test_a_default_value_is_advertised_as_it_is() -> None:
    def new_doc(meta: dict = {"title": "Untitled", "pages": 1}) -> dict:  # noqa: B006
        return meta

    schema = Tool.from_function(new_doc).input_schema
    assert schema["properties"]["meta"]["default"] == {"title": "Untitled", "pages": 1}
