"""What every command shares: the consoles, loading an environment (a document, a folder, or
a running server's URL), stopping its server processes, failing cleanly."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn
from urllib.parse import urlsplit

import typer
from rich.console import Console
from rich.markup import escape

from agentenv.env import Environment
from agentenv.env.servers.base import ServerError
from agentenv.spec import DocumentError

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)  # no hard wraps: paths stay greppable

CARD_PATH = "/.well-known/agent-env.json"

BaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="OpenAI-compatible endpoint for openai:MODEL agents "
        "(e.g. http://localhost:8000/v1); not part of the agent's name.",
    ),
]
"""`--base-url`, declared once for `run`, `rollout` and `agent serve` so that it means one
thing on each (`agents.registry.with_base_url`)."""

SeedValuesOption = Annotated[
    list[str] | None, typer.Option("--seed", help="KEY=VALUE for <key> placeholders.")
]
"""`--seed KEY=VALUE` (repeatable; `parse_pairs`): task seed values on `run`, `rollout` and
`trials`. The generators' random seed is `--random-seed` (`cli.random_seed`)."""

EpisodeTimeoutOption = Annotated[
    float, typer.Option("--timeout", min=0, help="Seconds per episode; 0: no limit.")
]
"""`--timeout S` on `run`, `rollout` and `trials` (default `rollout.episode.DEFAULT_TIMEOUT`
where it is used)."""
_NAME_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 task`, `2 tasks`, `0 tasks`: a count with its noun (`many`, else `word` + s)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def fail(message: str, code: int = 1) -> NoReturn:
    """Print an error (no traceback) and exit."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, emoji=False)
    raise typer.Exit(code)


def load_env(path: Path) -> Environment:
    """Load an environment (a document, a folder holding one, a process environment's
    folder) or exit with the document's or the server's error. A process environment has
    started its first server process by then: pair this with `close_env`."""
    try:
        return Environment.load(path)
    except (DocumentError, ServerError) as exc:
        fail(str(exc))


def close_env(env: Environment) -> None:
    """Stop every server process a loaded environment started (its own and its composed
    children's); a no-op for in-process environments. Safe to call twice."""
    for _namespace, runtime in env.runtimes():
        try:
            runtime.close()
        except Exception as exc:  # shutting down: say it, keep closing the rest
            err_console.print(
                f"[yellow]warning:[/] stopping {escape(runtime.describe())}: {escape(str(exc))}",
                highlight=False,
            )


@contextmanager
def loaded_env(path: Path) -> Iterator[Environment]:
    """`load_env` for the length of a `with` block; its server processes stop at the end."""
    env = load_env(path)
    try:
        yield env
    finally:
        close_env(env)


def parse_headers(pairs: list[str]) -> dict[str, str]:
    """`--header NAME=VALUE` (or `NAME: VALUE`) pairs as a mapping; exits on a bad one."""
    headers: dict[str, str] = {}
    for pair in pairs:
        sep = "=" if "=" in pair and (":" not in pair or pair.index("=") < pair.index(":")) else ":"
        name, found, value = pair.partition(sep)
        if not found or not name.strip():
            fail(f"--header expects NAME=VALUE, got {pair!r}")
        headers[name.strip()] = value.strip()
    return headers


def url_env(
    url: str, headers: dict[str, str] | None = None, token: str | None = None
) -> Environment:
    """An environment fronting a running server (an AgentEnv environment server or any MCP
    server over Streamable HTTP) at `url`: no document, named from the server's card, else
    from the URL's host and port. Exits with one message when nothing answers there or the
    server cannot be understood; pair it with `close_env`."""
    from agentenv.spec.environment import EnvironmentSpec

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        fail(f"--url {url!r}: expected http://HOST:PORT (or https://), optionally with a path")
    headers = dict(headers or {})
    name = _server_name(url, headers, token)
    try:
        spec = EnvironmentSpec.model_validate(
            {
                "apiVersion": "agentenv/v1",
                "kind": "Environment",
                "name": name,
                "server": {"url": url, "headers": headers, "token": token},
            }
        )
        return Environment.from_spec(spec, None)
    except (DocumentError, ServerError) as exc:
        fail(f"--url {url}: {exc}")
    except ValueError as exc:  # pydantic's ValidationError: what the server block refused
        fail(f"--url {url}: {exc}")


def _server_name(url: str, headers: dict[str, str], token: str | None) -> str:
    """The server's card name, where it serves one and the name is usable; else HOST-PORT.
    Exits when nothing answers at the URL's origin."""
    import httpx

    parts = urlsplit(url)
    origin = f"{parts.scheme}://{parts.netloc}"
    fallback = _NAME_SAFE.sub("-", f"{parts.hostname}-{parts.port or parts.scheme}").strip("-._")
    sent = dict(headers)
    if token:
        sent.setdefault("Authorization", f"Bearer {token}")
    try:
        answer = httpx.get(origin + CARD_PATH, headers=sent, timeout=10)
    except httpx.HTTPError as exc:
        reason = str(exc) or type(exc).__name__
        fail(f"--url {url}: no server answers at {origin} ({reason})")
    if answer.status_code != 200:
        return fallback or "server"
    try:
        card = answer.json()
    except ValueError:
        return fallback or "server"
    name = card.get("name") if isinstance(card, dict) else None
    if isinstance(name, str):
        cleaned = _NAME_SAFE.sub("-", name).strip("-._")
        if cleaned:
            return cleaned
    return fallback or "server"


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


def parse_pairs(items: list[str], option: str) -> dict[str, Any]:
    """`KEY=VALUE` options (`--seed`, `--option`) as a mapping, each value read as JSON
    when it is JSON (`3`, `true`, `[1]`), else kept as text; exits on a bad pair."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            fail(f"{option} expects KEY=VALUE, got {item!r}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def print_wide(renderable: Any) -> None:
    """Print a table at its natural width: never squeezed into a narrow (or piped)
    console, so names stay whole and greppable."""
    wide = console.options.update(max_width=1000)
    width = max(console.width, console.measure(renderable, options=wide).maximum)
    Console(width=width, file=console.file, force_terminal=console.is_terminal).print(renderable)
