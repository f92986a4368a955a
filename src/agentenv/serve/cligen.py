"""The generated CLI: a standalone script that calls an environment's tools over REST `/step`.

`generate_cli(env, out_dir)` writes `<out_dir>/<env-name>`, an executable Python script that
needs nothing but the standard library (argparse, json, urllib), so it can be copied into any
sandbox an agent works in. The tools are embedded in the script as data (one JSON literal);
the script builds its argparse parser from that data when it runs, so the generated file is
short and readable. This is what `agent-env cli` and a `build_mcp_cli`-style task step use.

Naming rules (documented for users in docs/cli-generated.md):

- a tool becomes the subcommand with every `_` turned into `-`: `read_ticket` is
  `read-ticket`, a composed child's `email__send` is `email--send`; the exact tool name is
  accepted as an alias. On a clash (a tool literally named `read-ticket` next to
  `read_ticket`, or a tool named `list-tools`) the tool whose name needs no change keeps
  it, the other is served under its exact name (or `tool-<name>` as a last resort);
- a parameter becomes the option `--` + its name with every run of characters other than
  letters and digits turned into `-`: `ticket_id` is `--ticket-id`; a boolean is the pair
  `--flag` / `--no-flag`. On a clash the later parameter keeps its exact name
  (`--ticket_id`) or gets a numbered one.

Exit codes of the script: 0 success, 1 the call failed (tool error, invalid arguments,
denied, unknown tool, tool timeout, refused credentials), 2 usage error, 3 the server cannot
be reached, does not answer in time, answers something that is not JSON, or fails (5xx).
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentenv import __version__
from agentenv.env import SYSTEM, Environment, Principal, Tool
from agentenv.gateway import Gateway
from agentenv.gateway.auth import RESERVED_ROLES, reserved_role_message
from agentenv.serve._cli_runtime import _DOC, _RUNTIME
from agentenv.spec.wire import ToolInfo

DEFAULT_URL = "http://127.0.0.1:8765"
"""Where the generated script looks for the server unless told otherwise."""

LIST_TOOLS_COMMAND = "list-tools"
"""The subcommand that asks the server for the tools (`{"action": "list_tools"}`)."""

EXIT_OK = 0
EXIT_CALL_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

_SCALARS = {"string", "integer", "number", "boolean"}
_RESERVED_FLAGS = {"-h", "--help"}
_PYTHON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool}

ToolLike = ToolInfo | Tool | Mapping[str, Any]
"""What `generate_cli` takes besides an Environment: ToolInfo, Tool, or an MCP tool dict
(`name`, `description`, `inputSchema` or `input_schema`)."""


# -- from tools to the embedded data ----------------------------------------------------


def tool_infos(env: Environment, role: str | None = None) -> list[ToolInfo]:
    """The tools of `env` a role may call, as agents see them (`get_time` included when
    the document arms the clock); every tool when `role` is None. A reserved role is a
    ValueError: no served gateway would let the generated CLI act as it."""
    if role is not None and role.strip() in RESERVED_ROLES:
        raise ValueError(reserved_role_message(role.strip()))
    principal = SYSTEM if role is None else Principal(role=role)
    return [t.info() for t in Gateway(env).tools_for(principal)]


def command_name(tool_name: str) -> str:
    """The subcommand a tool gets when nothing clashes: `_` becomes `-`."""
    return tool_name.replace("_", "-")


def option_name(param: str) -> str:
    """The option a parameter gets when nothing clashes: `ticket_id` -> `--ticket-id`."""
    stem = re.sub(r"[^A-Za-z0-9]+", "-", param).strip("-")
    return f"--{stem}" if stem else ""


def command_names(tool_names: Iterable[str]) -> dict[str, tuple[str, list[str]]]:
    """Subcommand and aliases for each tool name, clashes resolved (see the module doc)."""
    names = list(tool_names)
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1})
        raise ValueError(f"duplicate tool names: {', '.join(dupes)}")
    taken = {LIST_TOOLS_COMMAND}
    chosen: dict[str, str] = {}
    # Names that need no change claim themselves first, so `read-ticket` stays itself.
    for name in sorted(names, key=lambda n: command_name(n) != n):
        candidates = [command_name(name), name, f"tool-{name}"]
        pick = next((c for c in candidates if c not in taken and not c.startswith("-")), None)
        number = 2
        while pick is None:
            pick = f"tool-{name}-{number}" if f"tool-{name}-{number}" not in taken else None
            number += 1
        chosen[name] = pick
        taken.add(pick)
    out: dict[str, tuple[str, list[str]]] = {}
    for name in names:
        aliases = []
        if name != chosen[name] and name not in taken and not name.startswith("-"):
            aliases.append(name)
            taken.add(name)
        out[name] = (chosen[name], aliases)
    return out


def _normalise(item: ToolLike) -> dict[str, Any]:
    if isinstance(item, Tool):
        item = item.info()
    if isinstance(item, ToolInfo):
        return {"name": item.name, "description": item.description, "schema": item.input_schema}
    if isinstance(item, Mapping):
        if not isinstance(item.get("name"), str) or not item["name"]:
            raise ValueError(f"a tool needs a non-empty 'name': {dict(item)!r}")
        schema = item.get("inputSchema", item.get("input_schema")) or {}
        if not isinstance(schema, Mapping):
            raise ValueError(f"tool {item['name']!r}: inputSchema must be an object")
        return {
            "name": item["name"],
            "description": str(item.get("description") or ""),
            "schema": dict(schema),
        }
    raise TypeError(f"not a tool: {item!r} (expected ToolInfo, Tool or a mapping)")


def _resolve(node: Any, root: Mapping[str, Any], seen: int = 0) -> dict[str, Any]:
    """Follow local `$ref`s and unwrap a one-item `allOf` (how pydantic wraps references)."""
    if not isinstance(node, Mapping):
        return {}
    node = dict(node)
    while seen < 32:
        seen += 1
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target.get(part) if isinstance(target, Mapping) else None
            rest = {k: v for k, v in node.items() if k != "$ref"}
            node = {**(target if isinstance(target, Mapping) else {}), **rest}
            continue
        all_of = node.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1:
            rest = {k: v for k, v in node.items() if k != "allOf"}
            node = {**_resolve(all_of[0], root, seen), **rest}
            continue
        break
    return node


def _kind(node: Mapping[str, Any], root: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The CLI type of a schema (a JSON type, or `json` for anything else) and the schema
    of its non-null branch."""
    variants = node.get("anyOf") or node.get("oneOf")
    if isinstance(variants, list):
        branches = [_resolve(v, root) for v in variants]
        real = [b for b in branches if b.get("type") != "null"]
        if len(real) != 1:
            return "json", dict(node)
        rest = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
        node = {**real[0], **rest}
    kind = node.get("type")
    if isinstance(kind, list):
        real_types = [k for k in kind if k != "null"]
        kind = real_types[0] if len(real_types) == 1 else None
    enum = node.get("enum", [node["const"]] if "const" in node else None)
    if kind is None and isinstance(enum, list) and enum:
        for name, python in _PYTHON_TYPES.items():
            if all(isinstance(v, python) and not isinstance(v, bool) for v in enum):
                kind = name
                break
    if kind in _SCALARS or kind in ("array", "object"):
        return str(kind), dict(node)
    return "json", dict(node)


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return value if value.strip() and value == value.strip() else json.dumps(value)
    return json.dumps(value, ensure_ascii=False)


