"""The built-in setup, control, collection and validator steps, each on its good and bad
paths, run through `run_task` on a small bank environment written to tmp_path."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from agentenv.agents import make_agent
from agentenv.env.environment import Environment
from agentenv.env.tool import Principal
from agentenv.serve.card import build_card
from agentenv.spec.card import Interface
from agentenv.spec.task import TaskSpec
from agentenv.state import Snapshot
from agentenv.tasks import STEPS, TaskContext, TaskError, TaskResult, build_steps, run_task
from agentenv.tasks.steps.validators import card_problems, tool_problems

BANK_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: bank
roles: [{name: customer}, {name: teller}]
default_role: customer
state:
  accounts:
    schema:
      type: object
      required: [id, balance]
      properties:
        id: {type: string}
        balance: {type: integer, minimum: 0}
  notes: {}
seed:
  accounts:
    - {id: a1, balance: 100}
    - {id: a2, balance: 50}
tools:
  - module: bank_tools.py
  - name: get_account
    crud: {collection: accounts, op: get}
  - name: list_accounts
    crud: {collection: accounts, op: list}
"""

BANK_TOOLS = '''
from agentenv import ToolContext, ToolError, tool


@tool
def deposit(ctx: ToolContext, account_id: str, amount: int) -> dict:
    """Add money to an account.

    Args:
        account_id: The account's id.
        amount: How much to add.
    """
    if amount <= 0:
        raise ToolError("amount must be positive")
    account = ctx.state.require("accounts", account_id)
    return ctx.state.update("accounts", account_id, {"balance": account["balance"] + amount})
'''

DEPLOY = {"id": "env", "type": "deploy_env", "env_id": "bank", "env": "bank"}
DEPOSIT_SOLUTION = {
    "calls": [{"tool": "deposit", "args": {"account_id": "a1", "amount": 5}}],
    "response": "Deposited 5.",
}


@pytest.fixture
def base(tmp_path: Path) -> Path:
    folder = tmp_path / "bank"
    folder.mkdir()
    (folder / "env.yaml").write_text(textwrap.dedent(BANK_ENV))
    (folder / "bank_tools.py").write_text(textwrap.dedent(BANK_TOOLS))
    return tmp_path


async def run(
    doc: Any,
    base: Path,
    *,
    run_dir: Path | None = None,
    env_resolver: Any = None,
    agent: Any = None,
) -> tuple[TaskResult, TaskContext]:
    spec = TaskSpec.model_validate(doc)
    ctx = TaskContext(
        task=spec,
        base_dir=base,
        run_dir=run_dir,
        env_resolver=env_resolver,
        agent_factory=lambda req: agent or make_agent("oracle"),
    )
    return await run_task(spec, ctx), ctx


def step(result: TaskResult, sid: str) -> Any:
    return next(s for s in result.steps if s.id == sid)


def accounts(ctx: TaskContext, env_id: str = "bank") -> dict[str, int]:
    return {r["id"]: r["balance"] for r in ctx.env(env_id).state.list("accounts")}


def invalid(doc: Any) -> str:
    with pytest.raises(TaskError) as info:
        build_steps(TaskSpec.model_validate(doc))
    return str(info.value)


def test_every_step_of_this_family_is_registered() -> None:
    names = set(STEPS.names())
    assert {
        "reset_env",
        "load_artifact",
        "run_code",
        "snapshot_env",
        "modify_env_tool_access",
        "register_env_triggers",
        "sync_env_clock",
        "collect_artifacts",
        "verify_mcp_tool_schema",
        "verify_spec_conformance",
    } <= names


def test_the_step_catalogue_in_the_docs_matches_the_registry() -> None:
    text = (Path(__file__).parents[2] / "docs" / "steps.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| [a-z ]+ \| `([a-z0-9_]+)` \| (yes|not yet)", text, re.MULTILINE)
    assert len(rows) == 49 == len({name for name, _ in rows})  # upstream 0.9's registry
    from agentenv.tasks.checking import NOT_BUILT_STEP_TYPES

    assert {name for name, here in rows if here == "not yet"} == NOT_BUILT_STEP_TYPES
    marked = {name for name, here in rows if here == "yes"}
    builtins = {n for n in STEPS.names() if STEPS.is_builtin(n)}
    assert marked <= builtins, f"marked built but missing: {marked - builtins}"
    assert builtins - marked <= {
        n for n in builtins if f"`{n}`" in text.split("## The protocol")[0]
    }


