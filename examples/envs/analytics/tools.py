"""Tools of the analytics example environment: read-only SQL over the seeded records, and
one write (flagging an order for the data team).

`sql` copies the four data collections into a fresh in-memory SQLite database on every call
(tables named like the collections, one column per field) and runs one read-only SELECT on
it, so the state stays the single source of truth and every answer comes from the gateway.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from agentenv import ToolContext, ToolError, tool

TABLES = ("products", "customers", "orders", "order_lines")
"""The collections `sql` can see (the `flags` collection is write-side bookkeeping)."""

MAX_ROWS = 200
MAX_STEPS = 2_000_000  # SQLite VM steps: a runaway cross join fails instead of hanging


def _database(ctx: ToolContext) -> sqlite3.Connection:
    db = sqlite3.connect(":memory:")
    for table in TABLES:
        records = sorted(ctx.state.list(table), key=lambda r: str(r.get("id")))
        columns: list[str] = []
        for record in records:
            columns += [c for c in record if c not in columns]
        if not columns:
            continue
        db.execute(f"CREATE TABLE {table} ({', '.join(columns)})")
        rows = [
            tuple(
                json.dumps(v) if isinstance(v, (list, dict)) else v
                for v in (r.get(c) for c in columns)
            )
            for r in records
        ]
        db.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})", rows)
    db.execute("PRAGMA query_only = ON")
    steps = {"n": 0}

    def budget() -> int:
        steps["n"] += 1000
        return 1 if steps["n"] > MAX_STEPS else 0

    db.set_progress_handler(budget, 1000)
    return db


@tool(kind="read", duration=5)
def list_tables(ctx: ToolContext) -> dict[str, Any]:
    """The tables `sql` can query, with their columns and row counts."""
    db = _database(ctx)
    try:
        tables = {}
        for table in TABLES:
            info = db.execute(f"PRAGMA table_info({table})").fetchall()
            count = db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] if info else 0
            tables[table] = {"columns": [row[1] for row in info], "rows": count}
        return {"tables": tables}
    finally:
        db.close()


@tool(kind="read", duration=10)
def sql(ctx: ToolContext, query: str) -> dict[str, Any]:
    """Run one read-only SQL query (SQLite dialect) over the tables products, customers,
    orders and order_lines. At most 200 rows come back.

    Args:
        query: A single SELECT (or WITH ... SELECT) statement, e.g.
            SELECT status, COUNT(*) FROM orders GROUP BY status.
    """
    text = query.strip().rstrip(";").strip()
    if not text:
        raise ToolError("the query is empty")
    if text.split(None, 1)[0].lower() not in ("select", "with"):
        raise ToolError("only SELECT queries are allowed (the data is read-only)")
    db = _database(ctx)
    try:
        cursor = db.execute(text)
        columns = [d[0] for d in cursor.description or []]
        rows = cursor.fetchmany(MAX_ROWS + 1)
    except sqlite3.Error as exc:
        raise ToolError(f"SQL error: {exc}") from None
    finally:
        db.close()
    truncated = len(rows) > MAX_ROWS
    return {
        "columns": columns,
        "rows": [list(r) for r in rows[:MAX_ROWS]],
        "row_count": min(len(rows), MAX_ROWS),
        "truncated": truncated,
    }


@tool(kind="write", duration=15)
def flag_order(ctx: ToolContext, order_id: str, reason: str) -> dict[str, Any]:
    """Flag an order for the data team to correct (once per order).

    Args:
        order_id: The order's id, e.g. O-1013.
        reason: What is wrong with it, e.g. "total 1810.00 but its lines sum to 1800.00".
    """
    if ctx.state.get("orders", order_id) is None:
        raise ToolError(f"no order {order_id!r}")
    if not reason.strip():
        raise ToolError("a flag needs a reason")
    if ctx.state.find("flags", order_id=order_id):
        raise ToolError(f"order {order_id} is already flagged")
    flag = {
        "id": f"F-{ctx.state.count('flags') + 1:03d}",
        "order_id": order_id,
        "reason": reason.strip(),
        "flagged_by": ctx.principal.role,
        "flagged_at": ctx.now.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return ctx.state.insert("flags", flag)
