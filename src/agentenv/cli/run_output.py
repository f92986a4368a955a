"""What `agent-env run` prints: an episode's timeline (from its EpisodeRecord), and for many
episodes a summary table (task x agent) with totals."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from agentenv.rollout.store import FINISHED_OK, EpisodeRecord, episode_reward
from agentenv.tasks.verify_script import VERIFIER_PRINCIPAL

ERROR_WIDTH = 120
"""A failed call's message is cut to this many characters in the timeline."""


@dataclass(frozen=True)
class Counts:
    """An episode's agent turns (prompts answered), its calls and how many were denied.

    A verifier script's own calls (env_outcome_verifier with verify.py) are not the agent's
    and are not counted."""

    turns: int
    calls: int
    denied: int

    @classmethod
    def of(cls, record: EpisodeRecord | dict[str, Any]) -> Counts:
        """The counts of one episode: its record, or the record's JSON data (what
        `RolloutStore.raw_records` gives, read without validating it: faster for many)."""
        if isinstance(record, dict):
            rows = record.get("trajectory") or []
            prompts = [(p.get("response"), p.get("error")) for p in record.get("prompts") or []]
        else:
            rows = record.trajectory
            prompts = [(p.response, p.error) for p in record.prompts]
        calls = [r for r in rows if _agent_call(r)]
        return cls(
            turns=sum(1 for response, error in prompts if response is not None or error),
            calls=len(calls),
            denied=sum(1 for r in calls if r.get("denied")),
        )

    def __str__(self) -> str:
        return (
            f"{self.turns} {'turn' if self.turns == 1 else 'turns'}, "
            f"{self.calls} {'call' if self.calls == 1 else 'calls'}, {self.denied} denied"
        )


def _agent_call(row: dict[str, Any]) -> bool:
    return row.get("kind") == "call" and row.get("principal") != VERIFIER_PRINCIPAL


def _first_arg(args: Any) -> str:
    if not isinstance(args, dict) or not args:
        return ""
    value = next(iter(args.values()))
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _clock(value: str | None) -> str:
    return datetime.fromisoformat(value).strftime("%H:%M:%S") if value else "--:--:--"