# -- deploy_agent -----------------------------------------------------------------------


class Depositor:
    """An agent that notes the tools it is offered and deposits 1 into a1."""

    name = "depositor"

    def __init__(self) -> None:
        self.turns: list[tuple[str, list[str]]] = []

    async def run_turn(self, turn: Any) -> str:
        self.turns.append((turn.role, [t.name for t in turn.tools.list_tools()]))
        out = await turn.tools.call("deposit", {"account_id": "a1", "amount": 1})
        return f"ok={out.ok}"


@pytest.mark.parametrize("role", ["system", "agnet"])
async def test_deploy_agent_with_a_role_the_env_does_not_declare_fails(
    base: Path, role: str
) -> None:
    agent = Depositor()
    result, ctx = await run(
        [
            DEPLOY,
            {"id": "agent", "type": "deploy_agent", "agent_name": "a", "role": role},
            {"id": "ask", "type": "prompt_agent", "prompt": "Deposit 1 into a1."},
        ],
        base,
        agent=agent,
    )
    deploy = step(result, "agent")
    assert deploy.status == "failed"
    assert deploy.error == (
        f"role {role!r} is not a role of environment 'bank' (roles: customer, teller)"
    )
    assert result.status != "passed"
    assert "a" not in ctx.agents
    assert agent.turns == []
    assert accounts(ctx) == {"a1": 100, "a2": 50}


async def test_deploy_agent_binds_the_same_env_once(base: Path) -> None:
    agent = Depositor()
    result, ctx = await run(
        [
            DEPLOY,
            {"id": "agent", "type": "deploy_agent", "agent_name": "a", "env_ids": ["bank", "bank"]},
            {"id": "ask", "type": "prompt_agent", "prompt": "Deposit 1 into a1."},
        ],
        base,
        agent=agent,
    )
    assert result.status == "passed", result.error
    assert ctx.agents["a"].env_ids == ["bank"]
    ((role, names),) = agent.turns
    assert role == "customer"
    assert "deposit" in names and not any("__" in n for n in names)
    assert ctx.prompts["ask"].response == "ok=True"
    assert accounts(ctx) == {"a1": 101, "a2": 50}


# -- reset_env --------------------------------------------------------------------------


async def test_reset_env_puts_the_seed_back(base: Path) -> None:
    result, ctx = await run(
        {
            "steps": [
                DEPLOY,
                {"id": "agent", "type": "deploy_agent", "agent_name": "a"},
                {"id": "ask", "type": "prompt_agent", "prompt": "Deposit 5 into a1."},
                {"id": "reset", "type": "reset_env", "env_id": "bank"},
            ],
            "solution": {"ask": DEPOSIT_SOLUTION},
        },
        base,
    )
    assert result.status == "passed", result.error
    assert accounts(ctx) == {"a1": 100, "a2": 50}
    seed_hash = ctx.env("bank").env.seed.hash()
    assert step(result, "reset").output == {"env_id": "bank", "state_hash": seed_hash}
    assert ctx.env("bank").gateway.instance().trajectory[-1].event == "state_restore"


async def test_reset_env_of_an_env_that_is_not_deployed_fails(base: Path) -> None:
    result, _ = await run([DEPLOY, {"id": "reset", "type": "reset_env", "env_id": "nope"}], base)
    assert step(result, "reset").status == "failed"
    assert step(result, "reset").error == "no environment 'nope' is deployed (bank)"


# -- load_artifact ----------------------------------------------------------------------


async def test_load_artifact_seeds_inline_records_through_the_data_plane(base: Path) -> None:
    result, ctx = await run(
        [
            DEPLOY,
            {
                "id": "load",
                "type": "load_artifact",
                "records": {"accounts": [{"id": "a3", "balance": 7}, {"id": "a1", "balance": 1}]},
            },
        ],
        base,
    )
    assert result.status == "passed", result.error
    out = step(result, "load").output
    assert out["records"] == 2
    assert out["collections"] == {"accounts": 2}
    assert accounts(ctx) == {"a1": 1, "a2": 50, "a3": 7}  # upsert
    assert ctx.env("bank").gateway.instance().trajectory[-1].event == "data_add"


