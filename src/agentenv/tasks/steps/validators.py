"""Validator steps: verify_mcp_tool_schema, verify_spec_conformance.

Both check an environment rather than an agent, and return a `Score` (score = the share
of checks that pass; passed = every check passes) whose details list each problem.
"""

from __future__ import annotations

import re
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import Field

from agentenv.env.tool import SYSTEM, Principal
from agentenv.gateway import GatewayError
from agentenv.spec.card import PROTOCOL_VERSION
from agentenv.spec.wire import DataPart, ToolInfo
from agentenv.tasks.context import DeployedEnv, TaskContext
from agentenv.tasks.step import STEPS, Score, Step
from agentenv.tasks.steps.verification import VerifierParams

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
CARD_NAME = re.compile(r"^\S+$")


class _Params(VerifierParams):
    env_id: str | None = Field(default=None, description="Default: the only deployed env.")
    role: str | None = Field(
        default=None,
        description="Check what this role sees; default: every tool of the environment.",
    )


def _score(checks: int, problems: list[str], **details: Any) -> Score:
    failed = min(len(problems), checks)
    value = 1.0 if checks == 0 else (checks - failed) / checks
    return Score(
        score=value,
        passed=not problems,
        details={"checks": checks, "problems": problems, **details},
    )


def _tools(deployed: DeployedEnv, role: str | None) -> list[ToolInfo]:
    if role is None:
        return [t.info() for t in deployed.env.tools.values()]
    return deployed.gateway.list_tools(Principal(role=role), deployed.instance)


def tool_problems(info: ToolInfo | dict[str, Any]) -> list[str]:
    """What is wrong with one tool as MCP shows it (name, description, inputSchema)."""
    data = info.model_dump(by_alias=True) if isinstance(info, ToolInfo) else info
    name = data.get("name")
    problems = []
    if not isinstance(name, str) or not TOOL_NAME.match(name):
        problems.append(f"name {name!r} does not match {TOOL_NAME.pattern}")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        problems.append("description is empty")
    schema = data.get("inputSchema")
    if not isinstance(schema, dict):
        problems.append("inputSchema is not an object")
    else:
        if schema.get("type") != "object":
            problems.append(f"inputSchema type is {schema.get('type')!r}, not 'object'")
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            where = "/".join(str(p) for p in exc.path) or "<root>"
            problems.append(
                f"inputSchema is not valid JSON Schema 2020-12 at {where}: {exc.message}"
            )
    return problems


class VerifyMcpToolSchemaParams(_Params):
    """Fields of `verify_mcp_tool_schema`."""


@STEPS.add_builtin
class VerifyMcpToolSchema(Step):
    """Every tool has an MCP-valid name (`^[a-zA-Z0-9_-]{1,64}$`), a non-empty description
    and an `inputSchema` that is a JSON Schema (Draft 2020-12) of type object; names are
    unique. Score = share of tools with no problem."""

    type_name = "verify_mcp_tool_schema"
    Params = VerifyMcpToolSchemaParams
    is_verifier = True

    async def run(self, ctx: TaskContext) -> Any:
        p: VerifyMcpToolSchemaParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        tools = _tools(deployed, p.role)
        problems: list[str] = []
        bad: set[str] = set()
        seen: set[str] = set()
        for info in tools:
            for problem in tool_problems(info):
                problems.append(f"tool {info.name!r}: {problem}")
                bad.add(info.name)
            if info.name in seen:
                problems.append(f"tool {info.name!r}: the name appears twice")
                bad.add(info.name)
            seen.add(info.name)
        good = len(seen - bad)
        score = 1.0 if not seen else good / len(seen)
        return Score(
            score=score,
            passed=not problems,
            details={"env_id": deployed.env_id, "tools": len(tools), "problems": problems},
        )


# -- verify_spec_conformance ------------------------------------------------------------

