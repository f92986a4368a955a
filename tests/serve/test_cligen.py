"""The generated CLI: a standalone script over REST /step, run as a real subprocess.

Every run uses `python -I -S` (isolated, no site-packages), so the script cannot import
agentenv or anything else outside the standard library even by accident.
"""

from __future__ import annotations

import ast
import contextlib
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agentenv import Environment, Gateway
from agentenv.cli.cli_command import cli
from agentenv.serve.cligen import (
    cli_spec,
    command_names,
    example_invocation,
    generate_cli,
    render_cli_source,
)

ENV_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: cg-desk
version: 0.2.0
description: A help desk for the generated CLI tests.
roles:
  - name: agent
  - name: supervisor
default_role: agent
state:
  tickets:
    key: id
  reports:
    key: id
seed:
  tickets:
    - {id: T-1, subject: Printer on fire, status: open}
tools:
  - module: tools.py
  - name: get_ticket
    crud: {collection: tickets, op: get}
"""

TOOLS_PY = '''\
from typing import Literal

from agentenv import ToolContext, ToolError, tool


@tool(kind="read")
def read_ticket(ctx: ToolContext, ticket_id: str) -> dict:
    """Read one ticket.

    Args:
        ticket_id: The ticket's id, e.g. T-1.
    """
    return ctx.state.require("tickets", ticket_id)


@tool
def file_report(
    title: str,
    count: int = 3,
    ratio: float = 0.5,
    urgent: bool = False,
    level: Literal["low", "high"] = "low",
    tags: list[str] | None = None,
    extra: dict | None = None,
) -> dict:
    """File a report (100% made up).

    The report is only echoed back.

    Args:
        title: What the report is called.
        count: How many copies.
        ratio: Share of the ink budget.
        urgent: Whether it jumps the queue.
        level: How loud it is.
        tags: Labels for the report.
        extra: Anything else, as an object.
    """
    return {
        "title": title, "count": count, "ratio": ratio, "urgent": urgent,
        "level": level, "tags": tags, "extra": extra,
    }


@tool
def refuse(reason: str) -> dict:
    """Fail on purpose with the given reason."""
    raise ToolError(reason)


@tool(roles=["supervisor"])
def close_ticket(ctx: ToolContext, ticket_id: str) -> dict:
    """Close a ticket (supervisors only)."""
    return ctx.state.update("tickets", ticket_id, {"status": "closed"})


@tool(kind="read")
def whoami(ctx: ToolContext) -> dict:
    """Who is calling, and on which instance."""
    return {"role": ctx.principal.role, "instance": ctx.instance_id}


@tool(kind="read")
def ping(loud: bool) -> str:
    """Answer pong (a required boolean, a text result)."""
    return "PONG" if loud else "pong"
'''

Run = Callable[..., subprocess.CompletedProcess[str]]


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("cg-desk")
    (folder / "env.yaml").write_text(ENV_YAML, encoding="utf-8")
    (folder / "tools.py").write_text(TOOLS_PY, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def env(env_dir: Path) -> Environment:
    return Environment.load(env_dir)


@pytest.fixture(scope="module")
def script(env: Environment, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return generate_cli(env, tmp_path_factory.mktemp("bin"))


def _clean_env(extra: dict[str, str] | None) -> dict[str, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AGENTENV_")}
    environ.update(extra or {})
    return environ


def run_script(
    path: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 30
) -> subprocess.CompletedProcess[str]:
    """Run a generated script isolated from site-packages; never a traceback."""
    done = subprocess.run(
        [sys.executable, "-I", "-S", str(path), *args],
        capture_output=True,
        text=True,
        env=_clean_env(env),
        timeout=timeout,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


@pytest.fixture
def run(script: Path) -> Run:
    """`run(*args, env=None)` runs the desk script."""
    return lambda *args, **kw: run_script(script, *args, **kw)


@pytest.fixture(scope="module")
def server(env: Environment, live_server: Callable[..., Any]) -> Iterator[str]:
    """A real uvicorn server over the desk, in trusted local mode."""
    with live_server(Gateway(env)) as url:
        yield url


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def payload(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.returncode == 0, (done.returncode, done.stderr)
    return json.loads(done.stdout)


# -- the file ----------------------------------------------------------------------------


def test_the_script_is_executable_with_a_shebang_and_a_header(script: Path) -> None:
    assert script.name == "cg-desk"
    assert os.access(script, os.X_OK)
    lines = script.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "#!/usr/bin/env python3"
    assert lines[1].startswith("# Generated by agentenv") and '"cg-desk"' in lines[1]
    assert lines[2].startswith('"""')