@pytest.mark.parametrize(
    ("where", "name", "text"),
    [
        ("", "extra.json", json.dumps({"accounts": [{"id": "a3", "balance": 3}]})),
        ("artifacts", "extra.yaml", "accounts:\n  - {id: a3, balance: 3}\n"),
        (
            "",
            "extra.jsonl",
            '{"accounts": [{"id": "a3", "balance": 3}]}\n{"notes": {"id": "n1"}}\n',
        ),
    ],
)
async def test_load_artifact_reads_json_yaml_and_jsonl_files(
    base: Path, where: str, name: str, text: str
) -> None:
    (base / where).mkdir(exist_ok=True)
    (base / where / name).write_text(text)
    result, ctx = await run([DEPLOY, {"id": "load", "type": "load_artifact", "path": name}], base)
    assert result.status == "passed", result.error
    assert accounts(ctx)["a3"] == 3
    assert step(result, "load").output["source"] == str(base / where / name)


async def test_load_artifact_finds_the_bundles_artifacts_folder(base: Path) -> None:
    bundle = base
    (bundle / "tasks").mkdir()
    (bundle / "artifacts" / "bank").mkdir(parents=True)
    (bundle / "artifacts" / "bank" / "more.json").write_text(
        json.dumps([{"id": "a9", "balance": 9}])
    )
    result, ctx = await run(
        [
            {**DEPLOY, "env": "../bank"},
            {
                "id": "load",
                "type": "load_artifact",
                "path": "bank/more.json",
                "collection": "accounts",
                "reset": True,
            },
        ],
        bundle / "tasks",  # a bundle task's base_dir is its tasks/ folder
    )
    assert result.status == "passed", result.error
    assert accounts(ctx) == {"a9": 9}  # reset first, then the file's records


async def test_load_artifact_keeps_text_parts(base: Path) -> None:
    result, ctx = await run(
        [
            DEPLOY,
            {
                "id": "load",
                "type": "load_artifact",
                "parts": [
                    {"kind": "text", "text": "The customer is in a hurry."},
                    {"kind": "data", "data": {"notes": [{"id": "n1", "text": "hi"}]}},
                ],
            },
        ],
        base,
    )
    assert result.status == "passed", result.error
    assert step(result, "load").output["records"] == 1
    parts = ctx.env("bank").gateway.data_get()
    assert parts[1].model_dump(exclude_none=True) == {
        "kind": "text",
        "text": "The customer is in a hurry.",
    }


async def test_load_artifact_is_all_or_nothing(base: Path) -> None:
    result, ctx = await run(
        [
            DEPLOY,
            {
                "id": "load",
                "type": "load_artifact",
                "records": {"accounts": [{"id": "a3", "balance": 1}, {"id": "a4", "balance": -1}]},
            },
        ],
        base,
    )
    load = step(result, "load")
    assert load.status == "failed"
    assert load.error.startswith("env 'bank': parts[0].data.accounts[1]:")
    assert accounts(ctx) == {"a1": 100, "a2": 50}


async def test_load_artifact_into_an_unknown_collection_fails(base: Path) -> None:
    result, _ = await run(
        [DEPLOY, {"id": "load", "type": "load_artifact", "records": {"cats": [{"id": "c"}]}}],
        base,
    )
    assert step(result, "load").error == (
        "env 'bank': parts[0].data.cats: unknown collection 'cats'"
    )


async def test_load_artifact_of_a_missing_file_says_where_it_looked(base: Path) -> None:
    result, _ = await run(
        [DEPLOY, {"id": "load", "type": "load_artifact", "path": "nope.json"}], base
    )
    error = step(result, "load").error
    assert error.startswith("no artifact file 'nope.json' (looked in: ")
    assert str(base / "nope.json") in error and str(base / "artifacts" / "nope.json") in error


async def test_load_artifact_of_a_file_that_is_not_records_fails(base: Path) -> None:
    (base / "list.json").write_text("[1, 2]")
    (base / "broken.json").write_text("{")
    result, _ = await run(
        [
            DEPLOY,
            {"id": "a", "type": "load_artifact", "path": "list.json", "fail_task_on_error": False},
            {"id": "b", "type": "load_artifact", "path": "broken.json"},
        ],
        base,
    )
    assert "expected an object {collection: [records]}" in step(result, "a").error
    assert "invalid JSON" in step(result, "b").error


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "give exactly one of 'parts', 'path' or 'records'"),
        ({"path": "x.json", "records": {}}, "give exactly one of 'parts', 'path' or 'records'"),
        ({"records": {}, "collection": "accounts"}, "'collection' goes with 'path'"),
        ({"parts": [{"kind": "image"}]}, "steps[0].parts[0].kind: Input tag 'image'"),
    ],
)
def test_load_artifact_fields_are_checked(fields: dict[str, Any], message: str) -> None:
    assert message in invalid([{"id": "load", "type": "load_artifact", **fields}])


