"""Procedural environment checks (`agent-env check`): a clean env passes, broken tools are
caught, the example envs pass, the report is deterministic, bad input is a clean error."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer
from pydantic import create_model
from typer.testing import CliRunner

from agentenv.cli import app as agent_env
from agentenv.cli.check_command import check
from agentenv.env import Environment, Tool
from agentenv.synth import CheckError, CheckReport, check_environment
from agentenv.synth.check import crash_name

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envs"

ENV_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: notebook
roles:
  - name: writer
  - name: reader
  - name: admin
default_role: writer
state:
  notes:
    key: id
    schema:
      type: object
      required: [id, title, stars]
      properties:
        id: {type: string, pattern: "^N-[0-9]{3}$"}
        title: {type: string, minLength: 1}
        stars: {type: integer, minimum: 0, maximum: 5}
        owner: {type: string}
seed:
  notes:
    - {id: N-001, title: Groceries, stars: 2, owner: ana}
    - {id: N-002, title: Ideas, stars: 5, owner: ben}
tools:
  - module: tools.py
  - name: list_notes
    crud: {collection: notes, op: list}
  - name: delete_note
    crud: {collection: notes, op: delete}
    roles: [admin]
clock:
  start: 2026-03-02T09:00:00Z
access:
  - {role: reader, action: disable, tools: [add_note, star_note]}
"""

TOOLS_PY = '''\
from typing import Annotated

from pydantic import Field

from agentenv import ToolContext, ToolError, tool


@tool(kind="read")
def get_note(ctx: ToolContext, note_id: str) -> dict:
    """Get one note.

    Args:
        note_id: The note, e.g. N-001.
    """
    note = ctx.state.get("notes", note_id)
    if note is None:
        raise ToolError(f"no note {note_id!r}")
    return note


@tool
def add_note(ctx: ToolContext, title: str, stars: int = 0) -> dict:
    """Add a note."""
    if not title.strip():
        raise ToolError("a note needs a title")
    if not 0 <= stars <= 5:
        raise ToolError("stars go from 0 to 5")
    number = len(ctx.state.keys("notes")) + 1
    note = {"id": f"N-{number:03d}", "title": title, "stars": stars, "at": ctx.now.isoformat()}
    return ctx.state.insert("notes", note)


@tool
def star_note(ctx: ToolContext, note_id: str, stars: Annotated[int, Field(ge=0, le=5)]) -> dict:
    """Give a note 0 to 5 stars."""
    if not ctx.state.has("notes", note_id):
        raise ToolError(f"no note {note_id!r}")
    return ctx.state.update("notes", note_id, {"stars": stars})
'''

BROKEN_PY = '''

import random


@tool(kind="read")
def peek_note(ctx: ToolContext, note_id: str) -> dict:
    """Get a note, carelessly: an unknown id is a KeyError, not a ToolError."""
    return {n["id"]: n for n in ctx.state.list("notes")}[note_id]


@tool(kind="read")
def mark_seen(ctx: ToolContext, note_id: str) -> dict:
    """Declared a read tool, but writes."""
    note = ctx.state.require("notes", note_id)
    note["seen"] = True
    return ctx.state.put("notes", note)


@tool(kind="read")
def lucky_note(ctx: ToolContext) -> dict:
    """Nondeterministic: an unseeded random number."""
    return {"pick": random.random()}


@tool(kind="read")
def note_ids(ctx: ToolContext) -> set:
    """Returns a set, which is not JSON."""
    return set(ctx.state.keys("notes"))


@tool
def audit(ctx: ToolContext, note: str = "") -> dict:
    """Trigger plumbing with a bug."""
    return {"ratio": 1 / 0}


@tool(kind="read")
def quit_now(ctx: ToolContext) -> dict:
    """Ends the process."""
    raise SystemExit(3)
'''