def test_the_script_imports_only_the_standard_library(script: Path) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module
            imported.add(node.module.split(".")[0])
    assert imported
    assert imported <= set(sys.stdlib_module_names), imported - set(sys.stdlib_module_names)


def test_the_tools_are_embedded_as_one_json_literal(script: Path, env: Environment) -> None:
    tree = ast.parse(script.read_text(encoding="utf-8"))
    spec_nodes = [
        n
        for n in tree.body
        if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "SPEC" for t in n.targets)
    ]
    assert len(spec_nodes) == 1
    call = spec_nodes[0].value
    assert isinstance(call, ast.Call) and isinstance(call.args[0], ast.Constant)
    spec = json.loads(call.args[0].value)
    assert spec["name"] == "cg-desk" and spec["version"] == "0.2.0"
    assert {t["tool"] for t in spec["tools"]} == set(env.tools)


@pytest.mark.skipif(shutil.which("python3") is None, reason="no python3 on PATH")
def test_the_script_runs_by_itself(script: Path) -> None:
    done = subprocess.run(
        [str(script), "--version"], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "cg-desk 0.2.0" in done.stdout


# -- help and usage ------------------------------------------------------------------------


def test_help_lists_every_tool_the_exit_codes_and_the_env_vars(run: Run) -> None:
    done = run("--help")
    assert done.returncode == 0
    out = done.stdout
    for command in ("list-tools", "read-ticket", "file-report", "close-ticket", "get-ticket"):
        assert command in out
    assert "(read_ticket)" in out  # the exact tool name works as an alias
    assert "Read one ticket." in out
    for var in ("AGENTENV_URL", "AGENTENV_ROLE", "AGENTENV_TOKEN"):
        assert var in out
    assert "exit status" in out and "3  the server cannot be reached" in out


def test_command_help_shows_types_choices_defaults_and_descriptions(run: Run) -> None:
    done = run("file-report", "--help")
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())  # argparse wraps lines
    assert "File a report (100% made up)." in out
    assert "The report is only echoed back." in out
    assert "required options: --title STRING What the report is called." in out
    assert "--count INTEGER How many copies. (integer; default: 3)" in out
    assert "--ratio NUMBER Share of the ink budget. (number; default: 0.5)" in out
    assert "--urgent, --no-urgent Whether it jumps the queue. (boolean; default: false)" in out
    assert "--level {low,high} How loud it is. (string; default: low)" in out
    assert "--tags JSON Labels for the report. (JSON array of string)" in out
    assert "--extra JSON Anything else, as an object. (JSON object)" in out


