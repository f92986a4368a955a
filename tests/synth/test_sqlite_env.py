"""An environment from a SQLite database: `env_from_sqlite` and `agent-env synth env`."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from agentenv import Environment, Gateway, Principal
from agentenv.cli.synth_sqlite_command import synth_env
from agentenv.synth.sqlite import (
    SqliteReport,
    env_from_sqlite,
    parse_check,
    parse_default,
    sql_type_family,
)
from agentenv.synth.sqlite.runtime import composite_key
from agentenv.synth.sqlite.sqltext import _tokens

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_SQL = ROOT / "examples" / "databases" / "sample.sql"
EXAMPLE = ROOT / "examples" / "envs" / "from-sqlite"
START = datetime(2026, 3, 2, 9, tzinfo=UTC)
AGENT, ADMIN = Principal("agent"), Principal("admin")


def make_db(path: Path, sql: str) -> Path:
    conn = sqlite3.connect(path)
    conn.executescript(sql)
    conn.close()
    return path


def generate(tmp_path: Path, sql: str, **options) -> tuple[SqliteReport, Path]:
    db = make_db(tmp_path / "test.db", sql)
    out = tmp_path / "env"
    return env_from_sqlite(db, out, **options), out


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> tuple[SqliteReport, Path]:
    """The sample database (examples/databases/sample.sql), made into an environment."""
    tmp = tmp_path_factory.mktemp("library")
    db = make_db(tmp / "sample.db", SAMPLE_SQL.read_text())
    out = tmp / "from-sqlite"
    report = env_from_sqlite(db, out, name="library", clock_start=START)
    assert report.ok, report.errors
    return report, out


@pytest.fixture
def gateway(library: tuple[SqliteReport, Path]) -> Gateway:
    return Gateway(Environment.load(library[1]))


async def ok(gw: Gateway, tool: str, principal: Principal = AGENT, **args):
    result = await gw.call(principal, tool, args)
    assert result.ok, result.error
    return result.value


async def refused(gw: Gateway, tool: str, principal: Principal = AGENT, **args) -> str:
    before = gw.instance().state.hash()
    result = await gw.call(principal, tool, args)
    assert not result.ok, result.value
    assert gw.instance().state.hash() == before  # a failed call changes nothing
    assert result.error is not None
    return f"{result.error.kind}: {result.error.message}"


# -- the sample database, end to end ------------------------------------------------------------


def test_sample_report(library: tuple[SqliteReport, Path]) -> None:
    report, out = library
    assert [t.collection for t in report.tables] == [
        "authors",
        "books",
        "book_tags",
        "members",
        "loans",
    ]
    assert report.records == 139
    assert report.warnings == []
    assert any("loans_status_transitions" in n for n in report.notes)
    loans = report.tables[-1]
    assert loans.foreign_keys == ["book_id -> books.id", "member_id -> members.id"]
    assert loans.enums == ["status (4 values, transitions)"]
    assert {f.name for f in (out / "seed").iterdir()} == {
        f"{t.collection}.json" for t in report.tables
    }
    assert sorted(report.tools) == sorted(t for table in report.tables for t in table.tools)


def test_sample_matches_the_committed_example(library: tuple[SqliteReport, Path]) -> None:
    """examples/envs/from-sqlite is this generator's output for sample.sql (see its README)."""
    _, out = library
    generated = {p.relative_to(out) for p in out.rglob("*") if p.is_file()}
    for rel in sorted(generated):
        assert (EXAMPLE / rel).read_text() == (out / rel).read_text(), f"{rel} is stale"


def test_loads_with_seed_and_roles(library: tuple[SqliteReport, Path]) -> None:
    env = Environment.load(library[1])
    assert env.roles == ("agent", "admin") and env.default_role == "agent"
    seed = env.seed.to_dict()
    assert len(seed["books"]) == 30 and seed["books"][0]["id"] == 1
    assert seed["members"][0]["active"] is True  # BOOLEAN 1 -> true
    assert seed["book_tags"][0] == {"_key": "1|award", "book_id": 1, "tag": "award"}
    assert env.clock.start == START
    gw = Gateway(env)
    agent_tools = {t.name for t in gw.tools_for(AGENT)}
    assert "delete_book" not in agent_tools and "create_book" in agent_tools
    assert "delete_book" in {t.name for t in gw.tools_for(ADMIN)}


