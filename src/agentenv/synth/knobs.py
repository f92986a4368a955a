"""Difficulty knobs: depth, topology, obfuscation, distractors.

* **depth**: how many calls the reference solution makes (a range, sampled per task);
* **topology**: the walk's shape, `chain`, `fan-in` or `fan-out` (a list, sampled);
* **obfuscation**: the chance that the prompt names a record by a unique, searchable
  attribute (a customer's email, a ticket's subject) instead of its id, so the agent
  has to search for it;
* **distractors**: how many near-duplicate records (a copy of a record the walk uses,
  with a new key and its naming text slightly changed) are added to the task's start
  state, for a careless agent to act on. The task adds them with a `load_artifact` step.

Every knob is a CLI flag, and its value for each task is in the task's metadata.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any

from agentenv.state import State, StateError
from agentenv.synth.binding import Resolver, name_rank
from agentenv.synth.fill import fresh_key
from agentenv.synth.graph import ToolGraph
from agentenv.synth.walks import TOPOLOGIES, Topology, Walk

MAX_DEPTH = 12
MAX_DISTRACTORS = 50
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


class KnobError(ValueError):
    """A knob value out of range or malformed."""


@dataclass(frozen=True)
class Knobs:
    """The difficulty knobs of a synthesis run."""

    depth: tuple[int, int] = (2, 4)
    topologies: tuple[Topology, ...] = TOPOLOGIES
    obfuscation: float = 0.0
    distractors: int = 0

    def __post_init__(self) -> None:
        low, high = self.depth
        if not 1 <= low <= high <= MAX_DEPTH:
            raise KnobError(f"depth must be a range within 1..{MAX_DEPTH}, got {low}..{high}")
        if not self.topologies:
            raise KnobError("give at least one topology")
        unknown = [t for t in self.topologies if t not in TOPOLOGIES]
        if unknown:
            raise KnobError(
                f"unknown topology {unknown[0]!r} (choose from {', '.join(TOPOLOGIES)})"
            )
        if not 0.0 <= self.obfuscation <= 1.0:
            raise KnobError(f"obfuscation must be between 0 and 1, got {self.obfuscation:g}")
        if not 0 <= self.distractors <= MAX_DISTRACTORS:
            raise KnobError(
                f"distractors must be between 0 and {MAX_DISTRACTORS}, got {self.distractors}"
            )

    @classmethod
    def parse(
        cls,
        depth: str | int = "2..4",
        topology: str = "mixed",
        obfuscation: float = 0.0,
        distractors: int = 0,
    ) -> Knobs:
        """Knobs from CLI text: depth `3` or `2..6`; topology `mixed` or a comma list."""
        return cls(
            parse_depth(depth), parse_topologies(topology), float(obfuscation), int(distractors)
        )

    def sample(self, rng: random.Random) -> tuple[int, Topology]:
        """One task's depth and topology."""
        return rng.randint(*self.depth), rng.choice(self.topologies)

    def to_json(self) -> dict[str, Any]:
        """The knobs as the run's report and the tasks' provenance write them."""
        return {
            "depth": f"{self.depth[0]}..{self.depth[1]}",
            "topology": list(self.topologies),
            "obfuscation": self.obfuscation,
            "distractors": self.distractors,
        }


def parse_depth(value: str | int) -> tuple[int, int]:
    """`3` -> (3, 3); `2..6` -> (2, 6)."""
    text = str(value).strip()
    match = re.fullmatch(r"(\d+)(?:\s*\.\.\s*(\d+))?", text)
    if match is None:
        raise KnobError(f"depth must be a number or a range like 2..6, got {text!r}")
    low = int(match.group(1))
    high = int(match.group(2)) if match.group(2) else low
    if low > high:
        raise KnobError(f"depth range {text!r} is empty (the first number is larger)")
    return low, high


def parse_topologies(value: str) -> tuple[Topology, ...]:
    """`mixed` (all three) or a comma-separated list."""
    text = value.strip().lower()
    if text in ("mixed", "all", ""):
        return TOPOLOGIES
    out: list[Any] = []
    for part in (p.strip() for p in text.split(",")):
        name = part.replace("_", "-")
        if name not in TOPOLOGIES:
            raise KnobError(
                f"unknown topology {part!r} (choose from mixed, {', '.join(TOPOLOGIES)})"
            )
        if name not in out:
            out.append(name)
    return tuple(out)


# -- distractors -------------------------------------------------------------------------


def referenced_records(walk: Walk, state: State) -> list[tuple[str, str]]:
    """`(collection, key)` of every record a walk's arguments name, sorted."""
    found = set()
    for call in walk.calls:
        for value in call.args.values():
            if isinstance(value, str | int) and not isinstance(value, bool):
                for coll in state.collections:
                    if state.has(coll, value):
                        found.add((coll, str(value)))
    return sorted(found)


def _foreign(value: Any, state: State) -> bool:
    return any(state.has(c, value) for c in state.collections)


def _enum_fields(state: State, coll: str) -> set[str]:
    schema = state.info(coll).schema or {}
    props = schema.get("properties", {})
    return {f for f, p in props.items() if isinstance(p, dict) and ("enum" in p or "pattern" in p)}


