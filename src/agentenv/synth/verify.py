"""Verifiers written from a walk, and the trials every synthesized task must pass.

A task is written verifier first:

* a **state checklist** from the walk's state diff: each changed field of each changed
  record (a list that grew: each new item, by its stable fields), each added record
  (counted by its stable fields), each removed record. Fields that change when the
  walk is replayed with the clock moved are time-dependent and left out; a check that
  already holds before the walk is left out too (it tells nothing);
* the **gold replay**: the reference solution replayed from the same start must leave
  the same state hash (this one is exact, time stamps included);
* **required facts** in the final answer, for each read whose result no later call
  uses (a read-only walk is all facts): values that first appear in that result.

`Verifier.score` evaluates these directly on a state and a response, as the task's
verifier steps would (`env_outcome_verifier` is the mean of checklist and gold replay;
the task passes when every verifier does). `run_trials`: the reference solution scores
1.0, doing nothing scores 0 on every verifier, and every strict prefix of the solution
(answering with everything its calls returned) scores below 1.0.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from agentenv.grading.checklist import MISSING, json_equal
from agentenv.grading.response_checks import check_response
from agentenv.grading.state_checks import check_state, parse_state_checks
from agentenv.state import Snapshot, canonical_json, diff
from agentenv.synth.binding import UNNAMED, name_rank
from agentenv.synth.schema import Leaf, humanise, leaves
from agentenv.synth.walks import Dropped, Walk

MAX_CHECKS = 40
FACTS_PER_READ = 2


@dataclass
class Fact:
    """A value the final answer must hold."""

    step: int
    path: str
    value: Any
    label: str

    def check(self) -> dict[str, Any]:
        """The response check for it: a text (any case), or a number in any notation."""
        if isinstance(self.value, str):
            return {"contains": self.value, "ignore_case": True}
        return {"regex": number_pattern(self.value)}


def number_pattern(value: float | int) -> str:
    """A regex for a number as people write it: 98 matches `98`, `98.0`, `$98.00`."""
    if float(value).is_integer():
        return rf"(?<![\d.]){int(value)}(?:\.0+)?(?!\d)"
    return rf"(?<![\d.]){re.escape(repr(float(value)))}0*(?!\d)"


def _found(fact_value: Any, text: str) -> bool:
    if isinstance(fact_value, str):
        return fact_value.casefold() in text.casefold()
    return re.search(number_pattern(fact_value), text) is not None


def _facts_of(
    leaf_list: list[Leaf], volatile: set[str], earlier: str, common: frozenset[str]
) -> list[tuple[int, Leaf]]:
    counts: dict[str, int] = {}
    for leaf in leaf_list:
        counts[leaf.path] = counts.get(leaf.path, 0) + 1
    out = []
    for leaf in leaf_list:
        value = leaf.value
        if counts[leaf.path] > 1 or leaf.path in volatile or isinstance(value, bool):
            continue  # an item of a longer list: the answer could not say which
        if isinstance(value, str):
            if not 4 <= len(value) <= 80 or "\n" in value or value.casefold() in common:
                continue  # too short, too long, or a word any answer may hold (a role, a status)
            tier = 0 if name_rank(leaf.name) < UNNAMED else (1 if leaf.norm.endswith("id") else 2)
        elif isinstance(value, int | float):
            if abs(value) >= 1e12 or len(str(value)) < 2:
                continue
            tier = 3
        else:
            continue
        if not _found(value, earlier):
            out.append((tier, leaf))
    return sorted(out, key=lambda t: (t[0], t[1].path))


def required_facts(
    walk: Walk,
    shifted: list[Any],
    prompt: str,
    rng: random.Random,
    common: frozenset[str] = frozenset(),
) -> list[Fact]:
    """The facts the answer must hold: from each read no later call uses, values new to
    its result (not in the prompt, not in any earlier result, not time-dependent, not
    one of the `common` words, casefolded). Dropped("no_new_fact") for such a read with
    none."""
    consumed = walk.consumed()
    facts: list[Fact] = []
    for i, call in enumerate(walk.calls):
        if call.kind == "write" or i in consumed:
            continue
        earlier = prompt + "\n" + canonical_json([c.result for c in walk.calls[:i]])
        volatile = _volatile_paths(call.result, shifted[i])
        found = _facts_of(call.leaves, volatile, earlier, common)
        if not found:
            raise Dropped("no_new_fact", f"step {i + 1} ({call.tool}) returns nothing new")
        best = [leaf for tier, leaf in found if tier == found[0][0]]
        for leaf in sorted(
            rng.sample(best, min(FACTS_PER_READ, len(best))), key=lambda lf: lf.path
        ):
            facts.append(Fact(i, leaf.path, leaf.value, humanise(leaf.path)))
    return facts


def _volatile_paths(value: Any, other: Any) -> set[str]:
    mine = {(leaf.path, leaf.index): leaf.value for leaf in leaves(value, None)}
    theirs = {(leaf.path, leaf.index): leaf.value for leaf in leaves(other, None)}
    return {path for (path, index), v in mine.items() if theirs.get((path, index), MISSING) != v}


def reference_response(facts: list[Fact], walk: Walk) -> str:
    """The oracle's answer: what it did, and every required fact."""
    head = f"Done: {len(walk.calls)} step{'s' if len(walk.calls) != 1 else ''} completed."
    if not facts:
        return head
    parts = [f"{f.label} (step {f.step + 1}): {_text(f.value)}" for f in facts]
    return f"{head} " + "; ".join(parts) + "."


def _text(value: Any) -> str:
    return value if isinstance(value, str) else canonical_json(value)


def prefix_response(walk: Walk, k: int) -> str:
    """What an agent that made only the first `k` calls can answer: all it saw."""
    return canonical_json([c.result for c in walk.calls[:k]])