def _cut(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def print_timeline(console: Console, record: EpisodeRecord, *, verbose: bool = False) -> None:
    """One episode as a timeline: its calls (a failed one with its message; with `verbose`
    its traceback, when the record has one), the messages of a conversation, trigger
    firings, failed steps, and the score by verifier."""
    counts = Counts.of(record)
    times = [r["virtual_time"] for r in record.trajectory if _agent_call(r) and r["virtual_time"]]
    span = ""
    if times:
        start, end = (datetime.fromisoformat(t) for t in (times[0], times[-1]))
        span = f"   {start:%H:%M:%S}-{end:%H:%M:%S}"
    repeat = f" #{record.repeat}" if record.repeat else ""
    console.print(
        f"[bold]{escape(record.agent)}[/] on [bold]{escape(record.task)}[/]{repeat}   "
        f"{counts}{span}",
        highlight=False,
    )
    number = 0
    actions: dict[str, list[str]] = {}  # a trigger's action calls, until its firing row
    for row in record.trajectory:
        kind = row.get("kind")
        when = _clock(row.get("virtual_time"))
        if kind == "message":  # a conversation: who said what, between the calls
            who = row.get("principal") or row.get("role") or ""
            text = _cut(row.get("detail") or "", 70)
            console.print(f"    {when} [dim]{escape(who)}: {escape(text)}[/]", highlight=False)
        elif kind == "trigger":
            trigger = str(row.get("trigger_id") or "?")
            if row.get("tool"):
                done = row["tool"] + (" (error)" if row.get("error") else "")
                actions.setdefault(trigger, []).append(done)
                continue
            if row.get("event") not in ("fired", "failed"):
                continue
            did = actions.pop(trigger, [])
            shown = f": {', '.join(did)}" if did else ""
            colour = "red" if row.get("event") == "failed" else "magenta"
            console.print(
                f"    {when} [{colour}]trigger {escape(trigger)} {row['event']}[/]{escape(shown)}",
                highlight=False,
            )
            if row.get("detail"):
                console.print(f"         {escape(_cut(row['detail'], ERROR_WIDTH))}")
        elif kind == "call":
            if row.get("principal") == VERIFIER_PRINCIPAL:
                mark = "  v"
            else:
                number += 1
                mark = f"{number:>3}"
            tool = escape(row.get("tool") or "")
            line = f"{mark} {when} {tool} {escape(_first_arg(row.get('args')))}"
            if row.get("denied"):
                line += f" [red]denied[/]{_why(row)}"
            elif row.get("error"):
                line += f" [yellow]error[/]{_why(row)}"
            console.print(line, highlight=False)
            trace = _traceback(row) if verbose else None
            if trace is not None:
                for text in trace.rstrip().splitlines():
                    console.print(f"         [dim]{escape(text)}[/]", highlight=False)
    for step in record.steps:
        status = step.get("status")
        if status not in ("succeeded", "pending", None):
            console.print(
                f"    step {escape(str(step.get('id')))} [red]{status}[/]: "
                f"{escape(str(step.get('error') or ''))}",
                highlight=False,
            )
    if record.score is None:
        why = "no verifier" if record.finished else "its verifiers did not run"
        console.print(f"status {record.status} ({why})", highlight=False)
    else:
        types = {str(s.get("id")): str(s.get("type")) for s in record.steps}
        parts = ", ".join(
            f"{escape(types.get(sid, sid))} {s.score:.2f}" for sid, s in record.scores.items()
        )
        console.print(f"score {record.score:.2f}  ({parts})", highlight=False)
    if record.error and not any(s.get("error") == record.error for s in record.steps):
        console.print(f"[red]error:[/] {escape(record.error)}", highlight=False)
    console.print()


def _why(row: dict[str, Any]) -> str:
    """`: kind: message` of a failed or denied call (`error` is `{kind, message}` in our
    records, a text in older ones); a denied call without one: its `detail`."""
    error = row.get("error")
    message = error if isinstance(error, str) else None
    if isinstance(error, dict):
        kind, text = error.get("kind"), error.get("message")
        message = f"{kind}: {text}" if kind and text else str(text or kind or "")
    if not message and not error:
        message = row.get("detail")
    if not isinstance(message, str) or not message.strip():
        return ""
    return f": {escape(_cut(message, ERROR_WIDTH))}"


def _traceback(row: dict[str, Any]) -> str | None:
    """A crashed tool's traceback: a failed call's `detail` (the gateway keeps it there;
    never sent to the agent), or a `traceback` field where a record has one."""
    error = row.get("error")
    if not error:
        return None
    nested = error.get("traceback") if isinstance(error, dict) else None
    for trace in (row.get("detail"), row.get("traceback"), nested):
        if isinstance(trace, str) and trace.strip():
            return trace
    return None


def error_lines(records: list[dict[str, Any]]) -> list[str]:
    """`  TASK (N episodes): why` for each task with episodes that errored or timed out: the
    first such episode's error, cut to a line, so that a table of many tasks still says
    why (a state check naming what its environment cannot have fails every deploy)."""
    first: dict[str, str] = {}
    counted: dict[str, int] = {}
    for record in records:
        if record.get("status") in FINISHED_OK:
            continue
        task = str(record.get("task"))
        counted[task] = counted.get(task, 0) + 1
        first.setdefault(task, str(record.get("error") or record.get("status")))
    return [
        f"  {task} ({counted[task]} episode{'s' if counted[task] > 1 else ''}): "
        f"{_cut(why, 2 * ERROR_WIDTH)}"
        for task, why in sorted(first.items())
    ]


@dataclass
class Cell:
    """The episodes of one task and agent, summed up for the table."""

    episodes: int = 0
    passed: int = 0
    scores: list[float] = field(default_factory=list)
    statuses: dict[str, int] = field(default_factory=dict)
    turns: int = 0
    calls: int = 0

    def add(self, data: dict[str, Any]) -> None:
        """Count one episode, from its record's JSON data."""
        counts = Counts.of(data)
        status = str(data.get("status"))
        self.episodes += 1
        self.passed += status == "passed"
        self.scores.append(_reward(data))
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.turns += counts.turns
        self.calls += counts.calls

    @property
    def mean(self) -> float:
        """The mean score (errors and timeouts count 0)."""
        return sum(self.scores) / len(self.scores) if self.scores else 0.0

    def status_text(self) -> str:
        """`passed`, or the statuses counted (`3 passed, 1 error`)."""
        if len(self.statuses) == 1 and self.episodes == 1:
            return next(iter(self.statuses))
        return ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items()))


def _reward(data: dict[str, Any]) -> float:
    """`EpisodeRecord.reward` of a record's JSON data."""
    score = data.get("score")
    number = score if isinstance(score, int | float) else None
    return episode_reward(str(data.get("status")), number, bool(data.get("passed")))


def summary_table(records: list[dict[str, Any]]) -> tuple[Table, Cell]:
    """The task x agent table (mean score, passed, statuses, mean turns and calls) and the
    totals over every episode, from the records' JSON data."""
    cells: dict[tuple[str, str], Cell] = {}
    total = Cell()
    for record in records:
        key = (str(record.get("task")), str(record.get("agent")))
        cells.setdefault(key, Cell()).add(record)
        total.add(record)
    table = Table(title="run summary")
    for column in ("task", "agent", "episodes", "score", "passed", "status", "turns", "calls"):
        justify = "left" if column in ("task", "agent", "status") else "right"
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for (task, agent), cell in cells.items():
        table.add_row(
            escape(task),
            escape(agent),
            str(cell.episodes),
            f"{cell.mean:.2f}",
            f"{cell.passed}/{cell.episodes}",
            cell.status_text(),
            f"{cell.turns / cell.episodes:.1f}",
            f"{cell.calls / cell.episodes:.1f}",
        )
    return table, total
