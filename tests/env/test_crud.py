"""CRUD tools declared in a document: get, list, search, create, update, delete."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from agentenv import SYSTEM, Environment, Gateway, Principal, ToolContext, ToolError
from agentenv.spec import parse_environment_spec
from agentenv.state import State

BOOK_SCHEMA = {
    "type": "object",
    "properties": {
        "isbn": {"type": "string"},
        "title": {"type": "string", "minLength": 1},
        "author": {"type": "string"},
        "year": {"type": "integer", "minimum": 1400},
        "price": {"type": "number"},
        "in_stock": {"type": "boolean"},
        "genre": {"type": "string", "enum": ["fiction", "science"]},
    },
    "required": ["isbn", "title"],
}

SEED = [
    {
        "isbn": "1",
        "title": "Dune",
        "author": "Herbert",
        "year": 1965,
        "genre": "fiction",
        "in_stock": True,
    },
    {
        "isbn": "2",
        "title": "Cosmos",
        "author": "Sagan",
        "year": 1980,
        "genre": "science",
        "in_stock": False,
    },
    {
        "isbn": "3",
        "title": "Contact",
        "author": "Sagan",
        "year": 1985,
        "genre": "fiction",
        "in_stock": True,
    },
]


def _tool(name: str, op: str, collection: str = "books", **extra) -> dict:
    return {
        "name": name,
        "crud": {"collection": collection, "op": op, **extra.pop("crud", {})},
        **extra,
    }


DOC = {
    "apiVersion": "agentenv/v1",
    "kind": "Environment",
    "name": "library",
    "roles": [{"name": "reader"}, {"name": "librarian"}],
    "state": {
        "books": {"key": "isbn", "schema": BOOK_SCHEMA},
        "notes": {},
        "loans": {"key": "loan_id"},
    },
    "seed": {"books": SEED, "notes": [{"id": "n1", "body": "Return DUNE soon", "tag": "x"}]},
    "tools": [
        _tool("get_book", "get"),
        _tool("list_books", "list"),
        _tool("search_books", "search"),
        _tool("add_book", "create", roles=["librarian"], duration="PT2M", timeout=3),
        _tool("edit_book", "update"),
        _tool("remove_book", "delete", description="Withdraw a book."),
        _tool("add_note", "create", "notes"),
        _tool("search_notes", "search", "notes", crud={"fields": ["tag"]}),
        _tool("list_by_author", "list", crud={"fields": ["author"]}),
        _tool("get_note", "get", "notes", kind="write"),
        _tool(
            "list_loans",
            "list",
            "loans",
            params={"reader": {"type": "string", "required": True}, "days": {"type": "integer"}},
        ),
    ],
}


@pytest.fixture(scope="module")
def env() -> Environment:
    return Environment.from_spec(parse_environment_spec(DOC, "library/env.yaml"))


@pytest.fixture
def state(env: Environment) -> State:
    return env.new_state()


def call(env: Environment, state: State, name: str, **args):
    """Validate like the gateway does, then invoke the tool."""
    t = env.tools[name]
    values = dict(t.args_model.model_validate(args).__dict__)
    ctx = ToolContext(state, datetime(2026, 1, 1, tzinfo=UTC), Principal("reader"))
    return t.invoke(ctx, values)


# -- what the tools look like ----------------------------------------------------------------


def test_kinds_descriptions_and_options(env: Environment) -> None:
    kinds = {n: t.kind for n, t in env.tools.items()}
    assert kinds["get_book"] == kinds["list_books"] == kinds["search_books"] == "read"
    assert kinds["add_book"] == kinds["edit_book"] == kinds["remove_book"] == "write"
    assert kinds["get_note"] == "write"  # the document's kind wins
    assert env.tools["get_book"].description == "Get one books record by its isbn."
    assert env.tools["remove_book"].description == "Withdraw a book."
    add = env.tools["add_book"]
    assert add.roles == ("librarian",)
    assert add.duration == timedelta(minutes=2)
    assert add.timeout == 3
    assert env.tools["get_book"].roles is None
    assert env.tools["get_book"].source == "crud:books.get"


def test_get_and_delete_take_the_key(env: Environment) -> None:
    for name in ("get_book", "remove_book"):
        schema = env.tools[name].input_schema
        assert schema["properties"] == {"isbn": {"type": "string", "description": "The isbn."}}
        assert schema["required"] == ["isbn"]


def test_create_takes_the_record_schema_fields(env: Environment) -> None:
    schema = env.tools["add_book"].input_schema
    assert schema["properties"] == BOOK_SCHEMA["properties"]
    assert schema["required"] == ["isbn", "title"]


def test_create_without_a_schema_takes_a_record_object(env: Environment) -> None:
    schema = env.tools["add_note"].input_schema
    assert schema["properties"] == {"record": {"type": "object", "description": "The new record."}}
    assert schema["required"] == ["record"]


def test_list_filters_on_simple_fields_plus_paging(env: Environment) -> None:
    props = env.tools["list_books"].input_schema["properties"]
    # number fields (price) are not offered as exact-match filters
    assert list(props) == [
        "isbn",
        "title",
        "author",
        "year",
        "in_stock",
        "genre",
        "limit",
        "offset",
    ]
    assert props["limit"] == {
        "type": "integer",
        "default": 50,
        "minimum": 1,
        "description": "At most this many records.",
    }
    assert props["offset"] == {
        "type": "integer",
        "default": 0,
        "minimum": 0,
        "description": "Skip this many records first.",
    }
    # Nothing is required, and no empty `required` list is written (upstream's schema check
    # flags one); every parameter has a description.
    assert "required" not in env.tools["list_books"].input_schema
    assert all("description" in p for p in props.values())
    assert list(env.tools["list_by_author"].input_schema["properties"]) == [
        "author",
        "limit",
        "offset",
    ]


def test_update_takes_the_key_and_optional_fields(env: Environment) -> None:
    schema = env.tools["edit_book"].input_schema
    assert next(iter(schema["properties"])) == "isbn"
    assert set(schema["properties"]) == set(BOOK_SCHEMA["properties"])
    assert schema["required"] == ["isbn"]


def test_params_replace_the_record_schema(env: Environment) -> None:
    schema = env.tools["list_loans"].input_schema
    assert schema["properties"]["reader"]["type"] == "string"
    assert schema["properties"]["days"]["type"] == "integer"
    assert "required" not in schema["properties"]["reader"]


# -- get -------------------------------------------------------------------------------------


def test_get(env: Environment, state: State) -> None:
    assert call(env, state, "get_book", isbn="2")["title"] == "Cosmos"


def test_get_of_a_missing_record_is_a_tool_error(env: Environment, state: State) -> None:
    with pytest.raises(ToolError, match="no record '9' in 'books'"):
        call(env, state, "get_book", isbn="9")


def test_get_needs_its_key(env: Environment) -> None:
    with pytest.raises(ValidationError):
        env.tools["get_book"].args_model.model_validate({})


# -- list ------------------------------------------------------------------------------------


def test_list_everything(env: Environment, state: State) -> None:
    out = call(env, state, "list_books")
    assert [b["isbn"] for b in out["books"]] == ["1", "2", "3"]
    assert out["total"] == 3


def test_list_filters_by_exact_values(env: Environment, state: State) -> None:
    out = call(env, state, "list_books", author="Sagan", genre="fiction")
    assert [b["isbn"] for b in out["books"]] == ["3"]
    assert out["total"] == 1
    assert call(env, state, "list_books", in_stock=False)["books"][0]["isbn"] == "2"
    assert call(env, state, "list_books", year=1965)["total"] == 1
    assert call(env, state, "list_books", author="Nobody") == {"books": [], "total": 0}


def test_list_limit_and_offset(env: Environment, state: State) -> None:
    out = call(env, state, "list_books", limit=1, offset=1)
    assert [b["isbn"] for b in out["books"]] == ["2"]
    assert out["total"] == 3  # the total counts every match, not the page
    assert call(env, state, "list_books", offset=5)["books"] == []


def test_list_refuses_a_filter_it_does_not_offer(env: Environment) -> None:
    with pytest.raises(ValidationError):
        env.tools["list_by_author"].args_model.model_validate({"genre": "fiction"})
    with pytest.raises(ValidationError, match="'fiction' or 'science'"):
        env.tools["list_books"].args_model.model_validate({"genre": "poetry"})


# -- search ----------------------------------------------------------------------------------


def test_search_is_case_insensitive_over_text_fields(env: Environment, state: State) -> None:
    out = call(env, state, "search_books", query="CO")
    assert [b["isbn"] for b in out["books"]] == ["2", "3"]
    assert call(env, state, "search_books", query="sagan")["total"] == 2
    assert call(env, state, "search_books", query="1965")["total"] == 0  # not a text field
    assert call(env, state, "search_books", query="co", limit=1)["books"][0]["isbn"] == "2"


def test_search_restricted_to_fields(env: Environment, state: State) -> None:
    assert call(env, state, "search_notes", query="dune")["total"] == 0  # body is not searched
    assert call(env, state, "search_notes", query="X")["total"] == 1


# -- create ----------------------------------------------------------------------------------


def test_create(env: Environment, state: State) -> None:
    out = call(env, state, "add_book", isbn="4", title="Solaris", year=1961)
    assert out == {"isbn": "4", "title": "Solaris", "year": 1961}  # unset fields are left out
    assert state.get("books", "4") == out


def test_create_refuses_a_taken_key(env: Environment, state: State) -> None:
    with pytest.raises(ToolError, match="already exists"):
        call(env, state, "add_book", isbn="1", title="Again")
    assert state.get("books", "1")["title"] == "Dune"


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"isbn": "4", "title": ""}, "title: ''"),
    ],
)
def test_create_checks_the_record_schema(env: Environment, state: State, args, problem) -> None:
    before = state.hash()
    with pytest.raises(ToolError) as info:
        call(env, state, "add_book", **args)
    assert str(info.value).startswith(f"invalid record books['4']: {problem}")
    assert state.hash() == before


def test_create_refuses_wrong_types_and_unknown_fields(env: Environment) -> None:
    model = env.tools["add_book"].args_model
    with pytest.raises(ValidationError):
        model.model_validate({"isbn": "4", "title": "X", "year": "soon"})
    with pytest.raises(ValidationError):
        model.model_validate({"isbn": "4", "title": "X", "colour": "red"})
    with pytest.raises(ValidationError):
        model.model_validate({"isbn": "4"})


def test_create_from_a_record_object(env: Environment, state: State) -> None:
    out = call(env, state, "add_note", record={"id": "n2", "body": "hi", "extra": [1]})
    assert out == {"id": "n2", "body": "hi", "extra": [1]}
    with pytest.raises(ToolError, match="missing key field 'id'"):
        call(env, state, "add_note", record={"body": "no key"})


def test_create_keeps_a_whole_number_as_written(env: Environment, state: State) -> None:
    out = call(env, state, "add_book", isbn="4", title="X", price=5)
    direct = env.new_state()
    direct.insert("books", {"isbn": "4", "title": "X", "price": 5})
    assert repr(out["price"]) == "5"
    assert state.hash() == direct.hash()


# -- update ----------------------------------------------------------------------------------


def test_update_merges_the_given_fields(env: Environment, state: State) -> None:
    out = call(env, state, "edit_book", isbn="2", in_stock=True, year=1981)
    assert out == {**SEED[1], "in_stock": True, "year": 1981}
    assert state.get("books", "2") == out


def test_update_of_a_missing_record(env: Environment, state: State) -> None:
    with pytest.raises(ToolError, match="no record '9'"):
        call(env, state, "edit_book", isbn="9", title="X")


def test_update_checks_the_schema(env: Environment, state: State) -> None:
    before = state.hash()
    with pytest.raises(ToolError, match=r"invalid record books\['2'\]: title: ''"):
        call(env, state, "edit_book", isbn="2", title="")
    assert state.hash() == before


# -- delete ----------------------------------------------------------------------------------


def test_delete(env: Environment, state: State) -> None:
    assert call(env, state, "remove_book", isbn="1") == {"deleted": "1"}
    assert not state.has("books", "1")
    with pytest.raises(ToolError, match="no record '1'"):
        call(env, state, "remove_book", isbn="1")


# -- through the gateway ---------------------------------------------------------------------


async def test_through_the_gateway_a_schema_violation_is_a_tool_error(env: Environment) -> None:
    gw = Gateway(env)
    librarian = Principal("librarian")
    before = gw.instance().state.hash()
    bad = await gw.call(librarian, "add_book", {"isbn": "4", "title": "", "year": 1961})
    assert not bad.ok
    assert bad.error is not None and bad.error.kind == "tool_error"
    assert "title: '' should be non-empty" in bad.error.message
    # Bounds the schema advertises (minimum) are checked with the arguments already.
    low = await gw.call(librarian, "add_book", {"isbn": "4", "title": "Old", "year": 1200})
    assert low.error is not None and low.error.kind == "invalid_arguments"
    assert "year: Input should be greater than or equal to 1400" in low.error.message
    assert gw.instance().state.hash() == before
    good = await gw.call(librarian, "add_book", {"isbn": "4", "title": "Solaris"})
    assert good.ok and good.value == {"isbn": "4", "title": "Solaris"}
    assert (await gw.call(librarian, "get_book", {"isbn": "4"})).value["title"] == "Solaris"


async def test_through_the_gateway_crud_roles_apply(env: Environment) -> None:
    gw = Gateway(env)
    denied = await gw.call(Principal("reader"), "add_book", {"isbn": "4", "title": "X"})
    assert denied.denied
    assert "add_book" not in [t.name for t in gw.list_tools(Principal("reader"))]
    assert (await gw.call(SYSTEM, "add_book", {"isbn": "4", "title": "X"})).ok


@pytest.mark.parametrize(
    ("tool", "args"),
    [
        ("list_books", {"limit": 0}),
        ("list_books", {"limit": -1}),
        ("list_books", {"offset": -1}),
        ("search_books", {"query": "a", "limit": -1}),
    ],
)
async def test_out_of_range_paging_is_invalid(env: Environment, tool: str, args: dict) -> None:
    gw = Gateway(env)
    out = await gw.call(Principal("reader"), tool, args)
    assert not out.ok
    assert out.error is not None and out.error.kind == "invalid_arguments"