def near_text(text: str, rng: random.Random) -> str:
    """A small edit of a text: one digit changed, or one letter of its longest word
    (of an email's name part) changed or doubled."""
    if "@" in text:
        local, _, domain = text.partition("@")
        return f"{near_text(local, rng)}@{domain}" if len(local) > 2 else f"{local}x@{domain}"
    digits = [i for i, ch in enumerate(text) if ch.isdigit()]
    if digits:
        i = rng.choice(digits)
        return text[:i] + rng.choice([d for d in "0123456789" if d != text[i]]) + text[i + 1 :]
    words = [(m.start(), m.group()) for m in re.finditer(r"[A-Za-z]{3,}", text)]
    if not words:
        return text + " II"
    start, word = max(words, key=lambda w: (len(w[1]), -w[0]))
    i = rng.randrange(1, len(word) - 1)
    ch = word[i]
    vowels = "aeiou"
    if ch.lower() in vowels:
        new = rng.choice([v for v in vowels if v != ch.lower()])
        changed = word[:i] + (new.upper() if ch.isupper() else new) + word[i + 1 :]
    else:
        changed = word[:i] + ch + word[i:]  # doubled
    return text[:start] + changed + text[start + len(word) :]


def make_distractors(
    walk: Walk, state: State, n: int, rng: random.Random
) -> dict[str, list[dict[str, Any]]]:
    """Up to `n` near-duplicates of the records the walk names, by collection. `state`
    (a fork of the start) receives them, which checks them against the schemas."""
    refs = referenced_records(walk, state)
    if not refs or n <= 0:
        return {}
    rng.shuffle(refs)
    out: dict[str, list[dict[str, Any]]] = {}
    for i in range(n):
        coll, key = refs[i % len(refs)]
        original = state.get(coll, key)
        if original is None:
            continue
        copy = near_duplicate(original, coll, state, rng)
        if copy is None:
            continue
        try:
            state.insert(coll, copy)
        except StateError:
            continue
        out.setdefault(coll, []).append(copy)
    return out


def near_duplicate(
    record: dict[str, Any], coll: str, state: State, rng: random.Random
) -> dict[str, Any] | None:
    """A copy of a record with a fresh key and its naming text slightly changed."""
    key_field = state.info(coll).key
    key = fresh_key(state, coll, rng)
    if key is None or state.has(coll, key):
        return None
    fixed = _enum_fields(state, coll)
    texts = sorted(
        (
            f
            for f, v in record.items()
            if f != key_field
            and f not in fixed
            and isinstance(v, str)
            and 3 <= len(v) <= 200
            and not _foreign(v, state)
            and not _DATE.match(v)
        ),
        key=lambda f: (name_rank(f), f),
    )
    if not texts:
        return None
    copy = {**record, key_field: key}
    chosen = texts[:1] + ([rng.choice(texts[1:])] if len(texts) > 1 and rng.random() < 0.5 else [])
    for f in chosen:
        taken = {r.get(f) for r in state.list(coll)}
        for _ in range(6):
            changed = near_text(record[f], rng)
            if changed not in taken:
                copy[f] = changed
                break
        else:
            return None
    return copy


# -- obfuscation -------------------------------------------------------------------------


def searchable_fields(graph: ToolGraph, coll: str) -> set[str]:
    """Fields of a collection's records that some tool lists, callable with nothing or
    with one free text (a search box): an agent can find a record by them."""
    out: set[str] = set()
    for node in graph.nodes.values():
        required = [p for p in node.params if p.required]
        free = all("string" in p.types and p.pattern is None and p.enum is None for p in required)
        if len(required) > 1 or not free:
            continue
        for field in node.outputs.values():
            if field.entity == coll and "[]" in field.path:
                out.add(field.name)
    return out


def unique_attribute(state: State, coll: str, key: str, fields: set[str]) -> tuple[str, str] | None:
    """A searchable text field whose value only this record has (names first)."""
    record = state.get(coll, key)
    if record is None:
        return None
    key_field = state.info(coll).key
    rows = state.list(coll)
    for f in sorted(fields, key=lambda f: (name_rank(f), f)):
        value = record.get(f)
        if (
            f == key_field
            or not isinstance(value, str)
            or not 3 <= len(value) <= 80
            or "\n" in value
        ):
            continue
        if _foreign(value, state):
            continue
        folded = value.casefold()
        if sum(1 for r in rows if isinstance(r.get(f), str) and r[f].casefold() == folded) == 1:
            return f, value
    return None


def choose_obfuscations(
    walk: Walk, state: State, graph: ToolGraph, rate: float, resolver: Resolver, rng: random.Random
) -> dict[tuple[int, str], tuple[str, str, str]]:
    """Which given record ids the prompt replaces by an attribute: `(step, param) ->
    (collection, field, value)`. One decision per record, so an id never leaks."""
    decided: dict[tuple[str, str], tuple[str, str] | None] = {}
    out: dict[tuple[int, str], tuple[str, str, str]] = {}
    for i, call in enumerate(walk.calls):
        for b in call.bounds:
            coll = b.collection
            if b.source != "state" or coll is None or b.path != resolver.keys.get(coll):
                continue
            record = (coll, str(b.value))
            if record not in decided:
                wanted = rate > 0 and rng.random() < rate
                attr = (
                    unique_attribute(state, coll, str(b.value), searchable_fields(graph, coll))
                    if wanted
                    else None
                )
                decided[record] = attr
            attr = decided[record]
            if attr is not None:
                out[(i, b.param)] = (coll, attr[0], attr[1])
    hidden = {key: out_value for (_, key), out_value in _by_key(out, walk).items()}
    for i, call in enumerate(walk.calls):  # the same id given elsewhere is hidden too
        for b in call.bounds:
            if b.source != "upstream" and (i, b.param) not in out and str(b.value) in hidden:
                out[(i, b.param)] = hidden[str(b.value)]
    return out


def _by_key(
    out: dict[tuple[int, str], tuple[str, str, str]], walk: Walk
) -> dict[tuple[str, str], tuple[str, str, str]]:
    return {
        (coll, str(walk.calls[i].args[param])): (coll, f, v)
        for (i, param), (coll, f, v) in sorted(out.items())
    }