def test_deterministic(tmp_path: Path, library: tuple[SqliteReport, Path]) -> None:
    db = make_db(tmp_path / "sample.db", SAMPLE_SQL.read_text())
    again = tmp_path / "again"
    assert env_from_sqlite(db, again, name="library", clock_start=START).ok
    first = library[1]
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob("*") if p.is_file())
    for rel in files:
        assert (first / rel).read_bytes() == (again / rel).read_bytes()
    # --force rewrites the same bytes
    assert env_from_sqlite(db, again, name="library", clock_start=START, overwrite=True).ok
    assert (again / "tools.py").read_bytes() == (first / "tools.py").read_bytes()


async def test_get_list_search(gateway: Gateway) -> None:
    book = await ok(gateway, "get_book", id=1)
    assert book["title"] == "Paper Stars" and book["author_id"] == 8
    poetry = await ok(gateway, "list_books", genre="poetry")
    assert poetry["total"] == 6 and {b["genre"] for b in poetry["books"]} == {"poetry"}
    found = await ok(gateway, "search_books", query="harbour")
    assert found["total"] >= 1 and all("harbour" in b["title"].lower() for b in found["books"])
    tag = await ok(gateway, "get_book_tag", book_id=1, tag="award")
    assert tag["_key"] == "1|award"
    assert "no book_tags book_id=1, tag='nope'" in await refused(
        gateway, "get_book_tag", book_id=1, tag="nope"
    )


async def test_create_update_with_defaults_and_keys(gateway: Gateway) -> None:
    author = await ok(gateway, "create_author", name="Nadia Vos")
    assert author == {"id": 13, "name": "Nadia Vos", "country": None, "born": None}
    book = await ok(gateway, "create_book", isbn="978-1", title="New", author_id=13, genre="poetry")
    assert book["copies"] == 1 and book["id"] == 31  # the column default, the next key
    loan = await ok(
        gateway, "create_loan", book_id=31, member_id=1, loaned_on="2026-03-02", due_on="2026-03-23"
    )
    assert loan["status"] == "open"
    assert loan["created_at"] == "2026-03-02 09:00:02"  # CURRENT_TIMESTAMP: virtual, 1 s a call
    updated = await ok(gateway, "update_author", id=13, country="Belgium")
    assert updated["country"] == "Belgium"
    cleared = await ok(gateway, "update_author", id=13, clear=["country"])
    assert cleared["country"] is None
    assert "already exists" in await refused(gateway, "create_author", id=13, name="Again")
    assert "invalid_arguments" in await refused(gateway, "update_author", id=13, clear=["name"])


async def test_dangling_reference_is_a_tool_error(gateway: Gateway) -> None:
    message = await refused(
        gateway, "create_book", isbn="978-2", title="Orphan", author_id=99, genre="fiction"
    )
    assert message == ("tool_error: no authors record with id=99 (books.author_id refers to it)")
    message = await refused(gateway, "update_loan", id=3, member_id=404)
    assert "no members record with id=404" in message
    assert "no books record with id=77" in await refused(
        gateway, "create_book_tag", book_id=77, tag="x"
    )


async def test_delete_of_a_referenced_record_is_a_tool_error(gateway: Gateway) -> None:
    assert (await refused(gateway, "delete_author", id=3)).startswith("denied")
    message = await refused(gateway, "delete_author", ADMIN, id=3)
    assert message == (
        "tool_error: cannot delete authors id=3: still referenced by 3 books records "
        "(author_id); delete or change those first"
    )
    assert "loans" in await refused(gateway, "delete_member", ADMIN, id=1)


