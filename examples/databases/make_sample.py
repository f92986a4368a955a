"""Make the sample library database: a small one, made up by this project, for the docs and tests.

    python examples/databases/make_sample.py                        # print the SQL dump
    python examples/databases/make_sample.py --db runs/library.db   # build a database
    python examples/databases/make_sample.py --out runs/sample.sql  # write the dump there
    python examples/databases/make_sample.py --check                # is sample.sql current?
    python examples/databases/make_sample.py --out examples/databases/sample.sql  # on purpose

By default it writes nothing in the repository: the committed `sample.sql` beside this file
changes only when `--out` names it (a text dump reads well in a diff); `--check` exits 1 when
it differs from what this script makes. Build a .db from the dump with `--db` or with
`sqlite3 runs/library.db < examples/databases/sample.sql`. Everything below is
deterministic: names and dates come from fixed lists and arithmetic, not from a random
generator, so the dump is byte-identical on every run.

The schema shows what `agent-env synth env --from-sqlite` understands: integer and text
primary keys, a composite key (book_tags), foreign keys with ON DELETE CASCADE and SET NULL,
a self-reference (members.referred_by), UNIQUE columns, CHECK enums and ranges, defaults
(including CURRENT_TIMESTAMP) and a transitions table for loans.status.
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
TRACKED = HERE / "sample.sql"  # committed; rewritten only when --out names it

SCHEMA = """\
-- A small lending library. Made up by the agentenv project for its examples and tests.
PRAGMA foreign_keys = ON;

CREATE TABLE authors (
    id      INTEGER PRIMARY KEY,
    name    TEXT NOT NULL,
    country TEXT,
    born    INTEGER CHECK (born BETWEEN 1000 AND 2100)
);

CREATE TABLE books (
    id        INTEGER PRIMARY KEY,
    isbn      TEXT NOT NULL UNIQUE,
    title     TEXT NOT NULL CHECK (length(title) > 0),
    author_id INTEGER NOT NULL REFERENCES authors (id),
    published INTEGER,
    genre     TEXT NOT NULL CHECK (genre IN ('fiction', 'poetry', 'history', 'science', 'children')),
    copies    INTEGER NOT NULL DEFAULT 1 CHECK (copies >= 0)
);

-- Free-form labels on books; the key is the pair (book_id, tag).
CREATE TABLE book_tags (
    book_id INTEGER NOT NULL REFERENCES books (id) ON DELETE CASCADE,
    tag     TEXT NOT NULL,
    PRIMARY KEY (book_id, tag)
);

CREATE TABLE members (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    email       TEXT NOT NULL UNIQUE,
    joined      DATE NOT NULL,
    active      BOOLEAN NOT NULL DEFAULT 1,
    referred_by INTEGER REFERENCES members (id) ON DELETE SET NULL
);

CREATE TABLE loans (
    id          INTEGER PRIMARY KEY,
    book_id     INTEGER NOT NULL REFERENCES books (id),
    member_id   INTEGER NOT NULL REFERENCES members (id),
    loaned_on   DATE NOT NULL,
    due_on      DATE NOT NULL,
    returned_on DATE,
    status      TEXT NOT NULL DEFAULT 'open'
                CHECK (status IN ('open', 'overdue', 'returned', 'lost')),
    created_at  TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP
);

