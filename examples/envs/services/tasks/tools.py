"""Tools of the tasks service: a to-do list with due dates, priorities and projects."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any, Literal

from agentenv import ToolContext, ToolError, tool

Priority = Literal["low", "normal", "high"]
Status = Literal["open", "done"]
_RANK = {"high": 0, "normal": 1, "low": 2}


def _stamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _day(value: str | None, field: str) -> str | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value.strip()[:10]).isoformat()
    except ValueError:
        raise ToolError(f"{field}: {value!r} is not a date; use YYYY-MM-DD") from None


def _task(ctx: ToolContext, task_id: str) -> dict[str, Any]:
    found = ctx.state.get("tasks", task_id)
    if found is None:
        raise ToolError(f"no task {task_id!r} (ids look like T-001)")
    return found


@tool(kind="read", duration=2)
def list_tasks(
    ctx: ToolContext,
    status: Status | None = "open",
    project: str | None = None,
    due_by: str | None = None,
) -> dict[str, Any]:
    """List tasks, soonest due first (undated last), then by priority.

    Args:
        status: open or done; every task if null.
        project: Only tasks of this project, e.g. work or personal.
        due_by: Only tasks due on or before this date (YYYY-MM-DD); overdue ones included.
    """
    limit = _day(due_by, "due_by")
    rows = ctx.state.list("tasks")
    if status is not None:
        rows = [t for t in rows if t["status"] == status]
    if project:
        rows = [t for t in rows if (t.get("project") or "").lower() == project.lower()]
    if limit:
        rows = [t for t in rows if t.get("due") and t["due"] <= limit]
    rows.sort(key=lambda t: (t.get("due") or "9999", _RANK[t["priority"]], t["id"]))
    today = ctx.now.date().isoformat()
    overdue = [t["id"] for t in rows if t["status"] == "open" and (t.get("due") or "9999") < today]
    return {"tasks": rows, "total": len(rows), "overdue": overdue}


@tool(kind="write", duration=3)
def add_task(
    ctx: ToolContext,
    title: str,
    due: str | None = None,
    priority: Priority = "normal",
    project: str | None = None,
    notes: str | None = None,
    source: str | None = None,
) -> dict[str, Any]:
    """Add a task. An open task with the same title is refused as a duplicate.

    Args:
        title: What needs doing.
        due: The due date, YYYY-MM-DD.
        priority: low, normal or high.
        project: A project name, e.g. work or personal.
        notes: Details.
        source: Where the task came from (e.g. "shop:O-1002"), for bookkeeping.
    """
    title = title.strip()
    if not title:
        raise ToolError("a task needs a title")
    dup = ctx.state.find(
        "tasks", where=lambda t: t["status"] == "open" and t["title"].lower() == title.lower()
    )
    if dup:
        raise ToolError(f"an open task {dup[0]['id']} is already called {title!r}")
    numbers = [int(k[2:]) for k in ctx.state.keys("tasks") if k[2:].isdigit()]
    task = {
        "id": f"T-{max(numbers, default=0) + 1:03d}",
        "title": title,
        "status": "open",
        "priority": priority,
        "due": _day(due, "due"),
        "project": project,
        "notes": notes,
        "source": source,
        "created_at": _stamp(ctx.now),
        "completed_at": None,
    }
    return ctx.state.insert("tasks", task)


@tool(kind="write", duration=3)
def update_task(
    ctx: ToolContext,
    task_id: str,
    title: str | None = None,
    due: str | None = None,
    priority: Priority | None = None,
    project: str | None = None,
    notes: str | None = None,
) -> dict[str, Any]:
    """Change some fields of an open task; fields left out stay as they are.

    Args:
        task_id: The task, e.g. T-003.
        title: New title.
        due: New due date, YYYY-MM-DD.
        priority: low, normal or high.
        project: New project.
        notes: New notes (replace the old ones).
    """
    task = _task(ctx, task_id)
    if task["status"] == "done":
        raise ToolError(f"task {task_id} is done; add a new task instead")
    changes: dict[str, Any] = {
        k: v
        for k, v in (("priority", priority), ("project", project), ("notes", notes))
        if v is not None
    }
    if title is not None:
        if not title.strip():
            raise ToolError("the title cannot be blank")
        changes["title"] = title.strip()
    if due is not None:
        changes["due"] = _day(due, "due")
    if not changes:
        raise ToolError("nothing to change: give at least one field")
    return ctx.state.update("tasks", task_id, changes)


@tool(kind="write", duration=2)
def complete_task(ctx: ToolContext, task_id: str) -> dict[str, Any]:
    """Mark a task as done.

    Args:
        task_id: The task, e.g. T-005.
    """
    task = _task(ctx, task_id)
    if task["status"] == "done":
        raise ToolError(f"task {task_id} was already done on {task['completed_at']}")
    return ctx.state.update("tasks", task_id, {"status": "done", "completed_at": _stamp(ctx.now)})