async def test_delete_cascades_and_sets_null(gateway: Gateway) -> None:
    state = gateway.instance().state
    # a book with tags and no loans: its tags go with it (ON DELETE CASCADE)
    book = await ok(gateway, "create_book", isbn="9", title="T", author_id=1, genre="poetry")
    for tag in ("b", "a"):
        await ok(gateway, "create_book_tag", book_id=book["id"], tag=tag)
    result = await ok(gateway, "delete_book", ADMIN, id=book["id"])
    assert result == {"deleted": {"books": [31], "book_tags": ["31|b", "31|a"]}}
    assert not state.find("book_tags", book_id=31)
    # a member others were referred by: their referred_by is cleared (ON DELETE SET NULL)
    member = await ok(gateway, "create_member", name="New", email="n@x.org", joined="2026-03-02")
    friend = await ok(
        gateway,
        "create_member",
        name="Friend",
        email="f@x.org",
        joined="2026-03-02",
        referred_by=member["id"],
    )
    result = await ok(gateway, "delete_member", ADMIN, id=member["id"])
    assert result["cleared"] == {"members": [friend["id"]]}
    assert state.get("members", friend["id"])["referred_by"] is None


async def test_unique_columns(gateway: Gateway) -> None:
    taken = gateway.instance().state.get("books", 1)["isbn"]
    message = await refused(
        gateway, "create_book", isbn=taken, title="Copy", author_id=1, genre="fiction"
    )
    assert f"books isbn={taken!r} is taken by books id=1" in message
    await ok(gateway, "update_book", id=1, isbn=taken)  # its own value is no clash


async def test_enum_transitions(gateway: Gateway) -> None:
    state = gateway.instance().state
    open_loan = state.find("loans", status="open")[0]["id"]
    returned = state.find("loans", status="returned")[0]["id"]
    assert (await ok(gateway, "update_loan", id=open_loan, status="overdue"))["status"] == "overdue"
    await ok(gateway, "update_loan", id=open_loan, status="returned", returned_on="2026-03-02")
    message = await refused(gateway, "update_loan", id=returned, status="open")
    assert f"loans id={returned}: status cannot change from 'returned' to 'open'" in message
    assert "(allowed from 'returned': none)" in message
    message = await refused(
        gateway,
        "create_loan",
        book_id=1,
        member_id=1,
        loaned_on="2026-03-02",
        due_on="2026-03-23",
        status="returned",
    )
    assert "cannot start with status='returned' (allowed: 'open')" in message
    assert "invalid_arguments" in await refused(
        gateway, "update_loan", id=open_loan, status="misplaced"
    )
    # the enum and its rules are in the tool's schema and description
    tool = gateway.env.tools["update_loan"]
    assert (
        "open -> overdue, returned, lost"
        in tool.input_schema["properties"]["status"]["description"]
    )


async def test_check_constraints_become_schema_rules(gateway: Gateway) -> None:
    message = await refused(gateway, "update_book", id=1, copies=-1)
    assert "tool_error" in message and "copies" in message
    assert "born" in await refused(gateway, "create_author", name="Old", born=12)


def test_the_procedural_check_passes(library: tuple[SqliteReport, Path]) -> None:
    check = pytest.importorskip("agentenv.synth.check")
    report = check.check_environment(Environment.load(library[1]), calls_per_tool=5)
    assert report.summary.violations == 0, [t.violations for t in report.tools if t.violations]


# -- decisions on schemas ------------------------------------------------------------------------

TYPES_SQL = """
CREATE TABLE "Order Items" (
    "ItemID" INTEGER PRIMARY KEY,
    "class" TEXT NOT NULL,
    price REAL NOT NULL CHECK (price > 0),
    amount NUMERIC,
    flag BOOLEAN,
    picture BLOB,
    shape GEOMETRY,
    note,
    made DATETIME DEFAULT (datetime('now')),
    code TEXT DEFAULT (lower(hex(randomblob(4)))),
    qty INTEGER CHECK (typeof(qty) = 'integer')
);
INSERT INTO "Order Items" VALUES (1, 'a', 2.5, 3, 1, x'00ff', 'POINT(1 2)', 7, '2025-05-01 10:00:00', 'c1', 1);
INSERT INTO "Order Items" VALUES (2, 'b', 1.0, 4.5, 0, NULL, 'POINT(3 4)', 'x', NULL, 'c2', 2);
"""


