"""Class-backed environments: public methods are tools, attributes are state."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agentenv import Environment, Gateway, Principal, ToolContext, tool
from agentenv.spec import DocumentError, load_environment_spec

AGENT = Principal("default")


class Bookshop:
    """A small bookshop."""

    def __init__(self) -> None:
        self.books = {
            "b1": {"title": "Dune", "stock": 2, "price": 10},
            "b2": {"title": "Emma", "stock": 0, "price": 8},
        }
        self.stock_alerts = {"b2": "out of stock"}
        self.cash = 100
        self.motto = "read more"
        self.history: list[str] = []

    def get_book(self, book_id: str) -> dict:
        """Look up a book.

        Args:
            book_id: The book's id.
        """
        book = self.books.get(book_id)
        if book is None:
            return {"success": False, "error": f"no book {book_id}"}
        return {"success": True, "book": book}

    def sell(self, book_id: str, qty: int = 1) -> dict:
        """Sell copies of a book."""
        book = self.books[book_id]  # a KeyError for an unknown book
        if book["stock"] < qty:
            return {"success": False, "error": "not enough stock"}
        book["stock"] -= qty
        self.cash += qty * book["price"]
        self.history.append(f"sold {qty} {book_id}")
        return {"success": True, "stock": book["stock"], "cash": self.cash}

    def restock(self, book_id: str, qty: int) -> dict:
        """Add copies; clears any stock alert."""
        self.books[book_id]["stock"] += qty
        self.stock_alerts.pop(book_id, None)
        return {"success": True}

    def add_book(self, book_id: str, title: str) -> str:
        self.books[book_id] = {"title": title, "stock": 0, "price": 1}
        return book_id

    def break_halfway(self) -> None:
        self.cash = 0
        raise RuntimeError("the till jammed")

    def fail_with_message(self) -> dict:
        self.cash = -1
        return {"success": False, "message": "closed today"}

    async def count_async(self) -> int:
        self.cash += 1
        return len(self.books)

    def _private_helper(self) -> None:
        raise AssertionError("not a tool")


@pytest.fixture(scope="module")
def env() -> Environment:
    return Environment.from_class(Bookshop, roles=["default", "manager"])


@pytest.fixture
def gw(env: Environment) -> Gateway:
    return Gateway(env)


def test_public_methods_become_tools(env: Environment) -> None:
    assert sorted(env.tools) == [
        "add_book",
        "break_halfway",
        "count_async",
        "fail_with_message",
        "get_book",
        "restock",
        "sell",
    ]
    get_book = env.tools["get_book"]
    assert get_book.description == "Look up a book."
    assert get_book.input_schema["properties"] == {
        "book_id": {"type": "string", "description": "The book's id."}
    }
    assert env.tools["sell"].input_schema["required"] == ["book_id"]
    assert env.tools["count_async"].is_async
    assert env.tools["sell"].source == "class:Bookshop.sell"


def test_the_environment_takes_its_name_and_description_from_the_class(env: Environment) -> None:
    assert env.name == "Bookshop"
    assert env.description == "A small bookshop."
    assert env.roles == ("default", "manager")
    assert env.default_role == "default"
    named = Environment.from_class(Bookshop, name="shop", description="Mine.")
    assert (named.name, named.description) == ("shop", "Mine.")


def test_attributes_become_state(env: Environment) -> None:
    state = env.new_state()
    assert state.collections == ["books", "stock_alerts", "_attributes"]
    assert state.info("books").key == "_key"
    assert state.list("books") == [
        {"_key": "b1", "title": "Dune", "stock": 2, "price": 10},
        {"_key": "b2", "title": "Emma", "stock": 0, "price": 8},
    ]
    # A non-dict value of a dict attribute is wrapped as `_value`.
    assert state.list("stock_alerts") == [{"_key": "b2", "_value": "out of stock"}]
    assert state.list("_attributes") == [
        {"_key": "cash", "_value": 100},
        {"_key": "motto", "_value": "read more"},
        {"_key": "history", "_value": []},
    ]


async def test_a_mutation_persists_across_calls(gw: Gateway) -> None:
    first = await gw.call(AGENT, "sell", {"book_id": "b1"})
    assert first.ok, first.error
    assert first.value == {"success": True, "stock": 1, "cash": 110}
    second = await gw.call(AGENT, "sell", {"book_id": "b1"})
    assert second.value == {"success": True, "stock": 0, "cash": 120}
    state = gw.instance().state
    assert state.get("books", "b1")["stock"] == 0
    assert state.get("_attributes", "cash") == {"_key": "cash", "_value": 120}
    assert state.get("_attributes", "history")["_value"] == ["sold 1 b1", "sold 1 b1"]


async def test_entries_can_be_added_and_removed(gw: Gateway) -> None:
    assert (await gw.call(AGENT, "add_book", {"book_id": "b3", "title": "Ulysses"})).value == "b3"
    assert (await gw.call(AGENT, "restock", {"book_id": "b2", "qty": 3})).ok
    state = gw.instance().state
    assert state.get("books", "b3") == {"_key": "b3", "title": "Ulysses", "stock": 0, "price": 1}
    assert state.count("stock_alerts") == 0
    assert state.get("books", "b2")["stock"] == 3


async def test_only_what_changed_is_written(gw: Gateway) -> None:
    state = gw.instance().state
    before = state.changes
    await gw.call(AGENT, "restock", {"book_id": "b1", "qty": 1})
    # one book and one alert-free call: a single record write
    assert state.changes == before + 1


async def test_a_read_that_returns_success_false_is_a_tool_error(gw: Gateway) -> None:
    before = gw.instance().state.hash()
    out = await gw.call(AGENT, "get_book", {"book_id": "zz"})
    assert not out.ok
    assert out.error is not None
    assert (out.error.kind, out.error.message) == ("tool_error", "no book zz")
    assert gw.instance().state.hash() == before


@pytest.mark.parametrize(
    ("method", "args", "message"),
    [
        ("sell", {"book_id": "b2"}, "not enough stock"),
        ("fail_with_message", {}, "closed today"),
        ("break_halfway", {}, "RuntimeError: the till jammed"),
        ("sell", {"book_id": "nope"}, "KeyError: 'nope'"),
    ],
)
async def test_failures_leave_the_state_hash_unchanged(
    gw: Gateway, method: str, args: dict, message: str
) -> None:
    state = gw.instance().state
    before = (state.hash(), state.changes)
    out = await gw.call(AGENT, method, args)
    assert not out.ok
    assert out.error is not None and out.error.kind == "tool_error"
    assert out.error.message == message
    assert (state.hash(), state.changes) == before
    # ... and the next call sees the untouched state.
    assert (await gw.call(AGENT, "get_book", {"book_id": "b1"})).value["book"]["stock"] == 2


async def test_async_methods_work_and_persist(gw: Gateway) -> None:
    out = await gw.call(AGENT, "count_async", {})
    assert (out.ok, out.value) == (True, 2)
    assert gw.instance().state.get("_attributes", "cash")["_value"] == 101


async def test_instances_of_a_class_env_are_isolated(gw: Gateway) -> None:
    gw.create_instance("other")
    await gw.call(AGENT, "sell", {"book_id": "b1", "qty": 2}, instance="other")
    assert gw.instance("other").state.get("books", "b1")["stock"] == 0
    assert gw.instance().state.get("books", "b1")["stock"] == 2


def test_only_marked_methods_are_tools_when_any_is_marked() -> None:
    class Marked:
        def __init__(self) -> None:
            self.n = 0

        @tool(kind="read")
        def peek(self) -> int:
            return self.n

        def helper(self) -> int:
            return 1

    env = Environment.from_class(Marked)
    assert list(env.tools) == ["peek"]
    assert env.tools["peek"].kind == "read"


def test_a_class_that_needs_arguments_is_refused() -> None:
    class NeedsArgs:
        def __init__(self, size: int) -> None:
            self.size = size

        def grow(self) -> None:
            self.size += 1

    with pytest.raises(TypeError, match="must be constructible with no arguments"):
        Environment.from_class(NeedsArgs)


def test_an_attribute_that_is_not_json_is_a_document_error() -> None:
    class Bad:
        def __init__(self) -> None:
            self.tags = {"a", "b"}

        def noop(self) -> None:
            return None

    with pytest.raises(DocumentError, match="not JSON-serialisable"):
        Environment.from_class(Bad)


async def test_a_method_may_take_the_context() -> None:
    class Clocked:
        def __init__(self) -> None:
            self.seen: list[str] = []

        @tool
        def stamp(self, ctx: ToolContext, note: str) -> str:
            self.seen.append(f"{ctx.principal.role}:{note}")
            return note

    gw = Gateway(Environment.from_class(Clocked))
    assert list(gw.env.tools["stamp"].input_schema["properties"]) == ["note"]
    out = await gw.call(AGENT, "stamp", {"note": "hi"})
    assert out.ok, out.error
    assert gw.instance().state.get("_attributes", "seen")["_value"] == ["default:hi"]


# -- from a document -------------------------------------------------------------------------

SHOP_PY = '''
class Shop:
    """A shop."""

    def __init__(self):
        self.items = {"pen": {"price": 2}}

    def price(self, item: str) -> int:
        return self.items[item]["price"]

    def set_price(self, item: str, price: int) -> dict:
        self.items[item]["price"] = price
        return {"success": True}
'''


def _write_shop(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "shop.py").write_text(textwrap.dedent(SHOP_PY))
    (tmp_path / "env.yaml").write_text(
        textwrap.dedent(
            """\
            apiVersion: agentenv/v1
            kind: Environment
            name: shop
            roles: [{name: clerk}, {name: owner}]
            class: shop.py:Shop
            """
        )
        + textwrap.dedent(extra)
    )
    return tmp_path


async def test_a_class_environment_from_a_document(tmp_path: Path) -> None:
    env = Environment.load(_write_shop(tmp_path))
    assert sorted(env.tools) == ["price", "set_price"]
    gw = Gateway(env)
    assert (await gw.call(Principal("clerk"), "set_price", {"item": "pen", "price": 3})).ok
    assert (await gw.call(Principal("clerk"), "price", {"item": "pen"})).value == 3


async def test_method_entries_set_options_of_class_tools(tmp_path: Path) -> None:
    env = Environment.load(
        _write_shop(
            tmp_path,
            """\
            tools:
              - method: set_price
                roles: [owner]
                description: Change a price.
              - method: price
                kind: read
                duration: PT1M
            """,
        )
    )
    assert env.tools["set_price"].roles == ("owner",)
    assert env.tools["set_price"].description == "Change a price."
    assert env.tools["price"].kind == "read"
    gw = Gateway(env)
    denied = await gw.call(Principal("clerk"), "set_price", {"item": "pen", "price": 9})
    assert denied.denied
    assert (await gw.call(Principal("owner"), "set_price", {"item": "pen", "price": 9})).ok


def test_a_method_entry_for_a_missing_method(tmp_path: Path) -> None:
    with pytest.raises(DocumentError) as info:
        Environment.load(_write_shop(tmp_path, "tools: [{method: discount}]\n"))
    assert info.value.path == "tools[0].method"
    assert "the class has no tool 'discount'" in str(info.value)


def test_a_method_entry_needs_a_class_environment(tmp_path: Path) -> None:
    (tmp_path / "env.yaml").write_text(
        "apiVersion: agentenv/v1\nkind: Environment\nname: x\ntools: [{method: price}]\n"
    )
    with pytest.raises(DocumentError) as info:
        load_environment_spec(tmp_path)
    assert info.value.path == "tools[0].method"


def test_a_state_collection_that_clashes_with_an_attribute(tmp_path: Path) -> None:
    with pytest.raises(DocumentError) as info:
        Environment.load(_write_shop(tmp_path, "state: {items: {}}\n"))
    assert info.value.path == "state.items"
    assert "also an attribute of the class" in str(info.value)


def test_a_class_reference_that_is_not_a_class(tmp_path: Path) -> None:
    _write_shop(tmp_path)
    (tmp_path / "shop.py").write_text(textwrap.dedent(SHOP_PY) + "\nNOT_A_CLASS = 3\n")
    text = (tmp_path / "env.yaml").read_text().replace("shop.py:Shop", "shop.py:NOT_A_CLASS")
    (tmp_path / "env.yaml").write_text(text)
    with pytest.raises(DocumentError) as info:
        Environment.load(tmp_path)
    assert info.value.path == "class"
    assert "is not a class" in str(info.value)
