"""Each trigger feature our card declares (`urn:agentenv:triggers/v1` `params.features`) works
with upstream's spec shapes, registered through upstream's client.

A feature the card does not declare is skipped, saying so: the card must declare only what
works, and what it declares is held to it here. Shapes are upstream's (its gateway's
triggers.py): `when.roles`, an action's `delay`, a one-shot time trigger's `unless`, named
`executors` with `hours` (`start`, `end`, `time_zone` or `utc_offset`, `days`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envs"

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def check(
    feature: str, name: str
) -> Callable[[Callable[[Probes], None]], Callable[[Probes], None]]:
    """Register one point of a declared feature, tested on its own."""

    def register(fn: Callable[[Probes], None]) -> Callable[[Probes], None]:
        def run(p: Probes) -> None:
            if feature not in (p.value("features") or []):
                pytest.skip(f"the card does not declare trigger feature {feature!r}")
            fn(p)

        CHECKS.append(("triggers_clock", f"{feature}: {name}", run))
        return fn

    return register


@check("provoking_roles", "a call by an unlisted role does not provoke")
def _(p: Probes) -> None:
    assert p.value("provoking register")["added"] == ["by-supervisor"]
    assert p.value("provoking other_role call")["isError"] is False
    assert p.value("provoking after other_role")["status"] == "armed"


@check("provoking_roles", "a call by a listed role provokes")
def _(p: Probes) -> None:
    entry = p.value("provoking after listed_role")
    assert entry["status"] == "fired" and entry["fire_count"] == 1, entry


@check("action_delay", "a delayed action waits, in virtual time")
def _(p: Probes) -> None:
    assert p.value("delay register")["added"] == ["later"]
    entry = p.value("delay before")
    assert entry["status"] in ("firing", "queued") and entry["fired_at"] is None, entry


@check("action_delay", "a delayed action runs once its delay has passed")
def _(p: Probes) -> None:
    assert p.value("delay advance")["isError"] is False
    entry = p.value("delay after")
    assert entry["status"] == "fired" and entry["fire_count"] == 1, entry


@check("unless", "the unless call cancels a deadline")
def _(p: Probes) -> None:
    assert p.value("unless register")["added"] == ["deadline"]
    entry = p.value("unless after")
    assert entry["status"] == "cancelled" and entry["fire_count"] == 0, entry


@check("named_executors", "named executors register and are listed in state.config")
def _(p: Probes) -> None:
    assert p.value("executors register")["added"] == ["ask-night-desk"]
    assert "night-desk" in p.value("executors state")["config"]["executors"]


@check("named_executors", "an nl action naming no registered executor is 400")
def _(p: Probes) -> None:
    p.error("executors unknown_name", 400)


@check("executor_hours_time_zone", "hours in an unknown time zone are 400")
def _(p: Probes) -> None:
    p.error("executors bad_zone", 400)


@check("executor_hours", "hours with a UTC offset, across midnight, register")
def _(p: Probes) -> None:
    assert p.value("executor_hours utc_offset")["ok"] is True


@pytest.fixture(scope="module")
def probes(serve_env: Callable[..., Any], driver: Callable[..., Probes]) -> Probes:
    """The feature sequence, once, against a fresh support-desk server."""
    with serve_env(EXAMPLES / "support-desk") as base:
        return driver("trigger_features_probe.py", base)


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_trigger_feature(point: tuple[str, str, Callable[[Probes], None]], probes: Probes) -> None:
    """One point of a declared trigger feature, as upstream's client drives it."""
    point[2](probes)