def test_types_names_and_unsupported_columns(tmp_path: Path) -> None:
    report, out = generate(tmp_path, TYPES_SQL)
    assert report.ok, report.errors
    assert report.tables[0].collection == "order_items"
    notes = "\n".join(report.notes)
    assert "is the collection order_items" in notes
    assert "column Order Items.ItemID is the field item_id" in notes
    assert "column Order Items.class is the field class_" in notes
    warnings = "\n".join(report.warnings)
    assert "Order Items.picture: left out, it has type BLOB" in warnings
    assert "unsupported column type 'GEOMETRY'; typed from its values as string" in warnings
    assert "default lower(hex(randomblob(4))) is an expression" in warnings
    assert "CHECK (typeof(qty) = 'integer') is not enforced" in warnings
    env = Environment.load(out)
    schema = env.seed.infos()["order_items"].schema
    props = schema["properties"]
    assert "picture" not in props
    assert props["price"] == {"type": "number", "exclusiveMinimum": 0}
    assert props["amount"] == {"type": ["number", "null"]}
    assert props["flag"] == {"type": ["boolean", "null"]}
    assert props["note"] == {"type": ["integer", "string", "null"]}
    assert props["shape"] == {"type": ["string", "null"]}
    rows = env.seed.to_dict()["order_items"]
    assert rows[0]["flag"] is True and rows[1]["amount"] == 4.5
    create = env.tools["create_order_item"].input_schema["properties"]
    assert "class_" in create and "picture" not in create