# -- run_code ---------------------------------------------------------------------------


async def test_run_code_runs_python_and_captures_its_output(base: Path) -> None:
    result, _ = await run(
        [
            {
                "id": "py",
                "type": "run_code",
                "code": "import sys; print('out'); print('err', file=sys.stderr)",
            }
        ],
        base,
    )
    out = step(result, "py").output
    assert (out["exit_code"], out["stdout"], out["stderr"]) == (0, "out\n", "err\n")
    assert out["truncated"] is False


async def test_run_code_runs_commands_with_cwd_and_env_vars(base: Path) -> None:
    (base / "sub").mkdir()
    result, _ = await run(
        [
            {
                "id": "shell",
                "type": "run_code",
                "command": "echo $GREETING from $(basename $PWD)",
                "cwd": "sub",
                "env_vars": {"GREETING": "hello"},
            },
            {"id": "argv", "type": "run_code", "command": ["printf", "%s|", "a b", "<c>"]},
        ],
        base,
    )
    assert result.status == "passed", result.error
    assert step(result, "shell").output["stdout"] == "hello from sub\n"
    assert step(result, "argv").output["stdout"] == "a b|<c>|"  # a list is not shell-parsed


async def test_run_code_fails_on_a_non_zero_exit_unless_allowed(base: Path) -> None:
    code = "import sys; print('bad input', file=sys.stderr); sys.exit(3)"
    result, _ = await run(
        [
            {"id": "strict", "type": "run_code", "code": code, "fail_task_on_error": False},
            {"id": "lenient", "type": "run_code", "code": code, "allow_failure": True},
        ],
        base,
    )
    assert step(result, "strict").status == "failed"
    assert step(result, "strict").error == "exited with code 3: bad input"
    assert step(result, "lenient").status == "succeeded"
    assert step(result, "lenient").output["exit_code"] == 3


async def test_run_code_cuts_long_output(base: Path) -> None:
    result, _ = await run(
        [{"id": "py", "type": "run_code", "code": "print('x' * 5000)", "max_output_chars": 100}],
        base,
    )
    out = step(result, "py").output
    assert out["truncated"] is True
    assert len(out["stdout"]) < 200
    assert out["stdout"].endswith("... [output cut at 100 characters]")
    assert out["stdout"].startswith("x" * 100)


async def test_run_code_keeps_only_the_head_of_a_flood_of_output(base: Path) -> None:
    code = "import sys\nfor _ in range(200): sys.stdout.write('y' * 100_000)"
    result, _ = await run(
        [{"id": "py", "type": "run_code", "code": code, "max_output_chars": 50}], base
    )
    out = step(result, "py").output
    assert out["truncated"] is True
    assert out["stdout"] == "y" * 50 + "\n... [output cut at 50 characters]"


async def test_run_code_past_its_timeout_kills_the_process(base: Path) -> None:
    pid_file = base / "pid"
    code = (
        "import os, pathlib, time; "
        f"pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid())); time.sleep(30)"
    )
    started = time.monotonic()
    result, _ = await run(
        [{"id": "slow", "type": "run_code", "code": code, "timeout_seconds": 1}], base
    )
    assert time.monotonic() - started < 10
    assert step(result, "slow").status == "timeout"
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_run_code_in_a_missing_folder_fails(base: Path) -> None:
    result, _ = await run([{"id": "py", "type": "run_code", "code": "", "cwd": "nope"}], base)
    assert step(result, "py").error == f"cwd {str(base / 'nope')!r} is not a folder"


async def test_run_code_of_a_missing_program_fails(base: Path) -> None:
    result, _ = await run(
        [{"id": "x", "type": "run_code", "command": ["no-such-program-xyz"]}], base
    )
    assert step(result, "x").error.startswith("cannot start the process:")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "give exactly one of 'code', 'command' or 'script_artifact_id'"),
        (
            {"code": "1", "command": "true"},
            "give exactly one of 'code', 'command' or 'script_artifact_id'",
        ),
        ({"command": []}, "'command' is an empty list"),
        ({"code": "1", "shell": True}, "shell: unknown field"),
    ],
)
def test_run_code_fields_are_checked(fields: dict[str, Any], message: str) -> None:
    assert message in invalid([{"id": "x", "type": "run_code", **fields}])


