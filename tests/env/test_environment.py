"""Environment: building the runtime from documents, tool files and classes."""

from __future__ import annotations

import textwrap
from datetime import timedelta
from pathlib import Path

import pytest
import yaml

from agentenv import Environment, Gateway, Principal, load_environment
from agentenv.spec import DocumentError, parse_environment_spec
from agentenv.state import CollectionInfo, State

TOOLS_PY = '''
from agentenv import ToolContext, ToolError, tool
from env_test_helpers import normalise  # a sibling module, found beside tools.py


@tool(kind="read", duration=0)
def get_ticket(ctx: ToolContext, ticket_id: str) -> dict:
    """Fetch a ticket.

    Args:
        ticket_id: The ticket's id.
    """
    return ctx.state.require("tickets", ticket_id)


@tool(roles=["agent"], duration=120)
def close_ticket(ctx: ToolContext, ticket_id: str) -> dict:
    """Close a ticket."""
    return ctx.state.update("tickets", ticket_id, {"status": normalise("CLOSED")})


def shout(text: str) -> str:
    """Not marked: only reachable through a `function:` entry."""
    return text.upper()


@tool(name="bad name")
def badly_named() -> None:
    return None


NOT_CALLABLE = 42
'''

HELPERS_PY = """
def normalise(text: str) -> str:
    return text.lower()
"""

MORE_PY = '''
from agentenv import tool


@tool
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool(roles=["ghost"])
def haunted() -> None:
    return None
'''


def doc(**fields) -> dict:
    base = {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": "helpdesk",
        "version": "1.2.0",
        "description": "Tickets.",
        "roles": [{"name": "agent", "description": "Works tickets"}, {"name": "user"}],
        "state": {"tickets": {"schema": {"type": "object", "required": ["id", "status"]}}},
        "seed": {"tickets": [{"id": "T-1", "status": "open"}, {"id": "T-2", "status": "open"}]},
        "tools": [
            {"function": "tools.py:get_ticket"},
            {"function": "tools.py:close_ticket"},
        ],
    }
    base.update(fields)
    return base


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "tools.py").write_text(textwrap.dedent(TOOLS_PY))
    (tmp_path / "env_test_helpers.py").write_text(textwrap.dedent(HELPERS_PY))
    (tmp_path / "more.py").write_text(textwrap.dedent(MORE_PY))
    return tmp_path


def write_env(folder: Path, data: dict) -> Path:
    (folder / "env.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    return folder


def load(folder: Path, **fields) -> Environment:
    return Environment.load(write_env(folder, doc(**fields)))


def error_of(folder: Path, **fields) -> DocumentError:
    with pytest.raises(DocumentError) as info:
        load(folder, **fields)
    assert info.value.file == str(folder / "env.yaml")
    return info.value


# -- good documents --------------------------------------------------------------------------


def test_an_environment_from_a_folder(folder: Path) -> None:
    env = load(folder)
    assert env.name == "helpdesk"
    assert env.version == "1.2.0"
    assert env.description == "Tickets."
    assert env.roles == ("agent", "user")
    assert env.default_role == "agent"
    assert env.role_descriptions == {"agent": "Works tickets", "user": ""}
    assert env.source == folder / "env.yaml"
    assert list(env.tools) == ["get_ticket", "close_ticket"]
    assert env.tool("get_ticket") is env.tools["get_ticket"]
    assert env.tool("nope") is None


def test_function_tools_keep_their_decorator_options(folder: Path) -> None:
    env = load(folder)
    get, close = env.tools["get_ticket"], env.tools["close_ticket"]
    assert get.kind == "read" and get.duration == timedelta(0)
    assert get.input_schema["properties"]["ticket_id"]["description"] == "The ticket's id."
    assert close.roles == ("agent",)
    assert close.duration == timedelta(minutes=2)


async def test_the_tools_run_against_the_seeded_state(folder: Path) -> None:
    gw = Gateway(load(folder))
    out = await gw.call(Principal("agent"), "close_ticket", {"ticket_id": "T-1"})
    assert out.ok, out.error
    assert out.value == {"id": "T-1", "status": "closed"}  # normalised by the sibling module


def test_document_fields_override_the_function(folder: Path) -> None:
    env = load(
        folder,
        tools=[
            {
                "function": "tools.py:close_ticket",
                "name": "resolve",
                "description": "Resolve a ticket.",
                "roles": ["user"],
                "kind": "read",
                "duration": 0,
                "timeout": 4,
            },
            {"function": "tools.py:shout"},
        ],
    )
    resolve = env.tools["resolve"]
    assert resolve.description == "Resolve a ticket."
    assert resolve.roles == ("user",)
    assert resolve.kind == "read"
    assert resolve.duration == timedelta(0)  # 0 from the document wins over the decorator's 120
    assert resolve.timeout == 4
    assert (
        env.tools["shout"].description == "Not marked: only reachable through a `function:` entry."
    )


def test_a_module_entry_takes_every_marked_function(folder: Path) -> None:
    env = load(folder, roles=[{"name": "agent"}], tools=[{"module": "more.py", "roles": ["agent"]}])
    assert sorted(env.tools) == ["haunted", "ping"]
    assert env.tools["ping"].roles == ("agent",)  # the entry's roles apply to each


def test_an_importable_module_by_dotted_name(folder: Path) -> None:
    env = load(folder, tools=[{"function": "textwrap:dedent", "name": "dedent"}])
    assert env.tools["dedent"].source == "textwrap:dedent"


def test_the_default_role_can_be_named(folder: Path) -> None:
    assert load(folder, default_role="user").default_role == "user"


def test_load_environment_is_environment_load(folder: Path) -> None:
    write_env(folder, doc())
    assert (
        load_environment(folder / "env.yaml").tools.keys() == Environment.load(folder).tools.keys()
    )


def test_the_seed_is_a_frozen_snapshot_and_every_state_forks_from_it(folder: Path) -> None:
    env = load(folder)
    a, b = env.new_state(), env.new_state()
    assert a.hash() == b.hash() == env.seed.hash()
    a.update("tickets", "T-1", {"status": "closed"})
    assert b.get("tickets", "T-1")["status"] == "open"
    assert env.new_state().get("tickets", "T-1")["status"] == "open"
    assert env.seed.to_dict()["tickets"][0]["status"] == "open"


def test_an_environment_with_no_tools_or_state() -> None:
    env = Environment.from_spec(
        parse_environment_spec({"apiVersion": "agentenv/v1", "kind": "Environment", "name": "x"})
    )
    assert env.tools == {}
    assert env.roles == ("default",)
    assert env.new_state().collections == []
    assert env.source is None


def test_same_documents_give_the_same_seed_hash(folder: Path) -> None:
    assert load(folder).seed.hash() == load(folder).seed.hash()


# -- bad references --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tools", "path", "problem"),
    [
        (
            [{"function": "tools.py"}],
            "tools[0].function",
            "expected 'file.py:name' or 'module:name'",
        ),
        ([{"function": ":get_ticket"}], "tools[0].function", "expected 'file.py:name'"),
        ([{"function": "nope.py:f"}], "tools[0].function", "no file 'nope.py' (looked in"),
        ([{"function": "tools.py:missing"}], "tools[0].function", "'tools.py' has no 'missing'"),
        ([{"function": "tools.py:NOT_CALLABLE"}], "tools[0].function", "is not callable"),
        (
            [{"function": "no_such_package_xyz:f"}],
            "tools[0].function",
            "cannot import 'no_such_package_xyz'",
        ),
        ([{"module": "env_test_helpers.py"}], "tools[0].module", "no @tool functions in"),
        ([{"function": "tools.py:badly_named"}], "tools[0]", "has characters MCP forbids"),
        (
            [{"function": "tools.py:get_ticket"}, {"function": "tools.py:get_ticket"}],
            "tools[1]",
            "a second tool named 'get_ticket'",
        ),
        (
            [{"function": "more.py:haunted"}],
            "tools.haunted.roles",
            "unknown role 'ghost'",
        ),
    ],
)
def test_a_bad_tool_reference_is_located(
    folder: Path, tools: list, path: str, problem: str
) -> None:
    err = error_of(folder, tools=tools)
    assert err.path == path
    assert problem in err.problem