BROKEN_EXTRA_YAML = """\
triggers:
  - id: audit-new-notes
    when: {type: action, tool: add_note, repeat: true}
    actions:
      - {type: tool, tool: audit, args: {note: "${result.id}"}}
"""

TYPED_PY = '''\
from datetime import date, datetime, timedelta
from enum import Enum
from typing import Annotated, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from agentenv import ToolContext, ToolError, tool


class Color(str, Enum):
    red = "red"
    blue = "blue"


class Item(BaseModel):
    sku: Annotated[str, Field(pattern=r"^SKU-\\d{3}$")]
    qty: Annotated[int, Field(ge=1, le=10)]
    color: Color = Color.red


@tool(kind="read")
def typed(
    ctx: ToolContext,
    when: datetime,
    items: list[Item],
    day: date | None = None,
    span: timedelta | None = None,
    ident: UUID | None = None,
    mode: Literal["fast", "slow"] = "fast",
    tags: Annotated[list[str], Field(max_length=3)] = [],
    ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5,
    name: Annotated[str, Field(min_length=2, max_length=8)] = "ab",
) -> dict:
    """Echo typed arguments."""
    if not items:
        raise ToolError("no items")
    return {"n": len(items), "when": when.isoformat(), "mode": mode}
'''

FAILING_PY = '''\
from agentenv import ToolContext, ToolError, tool


@tool(kind="read")
def get_note(ctx: ToolContext, note_id: str) -> dict:
    """Always fails."""
    raise ToolError("the notebook is closed for maintenance")


@tool
def add_note(ctx: ToolContext, title: str) -> dict:
    """Always fails."""
    raise ToolError("the notebook is closed for maintenance")
'''

FAILING_YAML = """\
apiVersion: agentenv/v1
kind: Environment
name: closed
state:
  notes: {key: id}
seed:
  notes: [{id: N-001}]
tools:
  - module: tools.py
clock:
  start: 2026-03-02T09:00:00Z
"""


def _write(folder: Path, env_yaml: str, tools_py: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "env.yaml").write_text(env_yaml)
    (folder / "tools.py").write_text(tools_py)
    return folder


@pytest.fixture
def clean_env(tmp_path: Path) -> Path:
    return _write(tmp_path / "clean", ENV_YAML, TOOLS_PY)


@pytest.fixture
def broken_env(tmp_path: Path) -> Path:
    return _write(tmp_path / "broken", ENV_YAML + BROKEN_EXTRA_YAML, TOOLS_PY + BROKEN_PY)


def _cli() -> typer.Typer:
    app = typer.Typer()
    app.command()(check)

    @app.callback()
    def _root() -> None:
        """Test app."""

    return app


def _violations(report: CheckReport, tool: str) -> dict[str, list[Any]]:
    found = next(t for t in report.tools if t.tool == tool)
    out: dict[str, list[Any]] = {}
    for v in found.violations:
        out.setdefault(v.kind, []).append(v)
    return out


# -- a clean environment ---------------------------------------------------------------------


def test_clean_env_passes(clean_env: Path) -> None:
    report = check_environment(Environment.load(clean_env), seed=0, calls_per_tool=15)
    assert report.passed, [v.message for t in report.tools for v in t.violations]
    assert report.summary.violations == 0
    names = [t.tool for t in report.tools]
    assert names == sorted(["get_note", "add_note", "star_note", "list_notes", "delete_note"])
    for tool in report.tools:
        assert tool.calls >= 15 and tool.ok > 0, tool
        # the generated invalid calls were refused as such
        assert tool.errors_by_kind.get("invalid_arguments", 0) >= 1
    assert report.warnings == []


def test_clean_env_roles_hold(clean_env: Path) -> None:
    report = check_environment(Environment.load(clean_env), calls_per_tool=5)
    by_name = {t.tool: t for t in report.tools}
    # delete_note is the admin's: writer and reader are refused, and nothing is a violation
    assert by_name["delete_note"].errors_by_kind["denied"] == 2
    # add_note is disabled for reader by an access rule
    assert by_name["add_note"].errors_by_kind["denied"] == 1
    assert by_name["get_note"].errors_by_kind.get("denied", 0) == 0
    assert report.passed