# -- snapshot_env -----------------------------------------------------------------------


async def test_snapshot_env_keeps_the_state_of_that_moment(base: Path) -> None:
    result, ctx = await run(
        {
            "steps": [
                DEPLOY,
                {"id": "before", "type": "snapshot_env", "env_id": "bank"},
                {"id": "agent", "type": "deploy_agent", "agent_name": "a"},
                {"id": "ask", "type": "prompt_agent", "prompt": "Deposit 5 into a1."},
                {"id": "snap", "type": "snapshot_env", "name": "after"},
            ],
            "solution": {"ask": DEPOSIT_SOLUTION},
        },
        base,
    )
    assert result.status == "passed", result.error
    before = ctx.snapshots["before"]["bank"]
    after = ctx.snapshots["after"]["bank"]
    assert isinstance(before, Snapshot)
    assert {r["id"]: r["balance"] for r in before.to_dict()["accounts"]} == {"a1": 100, "a2": 50}
    assert after.hash() == ctx.env("bank").state.hash() != before.hash()
    assert step(result, "before").output == {
        "name": "before",
        "env_id": "bank",
        "state_hash": before.hash(),
    }


async def test_snapshot_env_without_an_env_id_needs_exactly_one_env(base: Path) -> None:
    result, _ = await run([{"id": "snap", "type": "snapshot_env"}], base)
    assert step(result, "snap").error == "name the env_id: the task has 0 (none deployed)"


# -- modify_env_tool_access -------------------------------------------------------------


async def test_modify_env_tool_access_disables_and_enables_tools(base: Path) -> None:
    result, ctx = await run(
        [
            DEPLOY,
            {
                "id": "off",
                "type": "modify_env_tool_access",
                "env_id": "bank",
                "action": "disable",
                "role": "customer",
                "tools": ["deposit"],
            },
        ],
        base,
    )
    assert result.status == "passed", result.error
    gateway = ctx.env("bank").gateway
    names = {t.name for t in gateway.list_tools(Principal("customer"))}
    assert "deposit" not in names and "get_account" in names
    assert "deposit" in {t.name for t in gateway.list_tools(Principal("teller"))}
    out = step(result, "off").output
    assert out["rules"]["customer"]["deposit"] is False
    denied = await gateway.call(Principal("customer"), "deposit", {"account_id": "a1", "amount": 1})
    assert denied.error is not None and denied.error.kind == "denied"

    result, ctx = await run(
        [
            DEPLOY,
            {
                "id": "off",
                "type": "modify_env_tool_access",
                "action": "disable",
                "role": "*",
                "tools": "*",
            },
            {
                "id": "on",
                "type": "modify_env_tool_access",
                "action": "enable",
                "role": "teller",
                "tools": ["get_account"],
            },
        ],
        base,
    )
    gateway = ctx.env("bank").gateway
    assert gateway.list_tools(Principal("customer")) == []
    assert [t.name for t in gateway.list_tools(Principal("teller"))] == ["get_account"]


async def test_modify_env_tool_access_of_an_unknown_tool_fails(base: Path) -> None:
    result, _ = await run(
        [
            DEPLOY,
            {
                "id": "off",
                "type": "modify_env_tool_access",
                "action": "disable",
                "role": "customer",
                "tools": ["deposit", "nope"],
            },
        ],
        base,
    )
    assert step(result, "off").error == "env 'bank': unknown tool 'nope'"


def test_modify_env_tool_access_fields_are_checked() -> None:
    message = invalid(
        [{"id": "m", "type": "modify_env_tool_access", "action": "hide", "role": "x", "tools": "*"}]
    )
    assert message.startswith("steps[0].action:")


# -- register_env_triggers --------------------------------------------------------------

BONUS_TRIGGER = {
    "id": "bonus",
    "when": {
        "type": "action",
        "tool": "deposit",
        "where": [{"path": "args.account_id", "equals": "a1"}],
    },
    "actions": [{"type": "tool", "tool": "deposit", "args": {"account_id": "a2", "amount": 1}}],
}


