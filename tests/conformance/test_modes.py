"""Gateway modes and the strict-roles opt-in, seen by upstream's tool client.

`agent-env serve --mode performance` lets calls on one instance overlap (upstream's
`performance` mode); `--strict-roles` is our opt-in that refuses roles the document does not
declare. Upstream's callers must notice neither: concurrent sessions all get their answers,
no role and role `default` keep working under strict roles, declared roles too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envs"

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def check(name: str) -> Callable[[Callable[[Probes], None]], Callable[[Probes], None]]:
    """Register one point, tested on its own."""

    def register(fn: Callable[[Probes], None]) -> Callable[[Probes], None]:
        CHECKS.append(("roles", name, fn))
        return fn

    return register


@check("performance mode: concurrent reads all answer")
def _(p: Probes) -> None:
    assert [r["isError"] for r in p.value("concurrent reads")] == [False] * 8


@check("performance mode: concurrent writes all land")
def _(p: Probes) -> None:
    results = p.value("concurrent writes")
    assert all(not r["isError"] for r in results), [r["text"] for r in results if r["isError"]]
    tickets = {t["id"]: t["status"] for t in p.value("tickets after writes")["tickets"]}
    assert all(tickets[t] == "pending" for t in ("T-1040", "T-1042", "T-1046")), tickets


@check("performance mode: concurrent /step calls all answer")
def _(p: Probes) -> None:
    assert p.value("concurrent steps") == [200] * 8


@check("strict roles: no role still works")
def _(p: Probes) -> None:
    assert p.value("strict no_role")["isError"] is False


@check("strict roles: role default still works")
def _(p: Probes) -> None:
    assert p.value("strict default")["isError"] is False, p.value("strict default")["text"]


@check("strict roles: a declared role works")
def _(p: Probes) -> None:
    assert p.value("strict declared")["isError"] is False


@check("strict roles: an undeclared role is refused, by name")
def _(p: Probes) -> None:
    result = p.value("strict undeclared")
    assert result["isError"] is True and "auditor" in result["text"], result


@pytest.fixture(scope="module")
def probes(serve_env: Callable[..., Any], driver: Callable[..., Probes]) -> Probes:
    """Concurrent and strict-role calls on a support-desk served in performance mode, strict roles."""
    with serve_env(EXAMPLES / "support-desk", "--mode", "performance", "--strict-roles") as base:
        return driver("modes_probe.py", base)


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_modes(point: tuple[str, str, Callable[[Probes], None]], probes: Probes) -> None:
    """One point, as upstream's tool client sees it."""
    point[2](probes)
