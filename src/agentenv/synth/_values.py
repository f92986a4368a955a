"""Arguments for procedural tool checks: the cases `agent-env check` calls each tool with.

`ArgumentGenerator.cases(tool, count, rng)` gives a deterministic list of `Case`s for one
tool: calls valid per its input schema (a parameter that names a record, such as
`ticket_id`, mostly draws an existing key from the seed), boundary values that are still
valid (0, -1, empty and very long strings, the declared minimum and maximum, huge
numbers, empty lists), and invalid calls the gateway must refuse as `invalid_arguments`
(a wrong type, a missing required argument, an unknown argument, a value outside the
declared minimum, maximum or enum). Every valid and boundary case is checked against the
schema with jsonschema before it is kept, and every invalid one is checked to break it.

The values come from two helpers: `_schema_values` (what a JSON schema allows) and
`_record_keys` (what the seeded state holds).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from agentenv.env import Environment, Tool
from agentenv.synth._record_keys import RecordKeys
from agentenv.synth._schema_values import SchemaValues

VALID = "valid"
BOUNDARY = "boundary"
WRONG_TYPE = "wrong_type"
MISSING_REQUIRED = "missing_required"
EXTRA_ARGUMENT = "extra_argument"
OUT_OF_RANGE = "out_of_range"
INVALID_CASES = (WRONG_TYPE, MISSING_REQUIRED, EXTRA_ARGUMENT, OUT_OF_RANGE)
EXTRA_NAME = "unexpected_argument"

# Values of the wrong JSON type, tried in order: an object is refused by almost every
# parameter type (strings, numbers, booleans, lists, enums, dates), so it comes first.
_WRONG_VALUES: list[Any] = [{"unexpected": True}, "not-a-number", 12345, [1, 2]]


@dataclass(frozen=True)
class Case:
    """One generated call: which family it belongs to and its arguments."""

    case: str
    args: dict[str, Any]

    @property
    def invalid(self) -> bool:
        """Whether the schema forbids these arguments (the gateway must refuse them)."""
        return self.case in INVALID_CASES


class ArgumentGenerator:
    """Builds the cases of each tool of one environment (see the module docstring)."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        start = env.clock.start or datetime(2026, 3, 2, 9, tzinfo=UTC)
        self.schema_values = SchemaValues(start.astimezone(UTC))
        self.record_keys = RecordKeys(env, self.schema_values)

    def cases(self, tool: Tool, count: int, rng: random.Random) -> list[Case]:
        """`count` distinct cases for one tool (fewer if it has fewer distinct inputs)."""
        root = tool.input_schema
        props: dict[str, Any] = root.get("properties", {}) or {}
        required = [p for p in root.get("required", []) if p in props]
        sources = {p: self.record_keys.source(tool, p) for p in props}
        whole = self.schema_values.validator(root, root)
        seen: set[str] = set()

        def keep(case: Case, out: list[Case]) -> None:
            text = json.dumps(case.args, sort_keys=True, default=str)
            if text in seen or whole.is_valid(case.args) == case.invalid:
                return
            seen.add(text)
            out.append(case)

        def draw(all_optional: bool | None = None) -> dict[str, Any]:
            args = {}
            for p, s in props.items():
                wanted = p in required or (
                    all_optional if all_optional is not None else rng.random() < 0.5
                )
                if wanted:
                    args[p] = self.record_keys.value(s, root, p, sources[p], rng)
            return self.record_keys.link(tool, args, root, rng) if rng.random() < 0.5 else args

        valid: list[Case] = []
        keep(Case(VALID, draw(all_optional=False)), valid)
        for _ in range(count * 6):
            if len(valid) >= count:
                break
            keep(Case(VALID, draw()), valid)
        base = valid[0].args if valid else {}

        boundary: list[Case] = []
        for p, s in props.items():
            for v in self.schema_values.boundary_values(s, root):
                keep(Case(BOUNDARY, {**base, p: v}), boundary)
        rng.shuffle(boundary)

        families: list[list[Case]] = [[], [], [], []]
        for p, s in props.items():
            for v in _WRONG_VALUES:
                if not self.schema_values.fits(v, s, root):
                    keep(Case(WRONG_TYPE, {**base, p: v}), families[0])
                    break
            for v in self.schema_values.out_of_range(s, root):
                keep(Case(OUT_OF_RANGE, {**base, p: v}), families[3])
        for p in required:
            keep(Case(MISSING_REQUIRED, {k: v for k, v in base.items() if k != p}), families[1])
        if root.get("additionalProperties") is False and EXTRA_NAME not in props:
            keep(Case(EXTRA_ARGUMENT, {**base, EXTRA_NAME: "x"}), families[2])
        invalid = _interleave(families)

        families_present = sum(1 for f in families if f)
        n_invalid = min(
            len(invalid),
            max(round(count * 0.2), min(families_present, count // 2), 1 if count >= 3 else 0),
        )
        n_boundary = min(len(boundary), round(count * 0.2))
        n_valid = min(len(valid), max(1, count - n_invalid - n_boundary))
        spare = count - n_valid - n_invalid - n_boundary
        if spare > 0:  # few distinct valid inputs: spend the rest on the other families
            extra_b = min(spare, len(boundary) - n_boundary)
            n_boundary += extra_b
            n_invalid = min(len(invalid), n_invalid + spare - extra_b)
        return valid[:n_valid] + boundary[:n_boundary] + invalid[:n_invalid]


def _interleave(groups: list[list[Case]]) -> list[Case]:
    out: list[Case] = []
    for i in range(max((len(g) for g in groups), default=0)):
        out += [g[i] for g in groups if i < len(g)]
    return out
