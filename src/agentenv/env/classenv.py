"""Class-backed environments: a Python class whose public methods are the tools and whose
attributes are the state (the style environment generators such as EnvScaler emit).

How attributes map to state
---------------------------
* A dict attribute becomes a collection of the same name, keyed by `_key` (the dict key,
  as a string). A dict value is stored as `{"_key": k, **value}`; any other value as
  `{"_key": k, "_value": value}`.
* Every other attribute (numbers, strings, lists) is a record of the `_attributes`
  collection: `{"_key": name, "_value": value}`.

Each call builds a fresh instance from the state, runs the method, and writes back only
what changed, inside the gateway's transaction. That costs O(state) per call, which suits
the tens-to-hundreds of records such generated environments hold. A method that raises, or
returns `{"success": false, "error": ...}`, fails the call and leaves the state untouched.
"""

from __future__ import annotations

import inspect
from typing import Any

from agentenv.env.tool import Tool, ToolContext, ToolError, takes_context, tool_options
from agentenv.state import CollectionInfo, State

ATTRIBUTES = "_attributes"
KEY = "_key"
VALUE = "_value"


def _wrap(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, dict) and KEY not in value:
        return {KEY: key, **value}
    return {KEY: key, VALUE: value}


def _unwrap(record: dict[str, Any]) -> Any:
    if VALUE in record and len(record) == 2:
        return record[VALUE]
    return {k: v for k, v in record.items() if k != KEY}


class ClassBinding:
    """Moves a class instance's attributes in and out of a State."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        try:
            initial = cls()
        except TypeError as exc:
            raise TypeError(
                f"{cls.__name__} must be constructible with no arguments to seed its state: {exc}"
            ) from None
        self.initial = initial
        attrs = vars(initial)
        self.tables = [name for name, value in attrs.items() if isinstance(value, dict)]

    def collections(self) -> dict[str, CollectionInfo]:
        """The collections the class's attributes become."""
        return {name: CollectionInfo.create(KEY) for name in [*self.tables, ATTRIBUTES]}

    def records(self, obj: Any) -> dict[str, list[dict[str, Any]]]:
        """An instance's attributes as records per collection."""
        out: dict[str, list[dict[str, Any]]] = {name: [] for name in [*self.tables, ATTRIBUTES]}
        for name, value in vars(obj).items():
            if name in self.tables:
                out[name] = [_wrap(str(k), v) for k, v in value.items()]
            else:
                out[ATTRIBUTES].append(_wrap(name, value))
        return out

    def load(self, state: State) -> Any:
        """A fresh instance whose attributes are copies of the state's records."""
        obj = self.cls.__new__(self.cls)
        for name in self.tables:
            setattr(obj, name, {r[KEY]: _unwrap(r) for r in state.list(name)})
        for record in state.list(ATTRIBUTES):
            setattr(obj, record[KEY], _unwrap(record))
        return obj

    def store(self, obj: Any, state: State) -> None:
        """Write back whatever the instance changed."""
        for coll, rows in self.records(obj).items():
            if coll not in state.collections:
                continue
            seen = set()
            for row in rows:
                seen.add(row[KEY])
                if state.get(coll, row[KEY]) != row:
                    state.put(coll, row)
            for key in state.keys(coll):
                if key not in seen:
                    state.delete(coll, key)


def class_tools(binding: ClassBinding) -> list[Tool]:
    """One Tool per public method (or per `@tool`-marked method, if any is marked)."""
    cls = binding.cls
    methods = {
        name: fn
        for name, fn in inspect.getmembers(cls, inspect.isfunction)
        if not name.startswith("_")
    }
    marked = {n: f for n, f in methods.items() if tool_options(f) is not None}
    chosen = marked or methods
    tools = []
    for name, fn in sorted(chosen.items()):
        base = Tool.from_function(fn, bound_self=True)
        tools.append(_bind(base, binding, name))
    return tools


def _bind(base: Tool, binding: ClassBinding, method: str) -> Tool:
    is_async = base.is_async
    wants_ctx = takes_context(getattr(binding.cls, method), bound_self=True)

    def call(ctx: ToolContext, args: dict[str, Any]) -> Any:
        obj = binding.load(ctx.state)
        bound = getattr(obj, method)
        result = bound(ctx, **args) if wants_ctx else bound(**args)
        return obj, result

    def finish(ctx: ToolContext, obj: Any, result: Any) -> Any:
        if isinstance(result, dict) and result.get("success") is False:
            raise ToolError(str(result.get("error") or result.get("message") or "failed"))
        binding.store(obj, ctx.state)
        return result

    if is_async:

        async def invoke_async(ctx: ToolContext, args: dict[str, Any]) -> Any:
            obj, pending = call(ctx, args)
            return finish(ctx, obj, await pending)

        invoke: Any = invoke_async
    else:

        def invoke(ctx: ToolContext, args: dict[str, Any]) -> Any:
            obj, result = call(ctx, args)
            return finish(ctx, obj, result)

    return base.with_options(invoke=invoke, source=f"class:{binding.cls.__qualname__}.{method}")