async def test_register_env_triggers_arms_triggers_on_the_env(base: Path) -> None:
    result, ctx = await run(
        {
            "steps": [
                DEPLOY,
                {
                    "id": "triggers",
                    "type": "register_env_triggers",
                    "watch_roles": ["customer"],
                    "triggers": [BONUS_TRIGGER],
                },
                {"id": "agent", "type": "deploy_agent", "agent_name": "a"},
                {"id": "ask", "type": "prompt_agent", "prompt": "Deposit 5 into a1."},
            ],
            "solution": {"ask": DEPOSIT_SOLUTION},
        },
        base,
    )
    assert result.status == "passed", result.error
    output = step(result, "triggers").output
    assert output["env_id"] == "bank" and output["registered"] == ["bonus"]
    assert accounts(ctx) == {"a1": 105, "a2": 51}
    state = ctx.env("bank").gateway.triggers_state()
    assert state.model_dump()["triggers"][0]["status"] == "fired"


async def test_register_env_triggers_with_an_unknown_tool_fails(base: Path) -> None:
    bad = {**BONUS_TRIGGER, "actions": [{"type": "tool", "tool": "nope"}]}
    result, _ = await run(
        [DEPLOY, {"id": "t", "type": "register_env_triggers", "triggers": [bad]}], base
    )
    error = step(result, "t").error
    assert error.startswith("env 'bank': trigger 'bonus': actions[0]")
    assert "unknown tool 'nope'" in error


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"triggers": [BONUS_TRIGGER, BONUS_TRIGGER]}, "trigger id 'bonus' appears twice"),
        ({"triggers": []}, "steps[0].triggers:"),
        ({"triggers": [{**BONUS_TRIGGER, "when": {"type": "sometimes"}}]}, "steps[0].triggers[0]"),
        ({"triggers": [BONUS_TRIGGER], "executor": {"url": "x"}}, "executor.url: unknown field"),
    ],
)
def test_register_env_triggers_fields_are_checked(fields: dict[str, Any], message: str) -> None:
    assert message in invalid([{"id": "t", "type": "register_env_triggers", **fields}])


# -- sync_env_clock ---------------------------------------------------------------------


async def test_sync_env_clock_arms_the_clock(base: Path) -> None:
    result, ctx = await run(
        [
            DEPLOY,
            {
                "id": "clock",
                "type": "sync_env_clock",
                "env_id": "bank",
                "virtual_time": "2026-03-02T09:00:00+01:00",
                "virtual_seconds_per_real_second": 0,
                "mode": "wall",
            },
        ],
        base,
    )
    assert result.status == "passed", result.error
    out = step(result, "clock").output
    assert out["armed"] is True
    assert out["mode"] == "wall"
    assert out["virtual_time"] == "2026-03-02T08:00:00Z"
    assert out["virtual_seconds_per_real_second"] == 0
    gateway = ctx.env("bank").gateway
    assert "get_time" in {t.name for t in gateway.list_tools(Principal("customer"))}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"virtual_time": "2026-03-02T09:00:00"},
            "steps[0].virtual_time: Input should have timezone",
        ),
        ({"virtual_time": "yesterday"}, "steps[0].virtual_time:"),
        (
            {"virtual_time": "2026-03-02T09:00:00Z", "virtual_seconds_per_real_second": 86401},
            "steps[0].virtual_seconds_per_real_second:",
        ),
        ({"virtual_time": "2026-03-02T09:00:00Z", "mode": "fast"}, "steps[0].mode:"),
        ({}, "steps[0].virtual_time: Field required"),
    ],
)
def test_sync_env_clock_fields_are_checked(fields: dict[str, Any], message: str) -> None:
    assert message in invalid([{"id": "c", "type": "sync_env_clock", **fields}])


async def test_sync_env_clock_on_no_env_fails(base: Path) -> None:
    result, _ = await run(
        [{"id": "c", "type": "sync_env_clock", "virtual_time": "2026-03-02T09:00:00Z"}], base
    )
    assert step(result, "c").status == "failed"


# -- collect_artifacts ------------------------------------------------------------------

FULL_RUN = {
    "steps": [
        DEPLOY,
        {"id": "agent", "type": "deploy_agent", "agent_name": "a"},
        {"id": "ask", "type": "prompt_agent", "prompt": "Deposit 5 into a1."},
        {"id": "collect", "type": "collect_artifacts"},
    ],
    "solution": {"ask": DEPOSIT_SOLUTION},
}