# -- state checklist ---------------------------------------------------------------------


def _stable(a: Any, b: Any) -> Any:
    """The part of `a` that `b` agrees with (dicts by key), or MISSING."""
    if json_equal(a, b):
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        part = {k: s for k, v in a.items() if k in b and (s := _stable(v, b[k])) is not MISSING}
        return part or MISSING
    return MISSING


def state_checks(walk: Walk, shifted_final: Snapshot, given: set[str]) -> list[dict[str, Any]]:
    """The checklist from the walk's state diff (see the module's docstring). `given`:
    the values the prompt states (an added record's key is checked only if given)."""
    start, final = walk.start, walk.final
    shifted = shifted_final.fork()
    after = final.fork()
    infos = final.infos()
    checks: list[dict[str, Any]] = []
    for coll, change in diff(start, final).collections.items():
        key_field = infos[coll].key
        for key in sorted(change.changed):
            rec = change.changed[key]
            other = shifted.get(coll, key) or {}
            for f in rec.fields:
                if "." in f:
                    continue
                checks += _field_checks(
                    coll,
                    key,
                    f,
                    rec.before.get(f, MISSING),
                    rec.after.get(f, MISSING),
                    other.get(f, MISSING),
                )
        for key in sorted(change.added):
            record = change.added[key]
            other = shifted.get(coll, key)
            where = {
                f: v
                for f, v in record.items()
                if "." not in f
                and (f != key_field or str(v) in given)
                and (other is None or json_equal(v, other.get(f, MISSING)))
                and not isinstance(v, dict | list)
            }
            if where:
                count = len(
                    after.find(
                        coll,
                        where=lambda r, w=where: all(json_equal(r.get(f), v) for f, v in w.items()),
                    )
                )
                checks.append({"collection": coll, "where": where, "count": count})
        for key in sorted(change.removed):
            checks.append(
                {
                    "collection": coll,
                    "where": {key_field: change.removed[key][key_field]},
                    "count": 0,
                }
            )
    return _discriminating(checks, start, final)[:MAX_CHECKS]


def _field_checks(
    coll: str, key: str, f: str, before: Any, after: Any, other: Any
) -> list[dict[str, Any]]:
    base = {"collection": coll, "key": key, "field": f}
    if after is MISSING:
        return [{**base, "exists": False}] if other is MISSING else []
    if json_equal(after, other):
        return [{**base, "equals": after}]
    if isinstance(after, list) and isinstance(before, list) and isinstance(other, list):
        n = len(before)
        if after[:n] == before and other[:n] == before and len(after) == len(other):
            out = []
            for item, item_other in zip(after[n:], other[n:], strict=True):
                stable = _stable(item, item_other)
                if stable is not MISSING:
                    out.append({**base, "contains": stable})
            return out
    if isinstance(after, dict) and isinstance(other, dict):
        old = before if isinstance(before, dict) else {}
        return [
            {**base, "field": f"{f}.{k}", "equals": v}
            for k, v in after.items()
            if "." not in k
            and json_equal(v, other.get(k, MISSING))
            and not json_equal(v, old.get(k, MISSING))
        ]
    return []


def _discriminating(
    checks: list[dict[str, Any]], start: Snapshot, final: Snapshot
) -> list[dict[str, Any]]:
    if not checks:
        return []
    parsed = parse_state_checks(checks)
    before, after = start.fork(), final.fork()
    return [
        raw
        for raw, check in zip(checks, parsed, strict=True)
        if check.evaluate(after).passed and not check.evaluate(before).passed
    ]


# -- scoring and trials ------------------------------------------------------------------


@dataclass
class Verifier:
    """The verifiers of one task, evaluated directly (no task runner)."""

    checks: list[dict[str, Any]] = field(default_factory=list)
    gold_hash: str | None = None
    facts: list[Fact] = field(default_factory=list)

    @property
    def response_checks(self) -> list[dict[str, Any]]:
        """The answer's checklist."""
        return [f.check() for f in self.facts]

    def score(self, final: Snapshot, response: str) -> tuple[float, dict[str, float]]:
        """The task score (all verifiers pass: 1.0, else 0.0) and each verifier's score."""
        parts: dict[str, float] = {}
        if self.checks or self.gold_hash is not None:
            env = []
            if self.checks:
                env.append(check_state(final, self.checks).score)
            if self.gold_hash is not None:
                env.append(1.0 if final.hash() == self.gold_hash else 0.0)
            parts["outcome"] = sum(env) / len(env)
        if self.facts:
            parts["answer"] = check_response(response, self.response_checks).score
        if not parts:
            raise Dropped("no_verifier", "the walk leaves nothing to check")
        task = 1.0 if all(v >= 1.0 for v in parts.values()) else 0.0
        return task, parts


def run_trials(verifier: Verifier, walk: Walk, response: str) -> dict[str, Any]:
    """Score the reference, doing nothing, and each strict prefix; Dropped on a failure."""
    reference, parts = verifier.score(walk.final, response)
    if reference != 1.0:
        raise Dropped("trial_reference", f"the reference solution scores {parts}")
    nothing, parts = verifier.score(walk.start, "")
    if nothing != 0.0 or any(v != 0.0 for v in parts.values()):
        raise Dropped("trial_nothing", f"doing nothing scores {parts}")
    prefixes = []
    for k in range(1, len(walk.calls)):
        score, parts = verifier.score(walk.calls[k - 1].after, prefix_response(walk, k))
        if score >= 1.0:
            raise Dropped("trial_prefix", f"the first {k} calls already pass")
        prefixes.append(round(sum(parts.values()) / len(parts), 4))
    return {"reference": 1.0, "nothing": 0.0, "prefixes": prefixes}
