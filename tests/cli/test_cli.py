"""The `agent-env` command: validate, card, tools, call, and the help of each command."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentenv.cli import app

ENV_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: cli-desk
version: 0.3.0
roles:
  - name: agent
  - name: supervisor
state:
  tickets:
    key: id
    schema:
      type: object
      properties:
        id: {type: string}
        subject: {type: string}
      required: [id, subject]
seed:
  tickets:
    - {id: "1042", subject: Printer on fire}
    - {id: "7", subject: Mouse missing}
tools:
  - name: get_ticket
    crud: {collection: tickets, op: get}
  - module: tools.py
clock:
  start: 2026-03-02T09:00:00Z
triggers:
  - id: audit
    when: {type: action, tool: get_ticket}
    actions:
      - {type: tool, tool: echo, args: {code: audit}}
"""

TOOLS_PY = '''\
from agentenv import ToolError, tool


@tool
def echo(code: str, count: int = 1, tags: list[str] | None = None, ref: int | str | None = None) -> dict:
    """Give the arguments back."""
    return {"code": code, "count": count, "tags": tags, "ref": ref}


@tool
def fail_with(message: str) -> dict:
    """Fail with this message."""
    raise ToolError(message)


@tool(roles=["supervisor"])
def purge() -> dict:
    """Delete everything (supervisors only)."""
    return {"purged": True}
'''

