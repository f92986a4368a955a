"""Why task synthesis dropped its candidates, and what to try: read from the counts a run
collected (`report["dropped"]`, `report["dropped_causes"]`, the graph's stats), never
guessed. `synth tasks` prints it when candidates were dropped, and above all when none
survived."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

REASONS: dict[str, str] = {
    "no_walk": "no walk of the sampled shape on the tool graph",
    "call_failed": "a call of the walk failed",
    "unbound_argument": "an argument found no value (in the seed or an earlier output)",
    "repeated_call": "the walk repeated a call",
    "noop_write": "a write changed nothing",
    "empty_result": "a read returned nothing informative",
    "no_new_fact": "a read returned nothing new to ask about",
    "duplicate": "the same calls as an earlier task",
    "replay_disagrees": "every walk rejected by replay (a second run differs)",
    "clock_dependent": "a call fails once the clock moves",
    "distractors_break_walk": "the distractor records break the walk",
    "no_verifier": "the walk leaves nothing to check",
    "trial_reference": "the reference solution fails its own verifier",
    "trial_nothing": "verifier trivially true (doing nothing scores above 0)",
    "trial_prefix": "a strict prefix of the solution already passes",
    "internal_error": "an internal error",
}
"""What each drop reason code means, as a user reads it."""

_CAUSES_SHOWN = 3


def cause_of(reason: str, detail: str) -> str | None:
    """The finer cause a drop is counted under (a tool, a graph shape), or None."""
    if reason == "no_walk":
        return re.sub(r"^\S+ feeds no tool$", "a tool in the walk feeds no other tool", detail)
    if reason == "call_failed":
        return detail.split(":", 1)[0] or None
    if reason == "unbound_argument":  # one count per parameter, whichever step it was
        return re.sub(r"^step \d+ gave no ", "an earlier step gave no ", detail)[:80] or None
    if reason in ("empty_result", "noop_write", "repeated_call"):
        return detail[:80] or None
    return None


def reason_lines(report: dict[str, Any]) -> list[str]:
    """`label: count (cause n, ...)` for every drop reason, most frequent first."""
    causes: dict[str, dict[str, int]] = report.get("dropped_causes") or {}
    lines = []
    for code, count in report.get("dropped", {}).items():
        line = f"{REASONS.get(code, code)} [{code}]: {count}"
        found = Counter(causes.get(code) or {}).most_common(_CAUSES_SHOWN)
        if found:
            line += " (" + ", ".join(f"{cause} {n}" for cause, n in found) + ")"
        lines.append(line)
    return lines


def suggestions(report: dict[str, Any]) -> list[str]:
    """What to try, from what the counts say (most telling first)."""
    dropped: dict[str, int] = report.get("dropped") or {}
    graph: dict[str, Any] = report.get("graph") or {}
    knobs: dict[str, Any] = report.get("knobs") or {}
    depth = str(knobs.get("depth", ""))
    total = sum(dropped.values()) or 1
    tips: list[str] = []

    def share(*codes: str) -> float:
        return sum(dropped.get(c, 0) for c in codes) / total

    if graph and not graph.get("nodes"):
        tips.append("--role: the role walked may call no tool; pick one that may")
        return tips
    if graph.get("probes") and not graph.get("probes_ok"):
        tips.append(
            "seed data in the environment: no probe call of any tool returned something "
            "informative, so no output field was observed (do the tools work on the seed? "
            "`agent-env check ENV`)"
        )
    if dropped.get("no_walk"):
        if graph.get("nodes") and not graph.get("edges"):
            tips.append(
                f"--depth 1: the tool graph has {graph['nodes']} tools and no edges (no "
                "tool's output feeds another's input), so only one-call walks exist"
            )
        elif share("no_walk") >= 0.5:
            tips.append(
                f"a smaller --depth (now {depth}) or --topology chain: most sampled shapes "
                "do not exist on this graph"
            )
        tips.append(
            "--probes N (more calls per tool when the graph is built): edges come from "
            "the output fields the probes observe"
        )
    if share("unbound_argument", "empty_result", "no_new_fact", "noop_write") >= 0.3:
        tips.append(
            "seed data in the environment: records the tools can read and whose keys "
            "they take, so walks bind arguments and reads return something"
        )
    if share("call_failed") >= 0.3:
        tips.append("`agent-env check ENV`: the tools fail on many generated arguments")
    if dropped.get("replay_disagrees") or dropped.get("clock_dependent"):
        tips.append(
            "`agent-env check ENV` (determinism): tools that give a different result on "
            "the same call cannot be replayed; read time from the virtual clock"
        )
    if share("duplicate") >= 0.3:
        tips.append(
            "fewer tasks (-n), a larger --depth or more seed records: the environment "
            "has few distinct walks"
        )
    if dropped.get("trial_nothing") or dropped.get("trial_prefix"):
        tips.append(
            "walks that write: a verifier that already holds before (or part way) is "
            "refused; a larger --depth or tools that change the state help"
        )
    if dropped.get("distractors_break_walk"):
        tips.append("fewer --distractors: the near-duplicates break some walks")
    if dropped.get("internal_error"):
        tips.append("internal errors are bugs: report them with report.json (drop_examples)")
    return tips
