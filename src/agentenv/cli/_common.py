"""What every command shares: the consoles, loading an environment, failing cleanly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from agentenv.env import Environment
from agentenv.spec import DocumentError

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)  # no hard wraps: paths stay greppable


def fail(message: str, code: int = 1) -> NoReturn:
    """Print an error (no traceback) and exit."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, emoji=False)
    raise typer.Exit(code)


def load_env(path: Path) -> Environment:
    """Load an environment or exit with the document error."""
    try:
        return Environment.load(path)
    except DocumentError as exc:
        fail(str(exc))


def parse_args(pairs: list[str], json_args: str | None, schema: dict[str, Any]) -> dict[str, Any]:
    """`--arg k=v` pairs (typed by the tool's schema) merged over a `--json` object."""
    args: dict[str, Any] = {}
    if json_args:
        try:
            loaded = json.loads(json_args)
        except json.JSONDecodeError as exc:
            fail(f"--json is not valid JSON: {exc}")
        if not isinstance(loaded, dict):
            fail("--json must be a JSON object")
        args.update(loaded)
    props = schema.get("properties", {})
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            fail(f"--arg expects KEY=VALUE, got {pair!r}")
        kind = props.get(key, {}).get("type")
        if kind == "string" or (isinstance(kind, list) and "string" in kind):
            args[key] = raw  # a string parameter takes the text as it is ("1042" stays text)
            continue
        try:
            args[key] = json.loads(raw)
        except json.JSONDecodeError:
            args[key] = raw
    return args
