"""The human agent: a person at the terminal plays the agent.

For each prompt the person sees the prompt (and the system prompt), then, until they type
`done`: a numbered table of the tools their role may call, a choice of tool (by number or
name), one question per argument (typed by the tool's input schema: integers, numbers,
yes/no, choices of an enum, JSON for lists and objects; Enter keeps an optional argument's
default), and the result. At `done` they type the final response.

The questions run in a worker thread, so the event loop (the clock, triggers, other
agents) keeps going while the person thinks. The console and the input function can be
given, which is how tests (and other front ends) drive it without a terminal.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.prompt import Prompt
from rich.table import Table
from rich.text import Text

from agentenv.agents.base import AgentError, AgentTurn
from agentenv.gateway.results import CallResult
from agentenv.spec.wire import ToolInfo

DONE = "done"
_TRUE = ("y", "yes", "true", "1")
_FALSE = ("n", "no", "false", "0")


class _Invalid(ValueError):
    """An answer that does not fit the argument's schema (the message says why)."""


class _InputStream:
    """A `readline` over an input function, for rich's `stream=` (EOF on exhaustion)."""

    def __init__(self, read: Callable[[], str], console: Console) -> None:
        self._read = read
        self._console = console

    def readline(self) -> str:
        try:
            line = self._read()
        except StopIteration:
            raise EOFError from None
        self._console.print(line, markup=False, highlight=False)  # echo: a readable transcript
        return line


def _types(schema: dict[str, Any]) -> tuple[list[str], bool]:
    """The JSON types an argument accepts (null aside), and whether null is one of them."""
    found: list[str] = []
    raw = schema.get("type")
    if isinstance(raw, str):
        found.append(raw)
    elif isinstance(raw, list):
        found.extend(t for t in raw if isinstance(t, str))
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            if isinstance(option, dict):
                kinds, nullable = _types(option)
                found.extend(kinds or ([] if nullable else ["any"]))
                if nullable:
                    found.append("null")
    nullable = "null" in found
    kinds = list(dict.fromkeys(t for t in found if t != "null"))
    return kinds, nullable


def convert(schema: dict[str, Any], text: str) -> Any:
    """An answer typed at the terminal as the value `schema` asks for; _Invalid if not."""
    kinds, nullable = _types(schema)
    if nullable and text == "null":
        return None
    if "enum" in schema:
        for choice in schema["enum"]:
            if text == str(choice):
                return choice
            if not isinstance(choice, str):
                try:
                    if json.loads(text) == choice:
                        return choice
                except json.JSONDecodeError:
                    pass
        raise _Invalid(f"choose one of {', '.join(str(c) for c in schema['enum'])}")
    if not kinds:
        kinds = ["any"]
    problems = []
    for kind in kinds:
        try:
            return _as(kind, text)
        except _Invalid as exc:
            problems.append(str(exc))
    raise _Invalid(" or ".join(problems))


def _try_json(text: str, error: type[Exception]) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"not JSON ({exc.msg})") from None


def _as(kind: str, text: str) -> Any:
    if kind == "string":
        return text
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise _Invalid("expected a whole number") from None
    if kind == "number":
        try:
            value = float(text)
        except ValueError:
            raise _Invalid("expected a number") from None
        plain = value.is_integer() and not any(c in text.lower() for c in ".e")
        return int(value) if plain else value
    if kind == "boolean":
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise _Invalid("expected yes or no")
    if kind == "array":
        value = _try_json(text, _Invalid)
        if not isinstance(value, list):
            raise _Invalid("expected a JSON list, like [1, 2]")
        return value
    if kind == "object":
        value = _try_json(text, _Invalid)
        if not isinstance(value, dict):
            raise _Invalid('expected a JSON object, like {"key": "value"}')
        return value
    # no type, or one we do not know: JSON if it parses, else the text itself
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