AGENT_TOOLS = ["get_ticket", "echo", "fail_with"]


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "cli-desk"
    folder.mkdir()
    (folder / "env.yaml").write_text(ENV_YAML, encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return folder


def run(runner: CliRunner, *args: str):
    result = runner.invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output
    return result


def unwrapped(text: str) -> str:
    """The text with the console's line breaks taken out (it wraps at the terminal width)."""
    return text.replace("\n", "")


# -- validate -------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["folder", "file"])
def test_validate_says_what_the_document_declares(
    runner: CliRunner, env_dir: Path, which: str
) -> None:
    target = env_dir if which == "folder" else env_dir / "env.yaml"
    result = run(runner, "validate", target)
    assert result.exit_code == 0, result.output
    lines = [line.split() for line in result.stdout.splitlines()]
    assert lines[0] == ["ok", "cli-desk", "0.3.0"]
    assert ["roles:", "agent,", "supervisor", "(default", "agent)"] in lines
    assert ["collections:", "1", "with", "2", "seed", "records"] in lines
    assert ["tools:", "4"] in lines
    assert ["triggers:", "1"] in lines
    assert any(line[:3] == ["clock:", "stepped,", "armed"] for line in lines)
    assert result.stderr == ""


BAD_DOCUMENTS = [
    (
        "unknown-collection",
        ENV_YAML.replace(
            "crud: {collection: tickets, op: get}", "crud: {collection: nope, op: get}"
        ),
        "tools[0].crud.collection",
        "nope",
    ),
    (
        "seed-missing-field",
        ENV_YAML.replace('- {id: "7", subject: Mouse missing}', '- {id: "7"}'),
        "seed.tickets[1]",
        "subject",
    ),
    (
        "unknown-field",
        ENV_YAML.replace("version: 0.3.0", "version: 0.3.0\ncolour: blue"),
        "colour",
        "unknown field",
    ),
    (
        "unknown-role",
        ENV_YAML.replace(
            "clock:", "strict_roles: true\naccess:\n  - {role: boss, tools: [echo]}\nclock:"
        ),
        "access[0].role",
        "boss",
    ),
    (
        "bad-yaml",
        ENV_YAML.replace("  tickets:\n    key: id", "  tickets:\n   key: [id"),
        "line",
        "YAML",
    ),
]


@pytest.mark.parametrize(
    ("document", "where", "problem"),
    [c[1:] for c in BAD_DOCUMENTS],
    ids=[c[0] for c in BAD_DOCUMENTS],
)
def test_validate_names_the_file_and_the_place_of_a_problem(
    runner: CliRunner, env_dir: Path, document: str, where: str, problem: str
) -> None:
    (env_dir / "env.yaml").write_text(document, encoding="utf-8")
    result = run(runner, "validate", env_dir)
    assert result.exit_code == 1
    assert result.stdout == ""
    message = unwrapped(result.stderr)
    assert message.startswith("error: ")
    assert str(env_dir / "env.yaml") in message
    assert where in message
    assert problem in message


def test_validate_reports_a_tools_file_that_does_not_import(
    runner: CliRunner, env_dir: Path
) -> None:
    (env_dir / "tools.py").write_text("def broken(:\n", encoding="utf-8")
    result = run(runner, "validate", env_dir)
    assert result.exit_code == 1
    message = unwrapped(result.stderr)
    assert str(env_dir / "env.yaml") in message
    assert "tools[1].module" in message
    assert "SyntaxError" in message


def test_validate_of_a_missing_path_fails_cleanly(runner: CliRunner, tmp_path: Path) -> None:
    result = run(runner, "validate", tmp_path / "nowhere")
    assert result.exit_code == 1
    assert str(tmp_path / "nowhere") in unwrapped(result.stderr)


def test_a_document_error_is_one_line_however_long_the_path(
    runner: CliRunner, tmp_path: Path
) -> None:
    folder = tmp_path / ("a-rather-long-folder-name-" * 3) / "cli-desk"
    folder.mkdir(parents=True)
    (folder / "env.yaml").write_text(
        ENV_YAML.replace("collection: tickets, op: get", "collection: nope, op: get"),
        encoding="utf-8",
    )
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    result = run(runner, "validate", folder)
    assert result.exit_code == 1
    [line] = result.stderr.splitlines()
    assert f"{folder / 'env.yaml'}: tools[0].crud.collection:" in line


# -- card and tools -------------------------------------------------------------------------


def test_card_prints_the_environment_card_as_json(runner: CliRunner, env_dir: Path) -> None:
    result = run(runner, "card", env_dir)
    assert result.exit_code == 0, result.output
    card = json.loads(result.stdout)
    assert card["name"] == "cli-desk"
    assert card["protocolVersion"] == "1.0"
    assert card["url"] == "/agentenv"
    assert card["preferredTransport"] == "JSONRPC"
    assert [t["name"] for t in card["capabilities"]["tools"]] == [*AGENT_TOOLS, "get_time"]
    assert len(card["capabilities"]["extensions"]) == 8  # upstream's gateway extensions


def test_card_follows_the_role(runner: CliRunner, env_dir: Path) -> None:
    result = run(runner, "card", env_dir, "--role", "supervisor")
    assert result.exit_code == 0, result.output
    names = [t["name"] for t in json.loads(result.stdout)["capabilities"]["tools"]]
    assert "purge" in names


def test_tools_prints_a_table_of_what_the_role_may_call(runner: CliRunner, env_dir: Path) -> None:
    result = run(runner, "tools", env_dir, "--role", "agent")
    assert result.exit_code == 0, result.output
    for name in AGENT_TOOLS:
        assert name in result.stdout
    assert "purge" not in result.stdout
    assert "Give the arguments back." in result.stdout
    result = run(runner, "tools", env_dir, "--role", "supervisor")
    assert "purge" in result.stdout


def test_tools_json_lists_mcp_tools(runner: CliRunner, env_dir: Path) -> None:
    result = run(runner, "tools", env_dir, "--json")
    assert result.exit_code == 0, result.output
    tools = json.loads(result.stdout)
    assert [t["name"] for t in tools] == [*AGENT_TOOLS, "get_time"]
    for t in tools:
        assert set(t) == {"name", "description", "inputSchema"}
    echo = next(t for t in tools if t["name"] == "echo")
    assert echo["inputSchema"]["required"] == ["code"]
    supervisor = json.loads(run(runner, "tools", env_dir, "--json", "-r", "supervisor").stdout)
    assert "purge" in [t["name"] for t in supervisor]


# -- call -----------------------------------------------------------------------------------


def call_json(runner: CliRunner, env_dir: Path, *args: str):
    result = run(runner, "call", env_dir, *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_call_refuses_the_reserved_role(runner: CliRunner, env_dir: Path) -> None:
    # In-process is no back door to the gateway's own principal, which passes every rule.
    result = run(runner, "call", env_dir, "get_ticket", "--role", "system", "--arg", "id=1")
    assert result.exit_code == 1
    assert "reserved" in unwrapped(result.output)


def test_call_keeps_a_string_parameter_as_text(runner: CliRunner, env_dir: Path) -> None:
    # "1042" would be a number if parsed as JSON; the key field is a string.
    record = call_json(runner, env_dir, "get_ticket", "--arg", "id=1042")
    assert record == {"id": "1042", "subject": "Printer on fire"}
    out = call_json(runner, env_dir, "echo", "--arg", "code=1042")
    assert out["code"] == "1042"


def test_call_types_other_parameters_as_json(runner: CliRunner, env_dir: Path) -> None:
    out = call_json(
        runner,
        env_dir,
        "echo",
        "--arg",
        "code=x",
        "--arg",
        "count=5",
        "--arg",
        'tags=["a", "b"]',
        "--arg",
        "ref=5",
    )
    assert out == {"code": "x", "count": 5, "tags": ["a", "b"], "ref": 5}


def test_call_takes_json_arguments_and_arg_wins(runner: CliRunner, env_dir: Path) -> None:
    out = call_json(
        runner, env_dir, "echo", "--json", '{"code": "a", "count": 2}', "--arg", "count=3"
    )
    assert out == {"code": "a", "count": 3, "tags": None, "ref": None}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no_such_tool"], "unknown_tool"),
        (["fail_with", "--arg", "message=out of paper"], "tool_error: out of paper"),
        (["echo", "--arg", "count=5"], "invalid_arguments"),
        (["echo", "--arg", "code=x", "--arg", "count=many"], "count"),
        (["purge"], "denied"),
        (["echo", "--arg", "code"], "KEY=VALUE"),
        (["echo", "--json", "{nope"], "--json"),
        (["echo", "--json", "[1]"], "--json"),
    ],
    ids=[
        "unknown",
        "tool-error",
        "missing",
        "wrong-type",
        "denied",
        "bad-arg",
        "bad-json",
        "not-object",
    ],
)
def test_a_failed_call_exits_1_and_says_why(
    runner: CliRunner, env_dir: Path, args: list[str], message: str
) -> None:
    result = run(runner, "call", env_dir, *args)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert message in unwrapped(result.stderr)


