"""Our bearer tokens, kept beside upstream's roles, as upstream's client and tool client meet them.

`agent-env serve --token ROLE=SECRET` binds roles to secrets (ours): once any is set, only
`Authorization: Bearer` counts and the `AgentEnv-Role` header grants nothing. Upstream's
`ToolSession(headers=...)` carries the token unchanged; the card stays readable without one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envs"
TOKENS = ("--token", "agent=agent-secret", "--token", "admin=admin-secret")

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def check(name: str) -> Callable[[Callable[[Probes], None]], Callable[[Probes], None]]:
    """Register one point, tested on its own."""

    def register(fn: Callable[[Probes], None]) -> Callable[[Probes], None]:
        CHECKS.append(("roles", name, fn))
        return fn

    return register


@check("tokens: the card is readable without a token")
def _(p: Probes) -> None:
    assert p.value("card")["name"] == "support-desk"


@check("tokens: ToolSession with a bearer token calls tools")
def _(p: Probes) -> None:
    result = p.value("call with token")
    assert result["isError"] is False and json.loads(result["text"])["id"] == "C-001"


@check("tokens: a wrong token is refused")
def _(p: Probes) -> None:
    outcome = p.outcome("call with wrong token")
    assert not outcome["ok"] and "401" in outcome["error"], outcome


@check("tokens: the role header alone grants nothing")
def _(p: Probes) -> None:
    outcome = p.outcome("call with role header only")
    assert not outcome["ok"] and "401" in outcome["error"], outcome
    assert p.value("disable with role header only")["status"] == 401


@check("tokens: the control plane needs the admin token")
def _(p: Probes) -> None:
    assert p.value("disable with agent token")["status"] == 403
    answer = p.value("disable with admin token")
    assert answer["status"] == 200, answer["text"]


@pytest.fixture(scope="module")
def probes(serve_env: Callable[..., Any], driver: Callable[..., Probes]) -> Probes:
    """Token calls, once, against a support-desk served with an agent and an admin token."""
    with serve_env(EXAMPLES / "support-desk", *TOKENS) as base:
        return driver("tokens_probe.py", base)


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_tokens(point: tuple[str, str, Callable[[Probes], None]], probes: Probes) -> None:
    """One token point, as upstream's clients see it."""
    point[2](probes)
