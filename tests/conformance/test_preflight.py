"""Upstream's pre-deploy fit check (agentenv_protocol.preflight) against `agent-env serve`.

Upstream's `intake_fit_check(client.intake_declaration(card), data_json)` checks seed data
against the `urn:agentenv:intake/v1` declaration a card may carry. The declaration is optional
in upstream ("no claim" skips the check): the points that need one skip, saying so, when our
card makes no claim.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def check(name: str) -> Callable[[Callable[[Probes], None]], Callable[[Probes], None]]:
    """Register one preflight point, tested on its own."""

    def register(fn: Callable[[Probes], None]) -> Callable[[Probes], None]:
        CHECKS.append(("card_rest", name, fn))
        return fn

    return register


def declared(p: Probes) -> dict[str, Any]:
    """The card's intake declaration; skips the point when the card makes none."""
    declaration = p.value("intake_declaration")
    if declaration is None:
        pytest.skip(
            "our card makes no urn:agentenv:intake/v1 claim (optional upstream); nothing to fit-check"
        )
    return declaration


@check("the intake declaration is readable")
def _(p: Probes) -> None:
    p.value("intake_declaration")
    p.value("declaration model")


@check("the served data fits what the card declares")
def _(p: Probes) -> None:
    assert p.value("fit served") == []


@check("an undeclared collection is reported")
def _(p: Probes) -> None:
    declared(p)
    issues = p.value("fit unknown_collection")
    assert issues and "no_such_collection" in issues[0], issues


@check("a record without its required fields is reported")
def _(p: Probes) -> None:
    declaration = declared(p)
    tables = next(
        (f.get("tables") for f in declaration.get("add") or [] if f.get("part") == "data"), None
    )
    if not tables:
        pytest.skip("the declaration has no per-collection schemas (optional upstream)")
    assert p.value("fit missing_required"), "a record missing required fields fitted"


@pytest.fixture(scope="module")
def probes(readonly_desk: str, driver: Callable[..., Probes]) -> Probes:
    """The fit checks, run once against the shared (read-only) support-desk server."""
    return driver("preflight_probe.py", readonly_desk)


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_upstream_preflight(
    point: tuple[str, str, Callable[[Probes], None]], probes: Probes
) -> None:
    """One preflight point, as upstream's fit check sees it."""
    point[2](probes)