EXTENSION_ENDPOINTS: dict[str, set[tuple[str, str]]] = {
    "urn:agentenv:step/v1": {("POST", "/step")},
    "urn:agentenv:clock/v1": {
        ("GET", "/clock/time"),
        ("PUT", "/clock/set-time"),
        ("POST", "/clock/clear"),
        ("GET", "/clock/state"),
    },
    "urn:agentenv:triggers/v1": {
        ("POST", "/triggers/register"),
        ("POST", "/triggers/remove"),
        ("POST", "/triggers/clear"),
        ("GET", "/triggers/state"),
    },
    "urn:agentenv:disable-tool/v1": {("POST", "/tools/disable")},
    "urn:agentenv:enable-tool/v1": {("POST", "/tools/enable")},
    "urn:agentenv:trajectory/v1": {("GET", "/trajectory")},
    "urn:agentenv:state/v1": {("GET", "/state")},
    "urn:agentenv:changes/v1": {("GET", "/changes")},
}
"""The protocol's extensions and the endpoints each must list."""

DATA_OPERATIONS = ("data/reset", "data/add", "data/get")
MCP_INTERFACE = {"url": "/mcp", "transport": "mcp"}


class _Checks:
    def __init__(self) -> None:
        self.count = 0
        self.problems: list[str] = []

    def check(self, ok: bool, problem: str) -> bool:
        self.count += 1
        if not ok:
            self.problems.append(problem)
        return ok


def card_problems(
    card: dict[str, Any], checks: _Checks | None = None, where: str = "card"
) -> _Checks:
    """Check a served card (as JSON) against the protocol's fields; children too."""
    c = checks or _Checks()
    name = card.get("name")
    c.check(
        isinstance(name, str) and bool(CARD_NAME.match(name)),
        f"{where}.name {name!r} is empty or has whitespace",
    )
    c.check(
        card.get("protocolVersion") == PROTOCOL_VERSION,
        f"{where}.protocolVersion is {card.get('protocolVersion')!r}, not {PROTOCOL_VERSION!r}",
    )
    c.check(isinstance(card.get("url"), str) and bool(card.get("url")), f"{where}.url is missing")
    c.check(
        card.get("preferredTransport") == "JSONRPC",
        f"{where}.preferredTransport is {card.get('preferredTransport')!r}, not 'JSONRPC'",
    )
    interfaces = card.get("additionalInterfaces")
    if c.check(isinstance(interfaces, list), f"{where}.additionalInterfaces is not a list"):
        for i, item in enumerate(interfaces):
            ok = isinstance(item, dict) and {"url", "transport"} <= set(item)
            c.check(ok, f"{where}.additionalInterfaces[{i}] needs url and transport")
            if ok and item["transport"] == "mcp":
                c.check(
                    item["url"].endswith(MCP_INTERFACE["url"]),
                    f"{where}.additionalInterfaces[{i}]: MCP is served at {item['url']!r}, "
                    f"not {MCP_INTERFACE['url']!r}",
                )
    capabilities = card.get("capabilities")
    if not c.check(isinstance(capabilities, dict), f"{where}.capabilities is missing"):
        return c
    tools = capabilities.get("tools")
    if c.check(isinstance(tools, list), f"{where}.capabilities.tools is not a list"):
        for i, tool in enumerate(tools):
            ok = isinstance(tool, dict) and {"name", "description", "inputSchema"} <= set(tool)
            c.check(ok, f"{where}.capabilities.tools[{i}] needs name, description, inputSchema")
    extensions = capabilities.get("extensions")
    if c.check(isinstance(extensions, list), f"{where}.capabilities.extensions is not a list"):
        by_uri = {e.get("uri"): e for e in extensions if isinstance(e, dict)}
        for uri, endpoints in EXTENSION_ENDPOINTS.items():
            ext = by_uri.get(uri)
            if not c.check(ext is not None, f"{where}: extension {uri} is missing"):
                continue
            fields_ok = {"uri", "description", "params", "required"} <= set(ext)
            c.check(fields_ok, f"{where}: extension {uri} needs uri, description, params, required")
            params = ext.get("params") if isinstance(ext.get("params"), dict) else {}
            c.check(
                isinstance(params.get("endpoint"), str),
                f"{where}: extension {uri} has no params.endpoint",
            )
            methods = params.get("methods")
            c.check(
                isinstance(methods, dict),
                f"{where}: extension {uri} params.methods is not an object keyed by method name",
            )
            served = set()
            for m in (methods or {}).values() if isinstance(methods, dict) else []:
                if isinstance(m, dict) and "method" in m:
                    endpoint = m.get("endpoint", params.get("endpoint"))
                    served.add((m.get("method"), _path(endpoint, card.get("url"))))
            missing = sorted(f"{v} {p}" for v, p in endpoints - served)
            c.check(not missing, f"{where}: extension {uri} lacks {', '.join(missing)}")
    operations = capabilities.get("operations")
    ops_ok = isinstance(operations, list) and set(DATA_OPERATIONS) <= set(operations)
    c.check(ops_ok, f"{where}.capabilities.operations lacks {', '.join(DATA_OPERATIONS)}")
    if c.check("children_environments" in card, f"{where}.children_environments is missing"):
        children = card["children_environments"]
        if c.check(
            children is None or isinstance(children, list),
            f"{where}.children_environments is neither null nor a list",
        ):
            for i, child in enumerate(children or []):
                card_problems(child, c, f"{where}.children_environments[{i}]")
    return c