-- How a loan's status may change; a row with no from_status is a status a new loan may have.
CREATE TABLE loans_status_transitions (
    from_status TEXT,
    to_status   TEXT NOT NULL
);
"""

AUTHORS = [
    ("Maren Holt", "Norway", 1948),
    ("Tomasz Wierzba", "Poland", 1962),
    ("Adaeze Nwosu", "Nigeria", 1979),
    ("Luis Carrega", "Portugal", 1935),
    ("Hana Kobayashi", "Japan", 1984),
    ("Peter Ellory", "United Kingdom", 1921),
    ("Sofia Brandt", "Germany", 1990),
    ("Ines Valcourt", "France", 1957),
    ("Rafael Montoya", "Mexico", 1969),
    ("Elin Sund", "Sweden", 2001),
    ("Oskar Lind", None, None),
    ("June Achterberg", "Netherlands", 1973),
]
GENRES = ["fiction", "poetry", "history", "science", "children"]
TITLE_A = ["Quiet", "Northern", "Salt", "Paper", "Glass", "Late", "Hidden", "Small", "Long", "Iron"]
TITLE_B = ["Harbour", "Orchard", "Winter", "Rivers", "Lanterns", "Stars", "Maps", "Gardens"]
TAGS = ["classic", "award", "series", "illustrated", "translated", "local"]
FIRST = ["Ada", "Bram", "Cleo", "Dev", "Esme", "Farid", "Gia", "Hugo", "Iris", "Jonah"]
LAST = ["Marsh", "Okoro", "Pereira", "Quist", "Rahman", "Sato", "Tellier", "Umarov"]
TRANSITIONS = [
    (None, "open"),
    ("open", "returned"),
    ("open", "overdue"),
    ("open", "lost"),
    ("overdue", "returned"),
    ("overdue", "lost"),
]
TODAY = date(2026, 3, 2)  # the day the sample is "taken"; see the example's --clock-start


def _sql(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float):
        return repr(value)
    return "'" + str(value).replace("'", "''") + "'"


def _insert(table: str, rows: list[tuple[object, ...]]) -> list[str]:
    return [f"INSERT INTO {table} VALUES ({', '.join(_sql(v) for v in row)});" for row in rows]


def rows() -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows, in insert order."""
    authors = [(i, *a) for i, a in enumerate(AUTHORS, start=1)]
    books = []
    for i in range(1, 31):
        title = f"{TITLE_A[(i * 3) % len(TITLE_A)]} {TITLE_B[(i * 5) % len(TITLE_B)]}"
        if i > 20:
            title = f"The {title}"
        author = (i * 7) % len(AUTHORS) + 1
        published = None if i % 11 == 0 else 1950 + (i * 17) % 75
        copies = 0 if i % 13 == 0 else 1 + i % 3
        books.append(
            (
                i,
                f"978-0-{1000 + i * 37:05d}-{i % 10}",
                title,
                author,
                published,
                GENRES[i % 5],
                copies,
            )
        )
    tags = []
    for book in range(1, 31):
        chosen = {TAGS[book % len(TAGS)]}
        if book % 3 == 0:
            chosen.add(TAGS[(book // 3) % len(TAGS)])
        tags += [(book, tag) for tag in sorted(chosen)]
    members = []
    for i in range(1, 21):
        first, last = FIRST[i % len(FIRST)], LAST[(i * 3) % len(LAST)]
        joined = date(2019, 1, 7) + timedelta(days=i * 97)
        referred = None if i <= 4 or i % 4 == 0 else (i * 5) % (i - 1) + 1
        members.append(
            (
                i,
                f"{first} {last}",
                f"{first}.{last}{i}@example.org".lower(),
                joined.isoformat(),
                i % 9 != 0,
                referred,
            )
        )
    loans = []
    for i in range(1, 41):
        loaned = date(2026, 1, 5) + timedelta(days=(i * 13) % 56)
        due = loaned + timedelta(days=21)
        if due < date(2026, 2, 16):
            status, returned = (
                ("lost", None) if i % 9 == 0 else ("returned", loaned + timedelta(days=3 + i % 18))
            )
        elif due < TODAY:
            status, returned = ("overdue", None)
        else:
            status, returned = ("open", None)
        loans.append(
            (
                i,
                (i * 7) % 30 + 1,
                (i * 11) % 20 + 1,
                loaned.isoformat(),
                due.isoformat(),
                None if returned is None else returned.isoformat(),
                status,
                f"{loaned.isoformat()} {9 + i % 8:02d}:{(i * 7) % 60:02d}:00",
            )
        )
    return {
        "authors": authors,
        "books": books,
        "book_tags": tags,
        "members": members,
        "loans": loans,
        "loans_status_transitions": TRANSITIONS,
    }


def sample_sql() -> str:
    """The whole dump: schema, then the rows in an order that satisfies every foreign key."""
    lines = [SCHEMA.rstrip("\n"), "", "BEGIN TRANSACTION;"]
    for table, table_rows in rows().items():
        lines.append("")
        lines += _insert(table, table_rows)
    lines += ["", "COMMIT;", ""]
    return "\n".join(lines)


def build(db_path: Path, sql: str | None = None) -> Path:
    """Build a SQLite file from sample.sql (or the given SQL), replacing any old one."""
    db_path.unlink(missing_ok=True)
    with sqlite3.connect(db_path) as conn:
        conn.executescript(sql if sql is not None else TRACKED.read_text())
    conn.close()
    return db_path


def _checked(sql: str) -> str:
    with sqlite3.connect(":memory:") as check:  # the dump must load, foreign keys and all
        check.executescript(sql)
        problems = check.execute("PRAGMA foreign_key_check").fetchall()
    if problems:
        raise SystemExit(f"the sample dump breaks foreign keys: {problems}")
    return sql


def main(argv: list[str] | None = None) -> int:
    """The script's command line; returns its exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the SQL dump to this file")
    parser.add_argument("--db", type=Path, help="build a SQLite database at this path")
    parser.add_argument(
        "--check", action="store_true", help=f"exit 1 unless {TRACKED} is what this script makes"
    )
    args = parser.parse_args(argv)
    sql = _checked(sample_sql())
    if args.check:
        if TRACKED.read_text() != sql:
            print(
                f"{TRACKED} differs from what make_sample.py makes: rerun it with --out {TRACKED}"
            )
            return 1
        print(f"{TRACKED} is current")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(sql)
        print(f"wrote {args.out}")
    if args.db:
        args.db.parent.mkdir(parents=True, exist_ok=True)
        print(f"built {build(args.db, sql)}")
    if not (args.out or args.db or args.check):
        sys.stdout.write(sql)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