async def test_collect_artifacts_writes_files_into_the_run_folder(base: Path) -> None:
    run_dir = base / "run"
    result, ctx = await run(FULL_RUN, base, run_dir=run_dir)
    assert result.status == "passed", result.error
    out = step(result, "collect").output
    folder = run_dir / "artifacts" / "collect"
    assert out["files"] == [
        str(folder / "bank.state.json"),
        str(folder / "bank.trajectory.jsonl"),
        str(folder / "prompts.json"),
    ]
    state = json.loads((folder / "bank.state.json").read_text())
    assert {r["id"]: r["balance"] for r in state["accounts"]} == {"a1": 105, "a2": 50}
    lines = (folder / "bank.trajectory.jsonl").read_text().splitlines()
    assert [json.loads(x)["tool"] for x in lines] == ["deposit"]
    prompts = json.loads((folder / "prompts.json").read_text())
    assert prompts[0]["prompt_id"] == "ask" and prompts[0]["response"] == "Deposited 5."
    assert out["state"]["bank"]["records"] == {"accounts": 2, "notes": 0}
    assert out["trajectory"] == {"bank": {"records": 1}}
    assert out["prompts"] == {"count": 1, "ids": ["ask"]}
    assert ctx.artifacts["collect"]["state"]["bank"] == state


async def test_collect_artifacts_without_a_run_folder_keeps_them_in_memory(base: Path) -> None:
    doc = json.loads(json.dumps(FULL_RUN))
    doc["steps"][-1].update(which="trajectory", name="traj")
    result, ctx = await run(doc, base)
    out = step(result, "collect").output
    assert out["files"] == []
    assert set(out) == {"name", "env_ids", "trajectory", "files"}
    assert ctx.artifacts["traj"]["trajectory"]["bank"][0]["tool"] == "deposit"


async def test_collect_artifacts_keeps_file_names_inside_its_folder(base: Path) -> None:
    run_dir = base / "run"
    result, _ = await run(
        [
            {**DEPLOY, "env_id": "../../evil/bank"},
            {"id": "c", "type": "collect_artifacts", "which": ["state"]},
        ],
        base,
        run_dir=run_dir,
    )
    assert result.status == "passed", result.error
    (written,) = step(result, "c").output["files"]
    assert Path(written).parent == run_dir / "artifacts" / "c"
    assert Path(written).name == "_.._evil_bank.state.json"


async def test_collect_artifacts_of_an_unknown_env_fails(base: Path) -> None:
    result, _ = await run([DEPLOY, {"id": "c", "type": "collect_artifacts", "env_id": "x"}], base)
    assert step(result, "c").error == "no environment 'x' is deployed (bank)"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"which": "everything"}, "steps[0].which"),
        ({"env_id": "a", "env_ids": ["b"]}, "give 'env_id' or 'env_ids', not both"),
        ({"name": "../escape"}, "steps[0].name"),
    ],
)
def test_collect_artifacts_fields_are_checked(fields: dict[str, Any], message: str) -> None:
    assert message in invalid([{"id": "c", "type": "collect_artifacts", **fields}])


# -- verify_mcp_tool_schema -------------------------------------------------------------


async def test_verify_mcp_tool_schema_passes_a_good_env(base: Path) -> None:
    result, _ = await run([DEPLOY, {"id": "v", "type": "verify_mcp_tool_schema"}], base)
    assert result.status == "passed", result.error
    assert result.scores["v"].score == 1.0
    assert result.scores["v"].details == {
        "env_id": "bank",
        "tools": 3,
        "problems": [],
        "verifier_id": "v",
        "results": [{"id": "v", "result": True, "score": 1.0}],
    }


async def test_verify_mcp_tool_schema_lists_each_problem(base: Path) -> None:
    good = Environment.load(base / "bank")
    tools = dict(good.tools)
    tools["bad.name"] = dataclasses.replace(tools["deposit"], name="bad.name")
    tools["get_account"] = dataclasses.replace(tools["get_account"], description="  ")
    tools["list_accounts"] = dataclasses.replace(
        tools["list_accounts"], input_schema={"type": "object", "properties": {"x": {"type": 7}}}
    )
    sloppy = dataclasses.replace(good, tools=tools)
    result, _ = await run(
        [{**DEPLOY, "env": "sloppy"}, {"id": "v", "type": "verify_mcp_tool_schema"}],
        base,
        env_resolver=lambda ref: sloppy if ref == "sloppy" else None,
    )
    score = result.scores["v"]
    assert score.passed is False
    assert score.score == 0.25  # deposit alone is clean
    problems = score.details["problems"]
    assert problems[0] == "tool 'get_account': description is empty"
    assert problems[1].startswith("tool 'list_accounts': inputSchema is not valid JSON Schema")
    assert problems[2].startswith("tool 'bad.name': name 'bad.name' does not match")
    assert result.status == "failed"