def _param_help(
    description: str, kind: str, node: Mapping[str, Any], root: Mapping[str, Any]
) -> str:
    if kind in ("array", "object"):
        what = f"JSON {kind}"
        if kind == "array":
            items_kind, _ = _kind(_resolve(node.get("items", {}), root), root)
            if items_kind != "json":
                what += f" of {items_kind}"
    elif kind == "json":
        what = "JSON value; text that is not JSON is sent as a string"
    else:
        what = kind
    bounds = []
    for key, sign in (
        ("minimum", ">="),
        ("exclusiveMinimum", ">"),
        ("maximum", "<="),
        ("exclusiveMaximum", "<"),
    ):
        if isinstance(node.get(key), int | float) and not isinstance(node.get(key), bool):
            bounds.append(f"{sign} {node[key]}")
    if bounds:
        what += ", " + ", ".join(bounds)
    if "default" in node and node["default"] is not None:
        what += f"; default: {_shown(node['default'])}"
    text = " ".join(description.split())
    return f"{text} ({what})" if text else f"({what})"


def _free(option: str, boolean: bool, taken: set[str]) -> bool:
    """Whether an option (and, for a boolean, its `--no-` twin) is still free."""
    return option not in taken and not (boolean and f"--no-{option[2:]}" in taken)


def _params(tool: Mapping[str, Any]) -> list[dict[str, Any]]:
    schema = tool["schema"]
    properties = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    taken = set(_RESERVED_FLAGS)
    out = []
    for name, raw in properties.items():
        node = _resolve(raw, schema)
        kind, node = _kind(node, schema)
        flag = option_name(name)
        candidates = [flag] if flag else []
        if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            candidates.append(f"--{name}")
        base = flag or "--arg"
        candidates += [f"{base}-{n}" for n in range(2, len(properties) + 3)]

        flag = next(c for c in candidates if _free(c, kind == "boolean", taken))
        param: dict[str, Any] = {
            "name": name,
            "flag": flag,
            "type": kind,
            "required": name in required,
            "help": _param_help(str(node.get("description") or ""), kind, node, schema),
        }
        taken.add(flag)
        if kind == "boolean":
            param["negative"] = f"--no-{flag[2:]}"
            taken.add(param["negative"])
        enum = node.get("enum", [node["const"]] if "const" in node else None)
        if isinstance(enum, list) and enum and kind in ("string", "integer", "number"):
            python = _PYTHON_TYPES[kind]
            if all(isinstance(v, python) and not isinstance(v, bool) for v in enum):
                param["choices"] = list(enum)
        out.append(param)
    return out


