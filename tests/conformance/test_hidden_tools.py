"""Tools hidden by default (`_meta agentenv.io/hiddenByDefault`), as upstream defines them.

Upstream's rule (its gateway and its SDK's tool_access.py): a hidden tool is left out for every
role, `*`-tool rules skip it, and only a rule naming it shows it, to the role that rule is for.
drivers/hidden_probe.py checks this with upstream's tool client on our server serving
envs/vault (its `export_notes` is hidden), and again with our server behind upstream's gateway,
where the gateway's rules decide (it learns which tools are hidden from our tools/list `_meta`;
ours is served with `--behind-gateway` there).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run
VAULT = Path(__file__).resolve().parent / "envs" / "vault"
HIDDEN = "export_notes"

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def points(prefix: str, where: str) -> None:
    """Register the hidden-tool points for one way of reaching the server."""

    def add(name: str) -> Callable[[Callable[[Probes], None]], None]:
        def register(fn: Callable[[Probes], None]) -> None:
            CHECKS.append(("roles", f"{where}: {name}", fn))

        return register

    @add("a hidden tool is not listed")
    def _(p: Probes) -> None:
        names = p.value(f"{prefix} names no_role")
        assert "list_notes" in names and HIDDEN not in names, names

    @add("a hidden tool is not listed by /step")
    def _(p: Probes) -> None:
        exchange = p.value(f"{prefix} step names no_role")
        assert exchange["status"] == 200, exchange
        assert HIDDEN not in [t["name"] for t in exchange["json"]["tools"]]

    @add("a hidden tool cannot be called")
    def _(p: Probes) -> None:
        assert p.value(f"{prefix} call no_role")["isError"] is True

    @add("a * rule does not show a hidden tool")
    def _(p: Probes) -> None:
        assert p.value(f"{prefix} enable wildcard")["status"] == 200
        assert HIDDEN not in p.value(f"{prefix} names after_wildcard")

    @add("a rule naming a hidden tool shows it to that role")
    def _(p: Probes) -> None:
        assert p.value(f"{prefix} enable named")["status"] == 200
        assert HIDDEN in p.value(f"{prefix} names after_named")
        result = p.value(f"{prefix} call after_named")
        assert result["isError"] is False, result["text"]

    @add("a rule naming a hidden tool shows it to no other role")
    def _(p: Probes) -> None:
        assert HIDDEN not in p.value(f"{prefix} names no_role after_named")


points("direct", "our server")
points("gateway", "behind upstream's gateway")


@pytest.fixture(scope="module")
def probes(
    serve_env: Callable[..., Any],
    upstream_gateway: Callable[..., Any],
    driver: Callable[..., Probes],
) -> Probes:
    """The hidden-tool sequence on a fresh vault server, then on another behind upstream's gateway."""
    with serve_env(VAULT) as base:
        direct = driver("hidden_probe.py", "direct", base)
    with serve_env(VAULT, "--behind-gateway") as base, upstream_gateway({"vault": base}) as gateway:
        behind = driver("hidden_probe.py", "gateway", gateway)
    direct.outcomes.update(behind.outcomes)
    return direct


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_hidden_by_default(
    point: tuple[str, str, Callable[[Probes], None]], probes: Probes
) -> None:
    """One hidden-tool point, as upstream's tool client sees it."""
    point[2](probes)
