"""Our served environment as a backing MCP server behind upstream's own gateway.

Upstream's gateway (agentenv-framework's `gateway` package, from its sdist) runs here as a plain
process, `python -m gateway.entrypoint`, in the upstream virtualenv: no Docker, and no Postgres
(`SERVICE_DB_URL` unset, so it keeps no changelog of its own). It is given our
`agent-env serve` as its one internal MCP server and REST backend (`INTERNAL_MCP_SERVERS`,
`REST_PROXY_URLS`), in its default `performance` mode. Ours is served with `--behind-gateway`,
the documented way to be another gateway's backing server (it lists every tool some role may
call to the front gateway's role-less discovery, and leaves `get_time` to that gateway). drivers/gateway_probe.py then calls
tools through the gateway, over `/step` and over MCP (upstream's `ToolSession`), with no role,
role `default`, a declared role and an undeclared one, and reads the card and the data plane
through it. Upstream's gateway forwards the caller's role in `_meta agentenv.io/role`,
`default` when the caller named none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

Probes = Any  # conftest.Probes: the outcomes of one driver run
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envs"
SERVICE_KEY = "desk"
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")

CHECKS: list[tuple[str, str, Callable[[Probes], None]]] = []


def check(area: str, name: str) -> Callable[[Callable[[Probes], None]], Callable[[Probes], None]]:
    """Register one protocol point, tested on its own."""

    def register(fn: Callable[[Probes], None]) -> Callable[[Probes], None]:
        CHECKS.append((area, name, fn))
        return fn

    return register


def step_ok(p: Probes, name: str) -> dict[str, Any]:
    """The body of a /step exchange that must be 200."""
    exchange = p.value(name)
    assert exchange["status"] == 200, exchange
    return exchange["json"]


def data_of(answer: dict[str, Any]) -> dict[str, Any]:
    """The first data part's data of a data/get answer."""
    return next(part["data"] for part in answer["parts"] if part["kind"] == "data")


@check("card_rest", "the gateway's card nests ours as a child")
def _(p: Probes) -> None:
    assert p.value("child") == ["support-desk"]
    child = next(c for c in p.value("card")["children_environments"] if c["name"] == "support-desk")
    assert child["url"] == f"/svc/{SERVICE_KEY}/agentenv", child["url"]


@check("card_rest", "our card through the gateway's REST proxy")
def _(p: Probes) -> None:
    assert p.value("child card")["name"] == "support-desk"


@check("card_rest", "the gateway discovers our tools without a clash")
def _(p: Probes) -> None:
    state = p.value("state")
    assert state["tool_name_clashes"] == {}
    names = {t["name"] for server in state["mcp_servers"] for t in server["tools"]}
    assert {"get_customer", "list_tickets"} <= names, sorted(names)


@check("card_rest", "data/get through the gateway")
def _(p: Probes) -> None:
    assert data_of(p.value("data get"))["customers"]


@check("card_rest", "data/get at our child data plane /svc/KEY/agentenv")
def _(p: Probes) -> None:
    assert data_of(p.value("data get child"))["customers"]


@check("card_rest", "data/reset through the gateway")
def _(p: Probes) -> None:
    assert isinstance(p.value("data reset"), dict)
    assert not any(data_of(p.value("data get after_reset")).values())


@check("roles", "step list_tools with no role")
def _(p: Probes) -> None:
    names = [t["name"] for t in step_ok(p, "step list no_role")["tools"]]
    assert "get_customer" in names and "deliver_email" not in names, names


for _who, _label in [
    ("no_role", "with no role"),
    ("default", "with role default"),
    ("declared", "with a declared role"),
    ("any_role", "with an undeclared role"),
]:

    def _step(p: Probes, who: str = _who) -> None:
        result = step_ok(p, f"step call {who}")
        assert result["isError"] is False, result

    def _mcp(p: Probes, who: str = _who) -> None:
        result = p.value(f"mcp call {who}")
        assert result["isError"] is False, result["text"]
        assert json.loads(result["text"])["id"] == "C-001"

    check("roles", f"step call_tool through the gateway {_label}")(_step)
    check("roles", f"MCP tools/call through the gateway {_label}")(_mcp)


@check("roles", "our role rules hold for the role the gateway forwards (step)")
def _(p: Probes) -> None:
    result = step_ok(p, "step call refused_role")
    assert result["isError"] is True and "customer" in json.dumps(result), result


@check("roles", "our role rules hold for the role the gateway forwards (MCP)")
def _(p: Probes) -> None:
    result = p.value("mcp call refused_role")
    assert result["isError"] is True and "customer" in result["text"], result


@check("roles", "MCP tools/list through the gateway with no role")
def _(p: Probes) -> None:
    names = p.value("mcp names no_role")
    assert "get_customer" in names and "deliver_email" not in names, names


@check("roles", "a tool only a declared role may call is reachable for it behind the gateway")
def _(p: Probes) -> None:
    result = p.value("mcp customer tool")
    assert result["isError"] is False, result["text"]


@check("card_rest", "a write through the gateway with no role")
def _(p: Probes) -> None:
    assert step_ok(p, "step write no_role")["isError"] is False


@check("card_rest", "get_time through the gateway answers {current_time}")
def _(p: Probes) -> None:
    result = p.value("mcp get_time")
    assert result["isError"] is False and RFC3339_UTC.match(
        json.loads(result["text"])["current_time"]
    )


@check("roles", "the gateway's trigger actions reach our tools as the role they name")
def _(p: Probes) -> None:
    assert p.value("gw triggers register")["status"] == 200, p.value("gw triggers register")
    assert p.value("gw provoke")["status"] == 200
    outcome = {t["id"]: (t["status"], t["fire_count"], t["failure_count"])
               for t in p.value("gw triggers state")["json"]["triggers"]}  # fmt: skip
    # issue_refund above $100 needs our supervisor role: the agent's attempt fails (upstream re-arms a
    # trigger whose action failed, counting the failure), the supervisor's lands
    assert outcome == {
        "refund-as-supervisor": ("fired", 1, 0),
        "refund-as-agent": ("armed", 0, 1),
    }, outcome
    refunds = json.loads(step_ok(p, "gw refunds")["content"][0]["text"])
    found = refunds.get("refunds", refunds) if isinstance(refunds, dict) else refunds
    assert [r["issued_by"] for r in found if r["amount"] == 150.0] == ["supervisor"], refunds


@check("triggers_clock", "the gateway's clock can be armed in front of our server")
def _(p: Probes) -> None:
    answer = p.value("gw clock set")
    assert answer["status"] == 200, answer["text"]


@pytest.fixture(scope="module")
def probes(
    serve_env: Callable[..., Any],
    upstream_gateway: Callable[..., Any],
    driver: Callable[..., Probes],
) -> Probes:
    """Every call through upstream's gateway, made once, with a fresh support-desk behind it."""
    with (
        serve_env(EXAMPLES / "support-desk", "--behind-gateway") as ours,
        upstream_gateway({SERVICE_KEY: ours}) as gateway,
    ):
        return driver("gateway_probe.py", gateway, SERVICE_KEY)


@pytest.mark.parametrize("point", CHECKS, ids=[f"{area}:{name}" for area, name, _ in CHECKS])
def test_behind_upstream_gateway(
    point: tuple[str, str, Callable[[Probes], None]], probes: Probes
) -> None:
    """One point of our server behind upstream's gateway."""
    point[2](probes)