def test_clean_env_cli_exits_zero(clean_env: Path) -> None:
    result = CliRunner().invoke(_cli(), ["check", str(clean_env), "--calls", "5"])
    assert result.exit_code == 0, result.output
    assert "passed" in result.output and "Traceback" not in result.output
    for name in ("get_note", "add_note", "delete_note"):
        assert name in result.output


def test_values_draw_existing_keys(clean_env: Path) -> None:
    report = check_environment(Environment.load(clean_env), calls_per_tool=10)
    get_note = next(t for t in report.tools if t.tool == "get_note")
    assert get_note.ok >= 3  # note_id names a note: most calls hit an existing one


# -- a broken environment --------------------------------------------------------------------


def test_broken_env_is_caught(broken_env: Path) -> None:
    report = check_environment(Environment.load(broken_env), seed=0, calls_per_tool=12)
    assert not report.passed

    crash = _violations(report, "peek_note")["crash"]
    assert "KeyError" in crash[0].message
    assert crash[0].call.tool == "peek_note" and crash[0].call.role in ("writer", "reader", "admin")

    assert "nondeterministic" in _violations(report, "lucky_note")
    assert "invalid_result" in _violations(report, "note_ids")
    assert "crash" in _violations(report, "quit_now")
    # The gateway turns SystemExit into a tool error; check still flags it as a crash.
    assert "raised SystemExit" in _violations(report, "quit_now")["crash"][0].message

    # a trigger action that crashes is pinned on the call that provoked it
    add_note = _violations(report, "add_note")["crash"]
    assert "audit" in add_note[0].message and "ZeroDivisionError" in add_note[0].message

    # a read tool that writes is refused by the gateway: an error kind and a warning
    mark_seen = next(t for t in report.tools if t.tool == "mark_seen")
    assert mark_seen.violations == []
    assert mark_seen.errors_by_kind["tool_error"] > 0
    assert any("mark_seen: a read tool tried to write" in w for w in report.warnings)

    # the clean tools stay clean next to the broken ones
    for name in ("get_note", "star_note", "list_notes", "delete_note"):
        assert _violations(report, name) == {}, name
    assert report.summary.violations_by_kind["crash"] >= 3


def test_violations_are_deduplicated(broken_env: Path) -> None:
    report = check_environment(Environment.load(broken_env), calls_per_tool=20, tools=["peek_note"])
    crashes = _violations(report, "peek_note")["crash"]
    assert len(crashes) == 1 and crashes[0].count > 1


def test_reproducing_line_reproduces(broken_env: Path) -> None:
    report = check_environment(Environment.load(broken_env), tools=["peek_note"])
    violation = _violations(report, "peek_note")["crash"][0]
    line = violation.call.command(broken_env)
    assert line.startswith(f"agent-env call {broken_env} peek_note --json ")
    result = CliRunner().invoke(agent_env, shlex.split(line)[1:])
    assert result.exit_code == 1
    assert "tool_error: KeyError" in result.output


def test_broken_env_cli(broken_env: Path) -> None:
    result = CliRunner().invoke(_cli(), ["check", str(broken_env), "--calls", "6"])
    assert result.exit_code == 1, result.output
    assert "crash" in result.output and "agent-env call" in result.output
    assert "--role writer" in result.output
    assert "failed" in result.output and "Traceback" not in result.output


def test_cli_json(broken_env: Path) -> None:
    result = CliRunner().invoke(
        _cli(), ["check", str(broken_env), "--calls", "4", "--json", "--tool", "peek_note"]
    )
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    assert data["passed"] is False and data["env"] == "notebook"
    assert [t["tool"] for t in data["tools"]] == ["peek_note"]
    assert data["tools"][0]["violations"][0]["kind"] == "crash"