def _path(endpoint: Any, data_url: Any) -> str | None:
    """An extension endpoint without the instance prefix the card's url carries."""
    if not isinstance(endpoint, str):
        return None
    prefix = data_url[: -len("/agentenv")] if isinstance(data_url, str) else ""
    if prefix and data_url.endswith("/agentenv") and endpoint.startswith(prefix):
        return endpoint[len(prefix) :]
    return endpoint


async def data_plane_problems(deployed: DeployedEnv, c: _Checks) -> None:
    """Exercise data/get, data/reset and data/add on a throwaway instance: reset empties,
    adding back what get returned restores the state exactly. The task's instance is
    never touched."""
    gateway = deployed.gateway
    try:
        inst = gateway.create_instance(state=deployed.snapshot())
    except GatewayError as exc:
        c.check(False, f"data plane: cannot make a scratch instance: {exc}")
        return
    try:
        before_hash = inst.state.hash()
        parts = gateway.data_get(inst.id)
        data = [p for p in parts if isinstance(p, DataPart)]
        if not c.check(len(data) == 1, "data/get: expected one data part with the records"):
            return
        await gateway.data_reset(SYSTEM, instance=inst.id)
        empty = all(not rows for rows in inst.state.to_dict().values())
        c.check(empty, "data/reset left records behind")
        records = data[0].data
        expected = sum(len(rows) for rows in records.values())
        if expected:
            written = await gateway.data_add(SYSTEM, [data[0]], instance=inst.id)
            c.check(written == expected, f"data/add wrote {written} of {expected} records")
        c.check(
            inst.state.hash() == before_hash,
            "data/add of what data/get returned did not restore the state",
        )
    except GatewayError as exc:
        c.check(False, f"data plane: {exc}")
    finally:
        gateway.drop_instance(inst.id)


class VerifySpecConformanceParams(_Params):
    """Fields of `verify_spec_conformance`."""

    data_plane: bool = Field(
        default=True, description="Also exercise data/get, data/reset, data/add."
    )


@STEPS.add_builtin
class VerifySpecConformance(Step):
    """The environment's card (as served, with MCP on) has the protocol's fields, every
    extension URI with its endpoints, and the data-plane operations; optionally the data
    plane round-trips on a scratch instance. Score = share of checks that pass."""

    type_name = "verify_spec_conformance"
    Params = VerifySpecConformanceParams
    is_verifier = True

    async def run(self, ctx: TaskContext) -> Any:
        from agentenv.serve.card import build_card  # the serving layer, only when needed
        from agentenv.spec.card import Interface

        p: VerifySpecConformanceParams = self.params  # type: ignore[assignment]
        deployed = ctx.env(p.env_id)
        role = p.role or deployed.env.default_role
        card = build_card(
            deployed.gateway,
            Principal(role=role),
            instance=deployed.instance,
            interfaces=[Interface(**MCP_INTERFACE)],
        ).to_json()
        checks = card_problems(card)
        if p.data_plane:
            await data_plane_problems(deployed, checks)
        score = _score(checks.count, checks.problems, env_id=deployed.env_id)
        return score