async def test_verify_mcp_tool_schema_for_a_role_sees_what_the_role_sees(base: Path) -> None:
    result, _ = await run(
        [
            DEPLOY,
            {
                "id": "off",
                "type": "modify_env_tool_access",
                "action": "disable",
                "role": "customer",
                "tools": ["deposit"],
            },
            {"id": "v", "type": "verify_mcp_tool_schema", "role": "customer"},
        ],
        base,
    )
    assert result.scores["v"].details["tools"] == 2


@pytest.mark.parametrize(
    ("tool", "problem"),
    [
        ({"name": "x" * 65, "description": "d", "inputSchema": {"type": "object"}}, "name"),
        ({"name": "ok", "description": "", "inputSchema": {"type": "object"}}, "description"),
        ({"name": "ok", "description": "d", "inputSchema": {"type": "array"}}, "not 'object'"),
        ({"name": "ok", "description": "d", "inputSchema": "object"}, "not an object"),
        (
            {"name": "ok", "description": "d", "inputSchema": {"type": "object", "required": 3}},
            "JSON Schema 2020-12 at required",
        ),
    ],
)
def test_tool_problems_names_what_is_wrong(tool: dict[str, Any], problem: str) -> None:
    (found,) = tool_problems(tool)
    assert problem in found


# -- verify_spec_conformance ------------------------------------------------------------


async def test_verify_spec_conformance_passes_our_card_and_data_plane(base: Path) -> None:
    result, ctx = await run([DEPLOY, {"id": "v", "type": "verify_spec_conformance"}], base)
    assert result.status == "passed", result.error
    score = result.scores["v"]
    assert score.score == 1.0 and score.passed
    assert score.details["problems"] == []
    assert score.details["checks"] > 20
    gateway = ctx.env("bank").gateway
    assert gateway.instances == ["default"]  # the scratch instance is gone
    assert len(gateway.instance().trajectory) == 0  # the task's instance was not touched


def card_json(base: Path) -> dict[str, Any]:
    from agentenv.gateway import Gateway

    gateway = Gateway(Environment.load(base / "bank"))
    interfaces = [Interface(url="/mcp", transport="mcp")]
    return build_card(gateway, Principal("customer"), interfaces=interfaces).to_json()


def test_card_problems_accepts_our_card(base: Path) -> None:
    checks = card_problems(card_json(base))
    assert checks.problems == []


def test_card_problems_names_each_departure_from_the_protocol(base: Path) -> None:
    card = card_json(base)
    card["name"] = "my bank"
    card["protocolVersion"] = "0.9"
    card["capabilities"]["extensions"] = [
        e for e in card["capabilities"]["extensions"] if e["uri"] != "urn:agentenv:clock/v1"
    ]
    step_ext = next(
        e for e in card["capabilities"]["extensions"] if e["uri"] == "urn:agentenv:step/v1"
    )
    step_ext["params"]["methods"] = {}
    card["capabilities"]["operations"] = ["data/get"]
    card["additionalInterfaces"] = [{"url": "/model-context", "transport": "mcp"}]
    del card["children_environments"]
    problems = card_problems(card).problems
    assert problems == [
        "card.name 'my bank' is empty or has whitespace",
        "card.protocolVersion is '0.9', not '1.0'",
        "card.additionalInterfaces[0]: MCP is served at '/model-context', not '/mcp'",
        "card: extension urn:agentenv:step/v1 lacks POST /step",
        "card: extension urn:agentenv:clock/v1 is missing",
        "card.capabilities.operations lacks data/reset, data/add, data/get",
        "card.children_environments is missing",
    ]


async def test_verify_spec_conformance_can_skip_the_data_plane(base: Path) -> None:
    result, _ = await run(
        [
            DEPLOY,
            {"id": "card_only", "type": "verify_spec_conformance", "data_plane": False},
            {"id": "full", "type": "verify_spec_conformance"},
        ],
        base,
    )
    card_only, full = result.scores["card_only"], result.scores["full"]
    assert card_only.passed and full.passed
    assert card_only.details["checks"] == card_problems(card_json(base)).count
    assert full.details["checks"] > card_only.details["checks"]