# -- the schema contract, with tools whose validation disagrees with their schema ------------


def _with_tool(env: Environment, tool: Tool) -> Environment:
    return dataclasses.replace(env, tools={**env.tools, tool.name: tool})


def test_accepted_invalid_and_schema_mismatch(clean_env: Path) -> None:
    env = Environment.load(clean_env)
    schema = {
        "type": "object",
        "properties": {"count": {"type": "integer", "minimum": 1}},
        "required": ["count"],
        "additionalProperties": False,
    }
    loose = Tool(
        name="loose",
        description="Says it wants an integer >= 1, takes anything.",
        input_schema=schema,
        args_model=create_model("loose_args", count=(Any, None), extra=(Any, None)),
        invoke=lambda ctx, args: {"count": repr(args["count"])},
        kind="read",
    )
    strict = Tool(
        name="strict",
        description="Says it takes any integer, refuses them all.",
        input_schema={**schema, "properties": {"count": {"type": "integer"}}},
        args_model=create_model("strict_args", count=(list[str], ...)),
        invoke=lambda ctx, args: args,
        kind="read",
    )
    env = _with_tool(_with_tool(env, loose), strict)
    report = check_environment(env, calls_per_tool=10, tools=["loose", "strict"])
    accepted = _violations(report, "loose")["accepted_invalid"]
    assert {v.call.case for v in accepted} >= {"wrong_type", "missing_required", "out_of_range"}
    assert "schema_mismatch" in _violations(report, "strict")


def test_typed_parameters_raise_no_false_alarm(tmp_path: Path) -> None:
    """Dates, durations, UUIDs, enums, nested models, bounded floats and lengths: the
    generated valid calls are ones the gateway accepts, and the invalid ones it refuses."""
    yaml = FAILING_YAML.replace("name: closed", "name: typed")
    env = Environment.load(_write(tmp_path / "typed", yaml, TYPED_PY))
    for seed in (0, 1):
        report = check_environment(env, seed=seed, calls_per_tool=30)
        assert report.passed, [v.message for t in report.tools for v in t.violations]
        assert report.tools[0].ok >= 10


# -- bad input -------------------------------------------------------------------------------


def test_tools_that_all_fail_are_reported_not_raised(tmp_path: Path) -> None:
    folder = _write(tmp_path / "closed", FAILING_YAML, FAILING_PY)
    report = check_environment(Environment.load(folder), calls_per_tool=5)
    assert report.passed  # failing cleanly breaks no invariant...
    assert report.summary.ok == 0
    assert "no call of any tool succeeded" in report.warnings[0]  # ...but it is said
    assert any("no valid call succeeded" in w and "maintenance" in w for w in report.warnings)
    result = CliRunner().invoke(_cli(), ["check", str(folder), "--calls", "3"])
    assert result.exit_code == 0
    assert "no call of any tool succeeded" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"calls_per_tool": 0}, "calls per tool must be between 1 and"),
        ({"calls_per_tool": -3}, "calls per tool must be between 1 and"),
        ({"calls_per_tool": 10**6}, "calls per tool must be between 1 and"),
        ({"roles": ["boss"]}, "unknown role 'boss'"),
        ({"roles": []}, "no role to check with"),
        ({"tools": ["nope"]}, "unknown tool 'nope'"),
        ({"seed": "x"}, "the seed must be an integer"),
    ],
)
def test_bad_knobs(clean_env: Path, knobs: dict[str, Any], message: str) -> None:
    with pytest.raises(CheckError, match=message):
        check_environment(Environment.load(clean_env), **knobs)