def _summary(description: str) -> str:
    first = description.strip().split("\n\n", 1)[0]
    return " ".join(first.split())


def cli_spec(
    name: str,
    tools: Iterable[ToolLike],
    *,
    role: str | None = None,
    url: str | None = None,
    version: str | None = None,
) -> dict[str, Any]:
    """The data a generated script embeds: its name, defaults, and per tool the subcommand,
    aliases, help and options (each with its flag, CLI type, choices and help text)."""
    normalised = [_normalise(t) for t in tools]
    names = command_names(t["name"] for t in normalised)
    entries = []
    for tool in normalised:
        command, aliases = names[tool["name"]]
        description = tool["description"].strip() or tool["name"]
        entries.append(
            {
                "tool": tool["name"],
                "command": command,
                "aliases": aliases,
                "summary": _summary(description),
                "description": description,
                "params": _params(tool),
            }
        )
    return {
        "name": name,
        "version": version,
        "generator": f"agentenv {__version__}",
        "url": url or DEFAULT_URL,
        "role": role,
        "tools": entries,
    }


# -- the script ---------------------------------------------------------------------------


def _json_literal(data: Any) -> str:
    try:
        text = json.dumps(data, indent=2, ensure_ascii=False)
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate somewhere: keep the file valid UTF-8
        text = json.dumps(data, indent=2)
    # Inside r'''...''', only a run of three quotes could end the literal; `'` only
    # occurs inside JSON strings, where \u0027 means the same thing.
    return text.replace("'''", "\\u0027\\u0027\\u0027")


def render_cli_source(
    name: str,
    tools: Iterable[ToolLike],
    *,
    role: str | None = None,
    url: str | None = None,
    version: str | None = None,
) -> str:
    """The source of the generated script for these tools (see `generate_cli`)."""
    spec = cli_spec(name, tools, role=role, url=url, version=version)
    made_for = json.dumps(name) + (f" version {json.dumps(version)}" if version else "")
    if role is not None:
        made_for += f", role {json.dumps(role)}"
    header = (
        "#!/usr/bin/env python3\n"
        f"# Generated by agentenv {__version__} (agent-env cli / agentenv.serve.cligen) for "
        f"environment {made_for}: regenerate rather than edit.\n"
    )
    return (
        header + _DOC + "\nSPEC = json.loads(r'''\n" + _json_literal(spec) + "\n''')\n" + _RUNTIME
    )


def _check_name(name: str) -> str:
    if not name or name in (".", "..") or any(c in name for c in "/\\\0") or name.startswith("-"):
        raise ValueError(f"not a usable script name: {name!r}")
    return name


def generate_cli(
    env: Environment | Iterable[ToolLike],
    out_dir: str | os.PathLike[str],
    *,
    name: str | None = None,
    role: str | None = None,
    url: str | None = None,
) -> Path:
    """Write the generated CLI for `env` to `<out_dir>/<name>` and return its path.

    `env` is an Environment (its tools, or with `role` only those that role may call) or a
    list of tools (ToolInfo, Tool, or MCP-shaped dicts; then `name` is required). `name`
    defaults to the environment's name. `role` also becomes the script's default role and
    `url` its default server URL (both still overridden by flags and environment variables).
    The script is executable, needs only Python 3.8+ and its standard library, and is
    replaced atomically if it exists. Raises ValueError for a bad name or a path that is a
    directory, or a reserved role.
    """
    if role is not None and role.strip() in RESERVED_ROLES:
        raise ValueError(reserved_role_message(role.strip()))
    if isinstance(env, Environment):
        tools: list[ToolLike] = list(tool_infos(env, role))
        version: str | None = env.version
        name = name or env.name
    else:
        tools = list(env)
        version = None
        if name is None:
            raise ValueError("generate_cli needs a name when given a list of tools")
    _check_name(name)
    source = render_cli_source(name, tools, role=role, url=url, version=version)
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / name
    if target.is_dir():
        raise ValueError(f"{target} is a directory; choose another --out or --name")
    fd, temp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(source)
        os.chmod(temp, 0o755)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def example_invocation(script: str | os.PathLike[str], tool: Mapping[str, Any]) -> str:
    """A shell line calling one tool of a spec made by `cli_spec`, with placeholder values
    for its required options."""
    parts = [str(script), tool["command"]]
    samples = {"integer": "1", "number": "1.5", "array": "'[]'", "object": "'{}'", "json": "1"}
    for param in tool["params"]:
        if not param["required"]:
            continue
        if param["type"] == "boolean":
            parts.append(param["flag"])
            continue
        if "choices" in param:
            value = str(param["choices"][0])
        else:
            value = samples.get(param["type"], param["name"].upper())
        parts += [param["flag"], value]
    return " ".join(parts)