def test_the_alias_gives_the_same_command(run: Run) -> None:
    done = run("read_ticket", "--help")
    assert done.returncode == 0
    assert "--ticket-id STRING" in done.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["file-report"], "the following arguments are required: --title"),
        (["ping"], "the following arguments are required: --loud/--no-loud"),
        (["file-report", "--title", "x", "--count", "many"], "expected an integer"),
        (["file-report", "--title", "x", "--ratio", "nan"], "expected a finite number"),
        (["file-report", "--title", "x", "--level", "medium"], "invalid choice: 'medium'"),
        (["file-report", "--title", "x", "--tags", "a,b"], "expected a JSON array"),
        (["file-report", "--title", "x", "--tags", '{"a": 1}'], "expected a JSON array"),
        (["file-report", "--title", "x", "--extra", "[1]"], "expected a JSON object"),
        (["file-report", "--title", "x", "--bogus", "1"], "unrecognized arguments: --bogus"),
        (["file-report", "--tit", "x"], "required: --title"),  # no abbreviations
        (["no-such-tool"], "invalid choice: 'no-such-tool'"),
        ([], "required: COMMAND"),
        (["--timeout", "0", "list-tools"], "expected a positive number of seconds"),
        (["--url", "ftp://example.org", "list-tools"], "--url: expected an http(s) URL"),
        (["--role", "ag\nent", "whoami"], "--role: only printable ASCII"),
    ],
)
def test_usage_errors_exit_2(run: Run, args: list[str], message: str) -> None:
    done = run(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert done.stdout == ""


def test_a_bad_timeout_in_the_environment_is_a_usage_error(run: Run) -> None:
    done = run("list-tools", env={"AGENTENV_TIMEOUT": "soon"})
    assert done.returncode == 2
    assert "--timeout" in done.stderr


# -- against a real server ------------------------------------------------------------------


def test_call_a_tool_prints_its_structured_result(run: Run, server: str) -> None:
    done = run("--url", server, "read-ticket", "--ticket-id", "T-1")
    assert payload(done) == {"id": "T-1", "subject": "Printer on fire", "status": "open"}
    assert done.stderr == ""


def test_typed_options_reach_the_tool_with_their_types(run: Run, server: str) -> None:
    args = ["--url", server, "file-report", "--title", "1042", "--count", "7", "--ratio", "2"]
    args += ["--urgent", "--level", "high", "--tags", '["a", "b"]', "--extra", '{"k": [1]}']
    assert payload(run(*args)) == {
        "title": "1042",  # a string option stays text
        "count": 7,
        "ratio": 2,
        "urgent": True,
        "level": "high",
        "tags": ["a", "b"],
        "extra": {"k": [1]},
    }


def test_options_left_out_take_the_tools_defaults(run: Run, server: str) -> None:
    assert payload(run("--url", server, "file-report", "--title", "t", "--no-urgent")) == {
        "title": "t",
        "count": 3,
        "ratio": 0.5,
        "urgent": False,
        "level": "low",
        "tags": None,
        "extra": None,
    }


def test_a_text_result_comes_back_as_structured_content(run: Run, server: str) -> None:
    assert payload(run("--url", server, "ping", "--loud")) == {"result": "PONG"}
    assert payload(run("--url", server, "ping", "--no-loud")) == {"result": "pong"}


def test_list_tools(run: Run, server: str) -> None:
    tools = payload(run("--url", server, "list-tools"))["tools"]
    names = {t["name"] for t in tools}
    assert "read_ticket" in names and "close_ticket" not in names  # default role: agent
    assert all("inputSchema" in t for t in tools)
    supervisor = payload(run("--url", server, "--role", "supervisor", "list-tools"))["tools"]
    assert "close_ticket" in {t["name"] for t in supervisor}


def test_a_tool_error_exits_1_with_the_message_on_stderr(run: Run, server: str) -> None:
    done = run("--url", server, "refuse", "--reason", "not today")
    assert done.returncode == 1
    assert done.stdout == ""
    assert "error: tool_error: not today" in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_missing_record_is_a_tool_error(run: Run, server: str) -> None:
    done = run("--url", server, "get-ticket", "--id", "T-404")
    assert done.returncode == 1
    assert "T-404" in done.stderr


def test_a_denied_role_exits_1(run: Run, server: str) -> None:
    done = run("--url", server, "--role", "agent", "close-ticket", "--ticket-id", "T-1")
    assert done.returncode == 1
    assert "denied" in done.stderr and "close_ticket" in done.stderr


def test_role_from_the_environment_and_after_the_command(run: Run, server: str) -> None:
    assert (
        payload(run("whoami", env={"AGENTENV_URL": server, "AGENTENV_ROLE": "supervisor"}))["role"]
        == "supervisor"
    )
    after = run("whoami", "--url", server, "--role", "supervisor")
    assert payload(after)["role"] == "supervisor"
    # a flag beats the environment variable
    flagged = run("--role", "agent", "whoami", env={"AGENTENV_URL": server, "AGENTENV_ROLE": "x"})
    assert payload(flagged)["role"] == "agent"


def test_instances(run: Run, server: str) -> None:
    request = urllib.request.Request(
        f"{server}/instances",
        data=json.dumps({"id": "cg-1"}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=15) as answer:
        assert answer.status == 201
    done = run("--url", server, "--instance", "cg-1", "--role", "supervisor", "whoami")
    assert payload(done) == {"role": "supervisor", "instance": "cg-1"}
    closed = run(
        "--url", server, "--instance", "cg-1", "--role", "supervisor",
        "close-ticket", "--ticket-id", "T-1",
    )  # fmt: skip
    assert payload(closed)["status"] == "closed"
    # the default instance is untouched
    assert payload(run("--url", server, "read-ticket", "--ticket-id", "T-1"))["status"] == "open"
    env = {"AGENTENV_URL": server, "AGENTENV_INSTANCE": "cg-1"}
    assert payload(run("read-ticket", "--ticket-id", "T-1", env=env))["status"] == "closed"
    unknown = run("--url", server, "--instance", "nope", "whoami")
    assert unknown.returncode == 1
    assert "HTTP 404" in unknown.stderr and "nope" in unknown.stderr


def test_tokens(env: Environment, script: Path, live_server: Callable[..., Any]) -> None:
    with live_server(Gateway(env), tokens={"s3": "agent", "s4": "supervisor"}) as url:
        missing = run_script(script, "--url", url, "whoami")
        assert missing.returncode == 1
        assert "HTTP 401" in missing.stderr and "--token" in missing.stderr
        wrong = run_script(script, "--url", url, "--token", "nope", "whoami")
        assert wrong.returncode == 1 and "unknown bearer token" in wrong.stderr
        ok = run_script(script, "--url", url, "--token", "s3", "whoami")
        assert payload(ok)["role"] == "agent"
        # the role header grants nothing once tokens are configured
        header = run_script(script, "--url", url, "--token", "s3", "--role", "supervisor", "whoami")
        assert payload(header)["role"] == "agent"
        from_env = run_script(script, "whoami", env={"AGENTENV_URL": url, "AGENTENV_TOKEN": "s4"})
        assert payload(from_env)["role"] == "supervisor"


def test_a_closed_port_exits_3_with_one_clear_line(run: Run) -> None:
    url = f"http://127.0.0.1:{closed_port()}"
    done = run("--url", url, "read-ticket", "--ticket-id", "T-1")
    assert done.returncode == 3
    assert done.stdout == ""
    assert f"error: cannot reach {url}" in done.stderr
    assert done.stderr.count("\n") == 1


# -- servers that misbehave -------------------------------------------------------------------


class _Bad(http.server.BaseHTTPRequestHandler):
    """Answers by path: /html/step (502 HTML), /text/step (200 non-JSON),
    /crash/step (500 JSON error), /slow/step (no answer for 5 s)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        kind = self.path.split("/")[1]
        if kind == "slow":
            time.sleep(5)
        status, body, ctype = {
            "html": (502, b"<html>Bad Gateway</html>", "text/html"),
            "text": (200, b"hello", "text/plain"),
            "crash": (
                500,
                b'{"error": {"kind": "internal", "message": "oops"}}',
                "application/json",
            ),
        }.get(kind, (200, b"{}", "application/json"))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def bad_server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Bad)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("html", "answered HTTP 502 with something that is not JSON: <html>Bad Gateway</html>"),
        ("text", "answered HTTP 200 with something that is not JSON: hello"),
        ("crash", "the server failed (HTTP 500): internal: oops"),
    ],
)
def test_bad_answers_exit_3(run: Run, bad_server: str, path: str, message: str) -> None:
    done = run("--url", f"{bad_server}/{path}", "whoami")
    assert done.returncode == 3
    assert message in done.stderr
    assert done.stderr.count("\n") == 1


def test_no_answer_in_time_exits_3(run: Run, bad_server: str) -> None:
    done = run("--url", f"{bad_server}/slow", "--timeout", "0.3", "whoami")
    assert done.returncode == 3
    assert "no answer from" in done.stderr and "within 0.3 s" in done.stderr


# -- generation ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["system", " system "])
def test_a_reserved_role_gets_no_generated_cli(env: Environment, tmp_path: Path, role: str) -> None:
    # `system` is the gateway's own principal: a CLI baked for it would list every tool.
    with pytest.raises(ValueError, match="reserved"):
        generate_cli(env, tmp_path / "x", role=role)
    with pytest.raises(ValueError, match="reserved"):
        generate_cli([], tmp_path / "y", name="tools", role=role)
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").iterdir())


def test_a_role_keeps_only_its_tools_and_becomes_the_default(
    env: Environment, tmp_path: Path, server: str
) -> None:
    agent = generate_cli(env, tmp_path / "a", role="agent", name="desk-agent")
    assert agent.name == "desk-agent"
    assert "close-ticket" not in run_script(agent, "--help").stdout
    supervisor = generate_cli(env, tmp_path / "s", role="supervisor", url=server)
    assert "close-ticket" in run_script(supervisor, "--help").stdout
    # the baked-in role and URL are the defaults
    assert payload(run_script(supervisor, "whoami"))["role"] == "supervisor"


def test_the_clocks_get_time_tool_is_included(tmp_path: Path) -> None:
    folder = tmp_path / "env"
    folder.mkdir()
    (folder / "env.yaml").write_text(
        ENV_YAML.replace("tools:\n", "clock:\n  start: 2026-03-02T09:00:00Z\ntools:\n", 1)
    )
    (folder / "tools.py").write_text(TOOLS_PY)
    script = generate_cli(Environment.load(folder), tmp_path / "bin")
    assert "get-time" in run_script(script, "--help").stdout


def test_naming_rules_for_composed_and_clashing_names() -> None:
    names = command_names(["email__send", "read_ticket", "read-ticket", "list-tools", "list_tools"])
    assert names["email__send"] == ("email--send", ["email__send"])
    assert names["read-ticket"] == ("read-ticket", [])  # needs no change: keeps its name
    assert names["read_ticket"] == ("read_ticket", [])  # served under its exact name
    assert names["list-tools"] == ("tool-list-tools", [])  # list-tools is the script's own
    assert names["list_tools"] == ("list_tools", [])
    with pytest.raises(ValueError, match="duplicate"):
        command_names(["a", "a"])


def test_from_a_list_of_mcp_tools_with_odd_schemas(tmp_path: Path) -> None:
    tools = [
        {
            "name": "email__send",
            "description": "Send an email.\n\nLong text.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "to": {"type": "string", "description": "Who."},
                    "help": {"type": "string"},  # --help is argparse's
                    "no_cc": {"type": "boolean"},
                    "priority": {"$ref": "#/$defs/Priority"},
                    "ref": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "size": {"type": ["integer", "null"], "minimum": 1, "maximum": 9},
                    "url": {"type": "string"},  # clashes with the connection option
                },
                "required": ["to", "priority"],
                "$defs": {"Priority": {"type": "integer", "enum": [1, 2, 3]}},
            },
        },
        {"name": "noop", "description": "", "inputSchema": {}},
    ]
    script = generate_cli(tools, tmp_path, name="mail")
    spec = cli_spec("mail", tools)
    flags = {p["name"]: p["flag"] for p in spec["tools"][0]["params"]}
    assert flags == {
        "to": "--to",
        "help": "--help-2",
        "no_cc": "--no-cc",
        "priority": "--priority",
        "ref": "--ref",
        "size": "--size",
        "url": "--url",
    }
    done = run_script(script, "email--send", "--help")
    assert done.returncode == 0, done.stderr
    out = " ".join(done.stdout.split())
    assert "--priority {1,2,3}" in out
    assert "--no-cc, --no-no-cc" in out
    assert "--size INTEGER (integer, >= 1, <= 9)" in out
    assert "text that is not JSON is sent as a string" in out
    assert "Long text." in out
    assert (
        example_invocation("./mail", spec["tools"][0]) == "./mail email--send --to TO --priority 1"
    )
    assert run_script(script, "email__send", "--help").returncode == 0
    assert run_script(script, "noop", "--help").returncode == 0
    # the tool's --url option wins after the command; the connection option goes before it
    down = f"http://127.0.0.1:{closed_port()}"
    done = run_script(
        script, "--url", down, "email--send", "--to", "x", "--priority", "2", "--url", "u"
    )
    assert done.returncode == 3 and down in done.stderr


def test_quotes_and_odd_text_cannot_break_the_literal(tmp_path: Path) -> None:
    nasty = "It''' ends \"\"\" here \\ and ''' again\n# not code\u2028 %(prog)s 100%"
    tools = [
        {
            "name": "odd",
            "description": nasty,
            "inputSchema": {"type": "object", "properties": {"x": {"description": nasty}}},
        }
    ]
    source = render_cli_source("odd", tools)
    compile(source, "odd", "exec")
    script = generate_cli(tools, tmp_path, name="odd")
    done = run_script(script, "odd", "--help")
    assert done.returncode == 0, done.stderr
    assert "It''' ends" in done.stdout and "100%" in done.stdout


def test_bad_names_and_targets(tmp_path: Path, env: Environment) -> None:
    with pytest.raises(ValueError, match="needs a name"):
        generate_cli([], tmp_path)
    for bad in ("", "..", "a/b", "-x"):
        with pytest.raises(ValueError, match="not a usable script name"):
            generate_cli([], tmp_path, name=bad)
    (tmp_path / "cg-desk").mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        generate_cli(env, tmp_path)


def test_regenerating_replaces_the_script(env: Environment, tmp_path: Path) -> None:
    first = generate_cli(env, tmp_path, name="x")
    first.write_text("stale")
    second = generate_cli(env, tmp_path, name="x")
    assert second == first and second.read_text().startswith("#!/usr/bin/env python3")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]  # no temporary file left


# -- the agent-env command --------------------------------------------------------------------


@pytest.fixture
def command() -> typer.Typer:
    app = typer.Typer()
    app.command()(cli)
    return app


def test_the_command_writes_the_script_and_says_how_to_use_it(
    command: typer.Typer, env_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "bin"
    result = CliRunner().invoke(command, [str(env_dir), "--out", str(out), "--role", "agent"])
    assert result.exit_code == 0, result.output
    script = out / "cg-desk"
    assert os.access(script, os.X_OK)
    text = " ".join(result.output.split())
    assert f"wrote {script}" in text and "for role 'agent'" in text
    assert f"{script} read-ticket --ticket-id TICKET_ID" in text
    assert "close-ticket" not in run_script(script, "--help").stdout


def test_the_command_fails_cleanly(command: typer.Typer, tmp_path: Path) -> None:
    result = CliRunner().invoke(command, [str(tmp_path / "missing")])
    assert result.exit_code == 1
    assert "error" in result.output


def test_the_command_warns_about_an_unknown_role(
    command: typer.Typer, env_dir: Path, tmp_path: Path
) -> None:
    result = CliRunner().invoke(command, [str(env_dir), "-o", str(tmp_path), "--role", "ghost"])
    assert result.exit_code == 0
    assert "declares no role 'ghost'" in " ".join(result.output.split())


def test_script_source_is_stable(env: Environment) -> None:
    tools = [t.info() for t in env.tools.values()]
    assert render_cli_source("x", tools) == render_cli_source("x", tools)