def test_a_tools_file_that_fails_to_import(folder: Path) -> None:
    (folder / "broken.py").write_text("raise ValueError('half written')\n")
    err = error_of(folder, tools=[{"module": "broken.py"}])
    assert err.path == "tools[0].module"
    assert err.problem == "importing 'broken.py' failed: ValueError: half written"


def test_a_function_with_star_args_cannot_be_a_tool(folder: Path) -> None:
    (folder / "star.py").write_text("def many(*names):\n    return names\n")
    err = error_of(folder, tools=[{"function": "star.py:many"}])
    assert err.path == "tools[0]"
    assert "cannot make a tool of 'many'" in err.problem


def test_access_rules_must_name_existing_tools(folder: Path) -> None:
    err = error_of(folder, access=[{"role": "user", "tools": ["get_ticket", "reopen"]}])
    assert err.path == "access[0].tools[1]"
    assert err.problem == "unknown tool 'reopen'"
    # `*` and get_time are always fine.
    load(folder, access=[{"role": "user", "tools": "*"}, {"role": "*", "tools": ["get_time"]}])


def test_a_bulk_seed_equals_one_insert_per_record_and_keeps_no_reference_to_the_spec() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["id"]}
    rows = [{"id": f"r{i}", "n": i, "tags": [i]} for i in range(300)]
    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "bulk",
            "state": {"items": {"schema": schema}},
            "seed": {"items": rows},
        }
    )
    env = Environment.from_spec(spec)
    one_by_one = State({"items": CollectionInfo.create("id", schema)})
    for row in rows:
        one_by_one.insert("items", row)
    assert env.seed.hash() == one_by_one.hash()
    assert env.seed.to_dict() == one_by_one.to_dict()  # the same records in the same order
    assert env.seed.changes == one_by_one.changes == 300
    spec.seed["items"][0]["tags"].append("later")  # type: ignore[index]
    assert env.new_state().get("items", "r0") == {"id": "r0", "n": 0, "tags": [0]}


def test_a_seed_record_the_schema_refuses_names_it_as_an_insert_would() -> None:
    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "bulk",
            "state": {"items": {"schema": {"type": "object", "required": ["id"]}}},
        }
    )
    with pytest.raises(DocumentError) as info:
        Environment.from_spec(spec.model_copy(update={"seed": {"items": [{"id": "a"}, ["x"]]}}))
    assert "invalid record items: expected an object, got list" in str(info.value)
