"""Composition: many environments served as one.

A child's tools become `<alias>__<tool>`, its collections `<alias>__<collection>` and its
trigger ids `<alias>__<id>`; its tools see their own collections through a StateView, so
child code runs unchanged. The double underscore is the one separator every MCP client
and function-calling API accepts in a tool name (`^[a-zA-Z0-9_-]{1,64}$`), and a single
underscore stays free for ordinary names. Roles are the union of everyone's; the
parent's clock wins, else the first child's that is armed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentenv.env.tool import Tool, ToolContext
from agentenv.spec.environment import AccessRuleSpec
from agentenv.spec.triggers import TriggerRegistration, TriggerSpec
from agentenv.state import SEPARATOR, CollectionInfo, StateView


def namespaced(alias: str, name: str) -> str:
    """A child's name as the composed environment serves it."""
    return f"{alias}{SEPARATOR}{name}"


def child_tool(alias: str, tool: Tool) -> Tool:
    """A child's tool renamed into its namespace and bound to its part of the state."""
    inner = tool.invoke

    def scoped(ctx: ToolContext) -> ToolContext:
        return ctx.on(StateView(ctx.state, alias))

    if tool.is_async:

        async def invoke_async(ctx: ToolContext, args: dict[str, Any]) -> Any:
            view = scoped(ctx)
            try:
                return await inner(view, args)
            finally:
                ctx.spent += view.spent

        invoke: Any = invoke_async
    else:

        def invoke(ctx: ToolContext, args: dict[str, Any]) -> Any:
            view = scoped(ctx)
            try:
                return inner(view, args)
            finally:
                ctx.spent += view.spent

    return tool.with_options(
        name=namespaced(alias, tool.name), invoke=invoke, source=f"{alias}:{tool.source}"
    )


def child_collections(alias: str, infos: dict[str, CollectionInfo]) -> dict[str, CollectionInfo]:
    """A child's collections, renamed."""
    return {namespaced(alias, name): info for name, info in infos.items()}


def child_access(alias: str, rules: Iterable[AccessRuleSpec]) -> list[AccessRuleSpec]:
    """A child's access rules, addressing its renamed tools (`*` becomes `<alias>__*`)."""
    out = []
    for rule in rules:
        tools = (
            [namespaced(alias, "*")]
            if rule.tools == "*"
            # get_time belongs to the one clock, so it keeps its name
            else [t if t == "get_time" else namespaced(alias, t) for t in rule.tools]
        )
        out.append(rule.model_copy(update={"tools": tools}))
    return out


def child_triggers(
    alias: str, registration: TriggerRegistration, roles: Iterable[str]
) -> list[TriggerSpec]:
    """A child's triggers with ids and tool names renamed. Each keeps whom it watched in
    the child (explicitly, so that the parent's registration cannot narrow it)."""
    out = []
    for trigger in registration.triggers:
        data = trigger.model_dump(by_alias=True, exclude_unset=True)
        data["id"] = namespaced(alias, trigger.id)
        if trigger.watch_roles is None:
            watched = registration.watch_roles
            data["watch_roles"] = list(watched) if watched is not None else list(roles)
        when = data["when"]
        if "tool" in when:
            when["tool"] = namespaced(alias, when["tool"])
        for step in when.get("check", []):
            step["tool"] = namespaced(alias, step["tool"])
        for action in data["actions"]:
            if action.get("type") == "tool":
                action["tool"] = namespaced(alias, action["tool"])
            if action.get("type") == "permission":
                tools = action["tools"]
                action["tools"] = (
                    [namespaced(alias, "*")]
                    if tools == "*"
                    else [namespaced(alias, t) for t in tools]
                )
            if action.get("verify"):
                action["verify"]["tool"] = namespaced(alias, action["verify"]["tool"])
        out.append(TriggerSpec.model_validate(data))
    return out