class HumanAgent:
    """A person answers the prompt by choosing tools at a terminal."""

    name = "human"

    def __init__(
        self, console: Console | None = None, input_fn: Callable[[], str] | None = None
    ) -> None:
        """`console` shows everything (default: the terminal); `input_fn` returns the next
        line the person typed (default: the terminal; StopIteration or EOFError ends input)."""
        self.console = console or Console()
        self._stream = _InputStream(input_fn, self.console) if input_fn is not None else None

    async def _ask(self, label: str) -> str:
        def ask() -> str:
            return Prompt.ask(
                label, console=self.console, stream=self._stream, default="", show_default=False
            )

        try:
            answer = await asyncio.to_thread(ask)
        except EOFError:
            raise AgentError("the person at the terminal closed the input") from None
        return (answer or "").strip()

    async def run_turn(self, turn: AgentTurn) -> str:
        """Let the person call tools, then take their final response."""
        self._show_prompt(turn)
        tools = turn.tools.list_tools()
        calls = 0
        while tools:
            if turn.max_turns is not None and calls >= turn.max_turns:
                self.console.print(f"[yellow]That was {calls} call(s), the most for this prompt.")
                break
            info = await self._choose_tool(tools)
            if info is None:
                break
            args = await self._ask_arguments(info)
            result = await turn.tools.call(info.name, args)
            calls += 1
            self._show_result(info.name, result)
        if not tools:
            self.console.print("[yellow]No tools are available to you for this prompt.")
        return await self._ask("[bold]Your final response")

    def _show_prompt(self, turn: AgentTurn) -> None:
        if turn.system_prompt:
            self.console.print(
                Panel(Text(turn.system_prompt), title="system prompt", border_style="dim")
            )
        title = f"prompt {turn.prompt_id} for {turn.agent_name} (role {turn.role})"
        self.console.print(Panel(Text(turn.prompt), title=title, border_style="cyan"))

    def _tool_table(self, tools: list[ToolInfo]) -> Table:
        table = Table(title="Tools", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column("tool")
        table.add_column("arguments")
        table.add_column("description")
        for number, info in enumerate(tools, start=1):
            properties = info.input_schema.get("properties") or {}
            required = set(info.input_schema.get("required") or [])
            arguments = ", ".join(n if n in required else f"[{n}]" for n in properties)
            table.add_row(
                str(number),
                Text(info.name),
                Text(arguments),
                Text(_first_line(info.description)),
            )
        return table

    async def _choose_tool(self, tools: list[ToolInfo]) -> ToolInfo | None:
        self.console.print(self._tool_table(tools))
        by_name = {info.name: info for info in tools}
        while True:
            answer = await self._ask(f"Tool (1-{len(tools)} or a name; {DONE} to answer)")
            if answer.lower() == DONE:
                return None
            if answer.isdigit() and 1 <= int(answer) <= len(tools):
                return tools[int(answer) - 1]
            if answer in by_name:
                return by_name[answer]
            self.console.print(
                Text(f"No tool {answer!r}: type a number from the table, a name, or {DONE}.")
            )

    async def _ask_arguments(self, info: ToolInfo) -> dict[str, Any]:
        schema = info.input_schema
        required = set(schema.get("required") or [])
        args: dict[str, Any] = {}
        for name, prop in (schema.get("properties") or {}).items():
            prop = prop if isinstance(prop, dict) else {}
            kinds, nullable = _types(prop)
            shown = " or ".join(kinds) if kinds else "any"
            if nullable:
                shown += " or null"
            if "enum" in prop:
                shown = "one of " + ", ".join(str(c) for c in prop["enum"])
            if "boolean" in kinds:
                shown += ", y/n"
            notes = [shown]
            if "default" in prop:
                notes.append(f"Enter for {json.dumps(prop['default'])}")
            elif name not in required:
                notes.append("optional, Enter to leave out")
            description = prop.get("description")
            if description:
                self.console.print(Text(f"  {name}: {description}", style="dim"))
            label = f"{escape(info.name)}.[bold]{escape(name)}[/bold] ({escape('; '.join(notes))})"
            while True:
                answer = await self._ask(label)
                if answer == "":
                    if name not in required or "default" in prop:
                        break
                    self.console.print(f"[red]{name} is required.")
                    continue
                try:
                    args[name] = convert(prop, answer)
                except _Invalid as exc:
                    self.console.print(Text(f"{name}: {exc}", style="red"))
                    continue
                break
        return args

    def _show_result(self, tool: str, result: CallResult) -> None:
        if result.ok:
            panel = Panel(Text(result.text), title=f"{tool}: ok", border_style="green")
        else:
            panel = Panel(Text(result.text), title=f"{tool}: failed", border_style="red")
        self.console.print(panel)