async def test_boolean_check_and_left_out_tables(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE flags (id INTEGER PRIMARY KEY, enabled BOOLEAN NOT NULL CHECK (enabled IN (1, 0)));
    INSERT INTO flags VALUES (1, 1), (2, 0);
    CREATE VIEW lit AS SELECT * FROM flags WHERE enabled;
    """
    try:
        sql += "CREATE VIRTUAL TABLE docs USING fts5(body);"
        make_db(tmp_path / "probe.db", sql)
    except sqlite3.OperationalError:  # a SQLite built without FTS5
        sql = sql.replace("CREATE VIRTUAL TABLE docs USING fts5(body);", "")
    report, out = generate(tmp_path, sql)
    assert report.ok, report.errors
    assert [t.collection for t in report.tables] == ["flags"]  # no view, no FTS shadow tables
    assert "left out 1 view (lit): views hold no records of their own" in report.notes
    if "fts5" in sql:
        assert report.warnings == [
            "table docs: virtual tables (full-text search and the like) are left out"
        ]
    env = Environment.load(out)
    assert env.seed.infos()["flags"].schema["properties"]["enabled"] == {
        "type": "boolean",
        "enum": [True, False],
    }
    assert (await ok(Gateway(env), "update_flag", id=2, enabled=True))["enabled"] is True


def test_type_mismatch_widens_the_schema(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE t (id INTEGER PRIMARY KEY, year INTEGER NOT NULL);
    INSERT INTO t VALUES (1, 1999), (2, 'unknown');
    """
    report, out = generate(tmp_path, sql)
    assert report.ok
    assert (
        "t.year is declared INTEGER but holds string values (e.g. t id=2: 'unknown'); "
        "its schema accepts integer or string" in report.warnings
    )
    assert Environment.load(out).seed.to_dict()["t"][1]["year"] == "unknown"


def test_blob_primary_key_is_an_error(tmp_path: Path) -> None:
    report, out = generate(tmp_path, "CREATE TABLE t (id BLOB PRIMARY KEY, x TEXT);")
    assert not report.ok and not out.exists()
    assert report.errors == [
        "t.id is part of the primary key but has type BLOB, which JSON cannot hold"
    ]


async def test_no_primary_key_uses_the_rowid(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE events (what TEXT NOT NULL, at TEXT);
    INSERT INTO events VALUES ('opened', '2026-01-01'), ('closed', '2026-01-02');
    """
    report, out = generate(tmp_path, sql)
    assert report.ok
    assert report.warnings == [
        "table events has no primary key: its records are keyed by their SQLite rowid "
        "(field rowid); new records get the next rowid"
    ]
    gw = Gateway(Environment.load(out))
    assert gw.instance().state.get("events", 2)["what"] == "closed"
    assert (await ok(gw, "create_event", what="reopened"))["rowid"] == 3


def test_without_rowid_needs_a_primary_key(tmp_path: Path) -> None:
    # SQLite itself refuses such a table; a file that has one anyway is reported, not raised.
    with pytest.raises(sqlite3.OperationalError, match="PRIMARY KEY missing"):
        make_db(tmp_path / "x.db", "CREATE TABLE t (a TEXT) WITHOUT ROWID;")
    db = make_db(tmp_path / "forged.db", "CREATE TABLE t (a TEXT PRIMARY KEY, b) WITHOUT ROWID;")
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("UPDATE sqlite_master SET sql = 'CREATE TABLE t (a TEXT, b) WITHOUT ROWID'")
    conn.commit()
    conn.close()
    report = env_from_sqlite(db, tmp_path / "out")
    assert report.errors == [
        f"cannot read the schema of {db}: malformed database schema (t) - "
        "PRIMARY KEY missing on table t"
    ]
    # a WITHOUT ROWID table with its key is an ordinary collection
    report, _ = generate(tmp_path, "CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;")
    assert report.ok and report.tables[0].key == "k"


def test_composite_keys(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE grid (x INTEGER, y TEXT, label TEXT, PRIMARY KEY (x, y));
    INSERT INTO grid VALUES (2, 'b|c', 'one'), (1, 'a', 'two');
    """
    report, out = generate(tmp_path, sql)
    assert report.ok
    rows = Environment.load(out).seed.to_dict()["grid"]
    assert [r["_key"] for r in rows] == ["1|a", "2|b\\|c"]  # ordered by key, '|' escaped
    assert composite_key([2, "b|c"]) == "2|b\\|c" != composite_key(["2|b", "c"])


async def test_cyclic_foreign_keys(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE a (id INTEGER PRIMARY KEY, b_id INTEGER REFERENCES b (id));
    CREATE TABLE b (id INTEGER PRIMARY KEY, a_id INTEGER NOT NULL REFERENCES a (id));
    CREATE TABLE c (id INTEGER PRIMARY KEY, d_id INTEGER NOT NULL REFERENCES d (id));
    CREATE TABLE d (id INTEGER PRIMARY KEY, c_id INTEGER NOT NULL REFERENCES c (id));
    CREATE TABLE e (id INTEGER PRIMARY KEY, parent INTEGER NOT NULL REFERENCES e (id));
    INSERT INTO a VALUES (1, 1);
    INSERT INTO b VALUES (1, 1);
    INSERT INTO e VALUES (1, 1);
    """
    report, out = generate(tmp_path, sql)
    assert report.ok
    assert len(report.warnings) == 2  # a self-reference (e) is no cycle worth a warning
    loose, strict = report.warnings
    assert loose.startswith("foreign keys form a cycle (a -> b -> a): the seed loads")
    assert "create one with the nullable reference empty, then update it" in loose
    assert strict.startswith("foreign keys form a cycle (c -> d -> c) and every one is NOT NULL")
    gw = Gateway(Environment.load(out))
    assert await ok(gw, "create_e", parent=2) == {"id": 2, "parent": 2}  # it refers to itself
    assert "no d record with id=1" in await refused(gw, "create_c", d_id=1)


async def test_transitions_table(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE tickets (
        id INTEGER PRIMARY KEY,
        status TEXT NOT NULL CHECK (status IN ('new', 'working', 'done', 'archived')),
        state TEXT,
        title TEXT
    );
    INSERT INTO tickets VALUES (1, 'new', 'CA', 'a'), (2, 'new', 'NY', 'b'), (3, 'done', 'TX', 'c');
    CREATE TABLE ticket_status_transitions (id INTEGER PRIMARY KEY, from_status TEXT, to_status TEXT);
    INSERT INTO ticket_status_transitions (from_status, to_status)
    VALUES ('new', 'working'), ('working', 'done'), ('done', 'archived'), ('x', 'y');
    """
    report, out = generate(tmp_path, sql)
    assert report.ok
    assert [t.collection for t in report.tables] == ["tickets"]
    assert report.tables[0].enums == ["status (4 values, transitions)"]  # state: all distinct
    assert "values x, y are not allowed in tickets.status" in report.warnings[0]
    gw = Gateway(Environment.load(out))
    assert "cannot change from 'new' to 'done'" in await refused(
        gw, "update_ticket", id=1, status="done"
    )
    await ok(gw, "update_ticket", id=1, status="working")
    await ok(gw, "update_ticket", id=1, status="done")
    await ok(gw, "create_ticket", status="archived")  # no null from_status: any start value


def test_inferred_enums(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE jobs (id INTEGER PRIMARY KEY, stage TEXT);
    INSERT INTO jobs VALUES (1, 'queued'), (2, 'queued'), (3, 'running'), (4, NULL);
    """
    report, out = generate(tmp_path, sql)
    assert report.tables[0].enums == ["stage (2 values, inferred)"]
    assert "jobs.stage is treated as an enum of the 2 values in the data" in report.notes[0]
    props = Environment.load(out).seed.infos()["jobs"].schema["properties"]
    assert props["stage"]["enum"] == ["queued", "running", None]
    report = env_from_sqlite(tmp_path / "test.db", None, infer_enums=False)
    assert report.tables[0].enums == []


async def test_foreign_key_problems_are_warnings(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE parent (id INTEGER PRIMARY KEY, code TEXT UNIQUE);
    CREATE TABLE child (
        id INTEGER PRIMARY KEY,
        parent_id INTEGER REFERENCES parent (id),
        parent_code TEXT REFERENCES parent (code),
        ghost_id INTEGER REFERENCES ghosts (id)
    );
    INSERT INTO parent VALUES (1, 'p1');
    INSERT INTO child VALUES (1, 1, 'p1', 5), (2, 9, 'p1', NULL), (3, NULL, 'nope', NULL);
    """
    report, out = generate(tmp_path, sql)
    assert report.ok
    warnings = "\n".join(report.warnings)
    assert "foreign key child(ghost_id) -> ghosts: no table ghosts" in warnings
    assert "seed: 1 child record refer to no parent record (parent_id), e.g. child id=2" in warnings
    assert "seed: 1 child record refer to no parent record (parent_code)" in warnings
    gw = Gateway(Environment.load(out))
    assert "no parent record with code='zz'" in await refused(gw, "create_child", parent_code="zz")
    await ok(gw, "create_child", parent_code="p1")
    assert "still refer to it" in await refused(gw, "update_parent", id=1, code="p2")


# -- bad input: a clear message, never a traceback ---------------------------------------------


def test_not_a_database(tmp_path: Path) -> None:
    text = tmp_path / "notes.db"
    text.write_text("hello, I am not a database\n" * 20)
    report = env_from_sqlite(text, tmp_path / "out")
    assert report.errors == [f"{text} is not a SQLite database (file is not a database)"]
    assert not (tmp_path / "out").exists()
    assert env_from_sqlite(tmp_path / "missing.db", None).errors == [
        f"{tmp_path / 'missing.db'}: no such file"
    ]
    assert not (tmp_path / "missing.db").exists()  # opened read-only: nothing created
    assert "is a folder" in env_from_sqlite(tmp_path, None).errors[0]


def test_empty_database(tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert env_from_sqlite(empty, None).errors == [f"{empty} has no tables to make collections of"]
    views = make_db(tmp_path / "views.db", "CREATE VIEW v AS SELECT 1 AS one;")
    report = env_from_sqlite(views, None)
    assert report.errors == [f"{views} has no tables to make collections of"]
    assert report.notes == ["left out 1 view (v): views hold no records of their own"]


def test_partial_report_and_limits(tmp_path: Path) -> None:
    sql = """
    CREATE TABLE a (id INTEGER PRIMARY KEY);
    CREATE TABLE b (id INTEGER PRIMARY KEY);
    INSERT INTO b VALUES (1), (2), (3);
    """
    db = make_db(tmp_path / "t.db", sql)
    report = env_from_sqlite(db, None, max_rows=2)
    assert report.errors == [
        "table b has 3 rows, more than the limit of 2; raise max_rows (--max-rows) or make a "
        "smaller copy of the database"
    ]
    assert [t.table for t in report.tables] == ["a"]  # what was read before the error
    assert "name 'no spaces'" in env_from_sqlite(db, None, name="no spaces").errors[0]
    out = tmp_path / "busy"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    report = env_from_sqlite(db, out)
    assert "exists and is not empty; pass --force" in report.errors[0]
    assert env_from_sqlite(db, out, overwrite=True).ok
    assert (out / "mine.txt").read_text() == "keep"


# -- SQL pieces ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "rules"),
    [
        ("status IN ('a', 'b', 'a')", [("status", {"enum": ["a", "b"]})]),
        ('"Kind" in (1, 2, -3)', [("Kind", {"enum": [1, 2, -3]})]),
        ("x IS NULL OR x IN ('p')", [("x", {"enum": ["p"]})]),
        (
            "price >= 0 AND price < 1e3",
            [("price", {"minimum": 0}), ("price", {"exclusiveMaximum": 1000.0})],
        ),
        ("0 < qty", [("qty", {"exclusiveMinimum": 0})]),
        ("n BETWEEN -1 AND 5 AND n IS NOT NULL", [("n", {"minimum": -1, "maximum": 5})]),
        ("length(name) > 0", [("name", {"minLength": 1})]),
        ("[code] <> ''", [("code", {"minLength": 1})]),
        ("a > b", None),
        ("x NOT IN ('a')", None),
        ("x IN ('a') OR y IN ('b')", None),
        ("typeof(x) = 'text'", None),
    ],
)
def test_parse_check(body: str, rules) -> None:
    assert parse_check(_tokens(body)) == rules


def test_parse_default_and_types() -> None:
    assert parse_default("'open'") == ("value", "open")
    assert parse_default("'it''s'") == ("value", "it's")
    assert parse_default("-1.5") == ("value", -1.5)
    assert parse_default("(0)") == ("value", 0)
    assert parse_default("NULL") == ("value", None)
    assert parse_default("CURRENT_TIMESTAMP") == ("now", "timestamp")
    assert parse_default("(date('now'))") == ("now", "date")
    assert parse_default("(random())")[0] == "expr"
    expected = {
        "BIGINT": "integer",
        "VARCHAR(20)": "string",
        "DOUBLE PRECISION": "real",
        "DECIMAL(10,2)": "number",
        "BOOLEAN": "boolean",
        "BLOB": "blob",
        "": "any",
        "DATETIME": "string",
        "UUID": "string",
        "GEOMETRY": "unknown",
        "FLOATING POINT": "integer",  # SQLite's rule: a type that contains INT is an integer
    }
    assert {t: sql_type_family(t) for t in expected} == expected


# -- the command ---------------------------------------------------------------------------------


def _app() -> typer.Typer:
    app = typer.Typer(pretty_exceptions_enable=False)
    app.command()(synth_env)
    return app


def test_command(tmp_path: Path) -> None:
    db = make_db(tmp_path / "sample.db", SAMPLE_SQL.read_text())
    out = tmp_path / "lib"
    runner = CliRunner()
    result = runner.invoke(
        _app(),
        ["--from-sqlite", str(db), "--out", str(out), "--clock-start", "2026-03-02T09:00:00Z"],
    )
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "28 tools" in result.output
    assert "loans_status_transitions gives the allowed transitions" in result.output
    assert Environment.load(out).name == "lib"
    again = runner.invoke(_app(), ["--from-sqlite", str(db), "--out", str(out)])
    assert again.exit_code == 1 and "pass --force" in again.output
    assert isinstance(again.exception, SystemExit)  # no traceback
    dry = runner.invoke(_app(), ["--from-sqlite", str(db), "--dry-run", "--json"])
    assert dry.exit_code == 0 and '"ok": true' in dry.output and '"files": []' in dry.output


def test_command_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.db"
    bad.write_text("not sqlite")
    runner = CliRunner()
    result = runner.invoke(_app(), ["--from-sqlite", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    assert "is not a SQLite database" in result.output and "Traceback" not in result.output
    result = runner.invoke(
        _app(), ["--from-sqlite", str(bad), "--out", "o", "--clock-start", "soon"]
    )
    assert result.exit_code == 1 and "is not an ISO date" in result.output
    result = runner.invoke(_app(), ["--from-sqlite", str(bad)])
    assert result.exit_code == 1 and "--out" in result.output
    again = runner.invoke(_app(), ["--from-sqlite", str(bad), "--out", str(tmp_path / "o")])
    assert re.search(r"nothing was written", again.output)