def test_call_as_a_role_may_call_its_tools(runner: CliRunner, env_dir: Path) -> None:
    assert call_json(runner, env_dir, "purge", "--role", "supervisor") == {"purged": True}


@pytest.mark.parametrize("text", ["expected list[int]", "use [/etc/hosts] instead", "[bold]x"])
def test_a_tool_error_message_is_printed_as_it_is(
    runner: CliRunner, env_dir: Path, text: str
) -> None:
    result = runner.invoke(app, ["call", str(env_dir), "fail_with", "--arg", f"message={text}"])
    assert result.exit_code == 1
    assert f"tool_error: {text}" in unwrapped(result.stderr)


# -- help and the rest ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "options"),
    [
        ("validate", []),
        ("card", ["--role"]),
        ("tools", ["--role", "--json"]),
        ("call", ["--arg", "--json", "--role"]),
        (
            "serve",
            ["--host", "--port", "--token", "--max-body", "--mode", "--strict-roles", "--any-role"],
        ),
    ],
)
def test_each_command_has_help(runner: CliRunner, command: str, options: list[str]) -> None:
    result = run(runner, command, "--help")
    assert result.exit_code == 0
    assert f"Usage: agent-env {command}" in result.stdout
    for option in options:
        assert option in result.stdout


def test_the_root_help_lists_the_commands(runner: CliRunner) -> None:
    result = run(runner, "--help")
    assert result.exit_code == 0
    for command in ("validate", "card", "tools", "call", "serve"):
        assert command in result.stdout


def test_version(runner: CliRunner) -> None:
    result = run(runner, "--version")
    assert result.exit_code == 0
    assert result.stdout.startswith("agent-env ")


def test_serve_refuses_a_malformed_token_before_listening(runner: CliRunner, env_dir: Path) -> None:
    result = run(runner, "serve", env_dir, "--token", "no-equals-sign")
    assert result.exit_code == 1
    assert "--token" in unwrapped(result.stderr)
    assert "ROLE=SECRET" in unwrapped(result.stderr)


@pytest.mark.parametrize("how", ["flag", "env"])
def test_serve_refuses_an_unknown_mode_before_listening(
    runner: CliRunner, env_dir: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    if how == "env":
        monkeypatch.setenv("GATEWAY_MODE", "turbo")  # upstream's variable
        result = run(runner, "serve", env_dir)
    else:
        result = run(runner, "serve", env_dir, "--mode", "turbo")
    assert result.exit_code == 1
    assert "--mode: expected 'consistent' or 'performance', got 'turbo'" in unwrapped(result.stderr)


def test_serve_refuses_a_bad_document(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: agentenv/v1
            kind: Environment
            name: has spaces
            """
        ),
        encoding="utf-8",
    )
    result = run(runner, "serve", tmp_path, "--port", "1")
    assert result.exit_code == 1
    message = unwrapped(result.stderr)
    assert str(tmp_path / "env.yaml") in message
    assert "name" in message
