"""examples/databases/make_sample.py: writes nothing tracked unless told, and its dump is the
committed sample.sql."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "databases" / "make_sample.py"
TRACKED = ROOT / "examples" / "databases" / "sample.sql"


def make_sample(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_default_prints_the_dump_and_leaves_the_tracked_file_alone(tmp_path: Path) -> None:
    before = TRACKED.stat()
    done = make_sample(cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    after = TRACKED.stat()
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    assert list(tmp_path.iterdir()) == []
    # Deterministic: what it makes today is what is committed.
    assert done.stdout == TRACKED.read_text()


def test_out_and_db_write_where_they_are_told(tmp_path: Path) -> None:
    before = TRACKED.stat().st_mtime_ns
    done = make_sample(
        "--out", "runs/sample.sql", "--db", "runs/library.db", "--check", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    assert "is current" in done.stdout
    assert TRACKED.stat().st_mtime_ns == before
    assert (tmp_path / "runs" / "sample.sql").read_text() == TRACKED.read_text()
    with sqlite3.connect(tmp_path / "runs" / "library.db") as conn:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        books = conn.execute("SELECT count(*) FROM books").fetchone()[0]
    conn.close()
    assert {"authors", "books", "book_tags", "members", "loans"} <= tables
    assert books == 30