def test_bad_input_cli(clean_env: Path, tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(_cli(), ["check", str(clean_env), "--calls", "0"])
    assert result.exit_code == 1
    assert "calls per tool must be between 1 and 10000, got 0" in result.output
    result = runner.invoke(_cli(), ["check", str(clean_env), "--role", "boss"])
    assert result.exit_code == 1 and "unknown role 'boss'" in result.output
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "env.yaml").write_text(ENV_YAML.replace("kind: Environment", "kind: X"))
    result = runner.invoke(_cli(), ["check", str(tmp_path / "bad")])
    assert result.exit_code == 1 and "kind" in result.output
    assert "Traceback" not in result.output


async def test_inside_an_event_loop(clean_env: Path) -> None:
    from agentenv.synth import check_environment_async

    with pytest.raises(CheckError, match="await check_environment_async"):
        check_environment(Environment.load(clean_env))
    report = await check_environment_async(Environment.load(clean_env), calls_per_tool=3)
    assert report.passed


# -- determinism -----------------------------------------------------------------------------


def test_report_is_deterministic(broken_env: Path) -> None:
    env = Environment.load(broken_env)
    tools = [t for t in env.tools if t != "lucky_note"]  # its violation quotes random numbers
    first = check_environment(env, seed=7, calls_per_tool=8, tools=tools)
    second = check_environment(Environment.load(broken_env), seed=7, calls_per_tool=8, tools=tools)
    assert not first.passed
    assert first.model_dump_json() == second.model_dump_json()
    other = check_environment(env, seed=8, calls_per_tool=8, tools=tools)
    assert other.model_dump_json() != first.model_dump_json()


# -- the example environments ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["support-desk", "bookshop", "personal"])
def test_example_envs_pass(name: str) -> None:
    report = check_environment(Environment.load(EXAMPLES / name), seed=0)
    broken = [(t.tool, v.kind, v.message) for t in report.tools for v in t.violations]
    assert report.passed, broken
    assert report.summary.ok > report.summary.calls // 4


def test_crash_name() -> None:
    assert crash_name("KeyError: 'N-9'") == "KeyError"
    assert crash_name("ZeroDivisionError: division by zero") == "ZeroDivisionError"
    assert crash_name("json.decoder.JSONDecodeError: Expecting value") == "JSONDecodeError"
    assert crash_name("no note 'N-9'") is None
    assert crash_name("Error: the printer is on fire") is None
    assert crash_name("ToolError") is None
    assert crash_name("Note: closed tickets cannot be refunded") is None


def test_docs_page_exists() -> None:
    page = Path(__file__).resolve().parents[2] / "docs" / "checks.md"
    text = page.read_text()
    assert "agent-env check" in text
    for kind in ("crash", "accepted_invalid", "schema_mismatch", "read_wrote", "nondeterministic"):
        assert f"`{kind}`" in text


def test_role_check_catches_a_list_that_disagrees_with_the_door(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentenv.gateway import Gateway

    # a gateway whose tool lists show every tool to every role, while calls stay guarded
    monkeypatch.setattr(
        Gateway,
        "tools_for",
        lambda self, principal, instance="default": list(self.env.tools.values()),
    )
    report = check_environment(Environment.load(clean_env), calls_per_tool=3)
    roles = _violations(report, "delete_note")["role"]
    assert {v.call.role for v in roles} == {"writer", "reader"}
    assert "refused" in roles[0].message


def test_a_process_environment_is_checked_with_its_workspace_paths_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each fresh instance of a process environment runs in its own workspace folder, so
    a tool that names it answers differently per process; that is not nondeterminism."""
    import sys

    monkeypatch.setenv("AGENTENV_LOG_DIR", str(tmp_path / "logs"))
    server = Path(__file__).parents[1] / "env" / "servers" / "servers" / "counter.py"
    (tmp_path / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: counter\n"
        f"server: {{command: [{sys.executable}, {server}], pool: 2}}\n"
    )
    env = Environment.load(tmp_path / "env.yaml")
    try:
        report = check_environment(env, calls_per_tool=2, tools=["where", "count"])
    finally:
        env.close()
    assert report.passed, [v.message for t in report.tools for v in t.violations]
    assert report.summary.ok >= 4
