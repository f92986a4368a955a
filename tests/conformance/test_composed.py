"""A composed environment's card, as upstream's client reads it (`find_child`, per-child data planes).

Upstream's gateway nests each backing server's card under `children_environments`, rewritten
the way its `rewrite_child_card` does: the child's `url` and its own endpoints under
`/svc/<key>/...`, operations the gateway serves itself kept at the gateway's path, no
interfaces, no grandchildren. drivers/composed_probe.py reads our composed card the same way
(envs/duo: children `vault` as key `vault`, `ledger` as key `books`) and uses each child's data
plane on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run
DUO = Path(__file__).resolve().parent / "envs" / "duo"
CHILDREN = {"vault": "vault", "ledger": "books"}
"""Child name -> its key under /svc/."""

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def check(name: str) -> Callable[[Callable[[Probes], None]], Callable[[Probes], None]]:
    """Register one composed-card point, tested on its own."""

    def register(fn: Callable[[Probes], None]) -> Callable[[Probes], None]:
        CHECKS.append(("card_rest", name, fn))
        return fn

    return register


def data_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The first data part's data of a data/get answer."""
    return next(part["data"] for part in answer["parts"] if part["kind"] == "data")


@check("find_child finds each child, its url under /svc/KEY")
def _(p: Probes) -> None:
    for name, key in CHILDREN.items():
        child = p.value(f"find_child {name}")
        assert child is not None, f"no child {name!r}"
        assert child["url"] == f"/svc/{key}/agentenv", child["url"]


@check("a child card is a leaf without interfaces")
def _(p: Probes) -> None:
    for name in CHILDREN:
        child = p.value(f"find_child {name}")
        assert child["additionalInterfaces"] == [] and not child.get("children_environments"), child


@check("a child's endpoints are its own or the composed card's")
def _(p: Probes) -> None:
    parent = {
        (ext["uri"], name): (
            op.get("method", "POST"),
            op.get("endpoint") or ext["params"].get("endpoint"),
        )
        for ext in p.value("card")["capabilities"]["extensions"]
        for name, op in (ext.get("params") or {}).get("methods", {}).items()
    }
    found = {k: v for k, v in p.outcomes.items() if k.startswith("child method ")}
    assert found, "the vault child advertises no extension methods"
    for key, outcome in found.items():
        assert outcome["ok"], f"{key}: {outcome['error']}"
        _, _, uri, name = key.split(" ")
        op = outcome["value"]
        on_parent = parent.get((uri, name)) == (op["method"], op["endpoint"])
        assert on_parent or op["endpoint"].startswith("/svc/vault/"), f"{key}: {op}"


@check("each child has its own data plane")
def _(p: Probes) -> None:
    assert set(data_of(p.value("data get vault"))) == {"notes"}
    assert set(data_of(p.value("data get books"))) == {"entries"}


@check("data/reset on one child leaves the others")
def _(p: Probes) -> None:
    assert isinstance(p.value("data reset vault"), dict)
    assert data_of(p.value("data get vault after_reset")) == {"notes": []}
    assert data_of(p.value("data get books after_vault_reset"))["entries"]


@check("invoke_extension with a child card")
def _(p: Probes) -> None:
    names = [t["name"] for t in p.value("child step list_tools")["tools"]]
    assert "vault__list_notes" in names, names
    assert p.value("child state")["mcp_servers"], "empty state through the child's state/v1"


@pytest.fixture(scope="module")
def probes(serve_env: Callable[..., Any], driver: Callable[..., Probes]) -> Probes:
    """Every composed-card call, made once against a fresh duo server."""
    with serve_env(DUO) as base:
        return driver("composed_probe.py", base)


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_composed_card(point: tuple[str, str, Callable[[Probes], None]], probes: Probes) -> None:
    """One composed-card point, as upstream's client sees it."""
    point[2](probes)
