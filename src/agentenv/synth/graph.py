"""The tool dependency graph of an environment.

Nodes are the tools a role may call. An edge `A -> B` says an output field of A can
feed an input parameter of B. Output fields come from two places: CRUD tools declare
theirs (the collection's record schema), and every tool is *probed*: called a few
times on forks of the seeded state with arguments bound from state records and the
schema, its results flattened into typed fields. An edge is found by

* **name**: equal normalised names (`tickets[].id` of a ticket list is a `ticket_id`,
  as is the `ticket_id` parameter) with compatible types;
* **description**: the parameter's description names the field (`to`: "The
  recipient's email address" takes an `email`);
* **observed** values: a value the field returned was accepted by the parameter in a
  successful probe.

An edge is *strong* when it joins by name on an identifier (`*_id`, a record key, an
email, a parameter with a pattern), else *weak*. Walks prefer strong edges.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Literal

from agentenv.env.environment import Environment
from agentenv.gateway.access import AccessControl
from agentenv.synth.binding import Binder, BindError, Resolver
from agentenv.synth.runtime import Sandbox
from agentenv.synth.schema import (
    Param,
    crud_target,
    informative,
    json_type,
    key_norm,
    leaves,
    schema_types,
    tool_params,
    types_compatible,
)

Strength = Literal["strong", "weak"]
_IDENTIFYING = ("email", "username", "login", "sku", "code", "slug", "handle", "phone")
MAX_VALUES = 64


@dataclass
class OutputField:
    """One field of a tool's results."""

    path: str
    name: str
    norm: str
    types: set[str] = field(default_factory=set)
    entity: str | None = None
    static: bool = False
    observed: bool = False
    values: set[Any] = field(default_factory=set)

    def to_json(self) -> dict[str, Any]:
        """The field as JSON data (observed values left out)."""
        return {
            "path": self.path,
            "norm": self.norm,
            "types": sorted(self.types),
            "entity": self.entity,
            "static": self.static,
            "observed": self.observed,
        }


@dataclass
class Node:
    """A tool, its parameters and its output fields."""

    name: str
    kind: str
    description: str
    params: list[Param]
    outputs: dict[str, OutputField] = field(default_factory=dict)
    probes: int = 0
    probes_ok: int = 0
    accepted: dict[str, set[Any]] = field(default_factory=dict)
    """Argument values, by parameter, that successful probes used."""

    def to_json(self) -> dict[str, Any]:
        """The node as JSON data."""
        return {
            "name": self.name,
            "kind": self.kind,
            "description": self.description,
            "inputs": [
                {"name": p.name, "norm": p.norm, "types": sorted(p.types), "required": p.required}
                for p in self.params
            ],
            "outputs": [self.outputs[k].to_json() for k in sorted(self.outputs)],
            "probes": {"tried": self.probes, "ok": self.probes_ok},
        }


@dataclass(frozen=True)
class Edge:
    """An output field of `source` that can feed parameter `param` of `target`."""

    source: str
    target: str
    field: str
    param: str
    strength: Strength
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """The edge as JSON data."""
        return {
            "source": self.source,
            "target": self.target,
            "field": self.field,
            "param": self.param,
            "strength": self.strength,
            "reasons": list(self.reasons),
        }


@dataclass
class ToolGraph:
    """Tools (nodes) and what feeds what (edges), for one role of one environment."""

    env: str
    version: str
    role: str
    nodes: dict[str, Node]
    edges: list[Edge]

    def out_edges(self, name: str) -> list[Edge]:
        """Edges leaving a tool (to other tools)."""
        return [e for e in self._by_source.get(name, []) if e.target != name]

    def in_edges(self, name: str) -> list[Edge]:
        """Edges entering a tool (from other tools)."""
        return [e for e in self._by_target.get(name, []) if e.source != name]

    def __post_init__(self) -> None:
        self._by_source: dict[str, list[Edge]] = defaultdict(list)
        self._by_target: dict[str, list[Edge]] = defaultdict(list)
        for e in self.edges:
            self._by_source[e.source].append(e)
            self._by_target[e.target].append(e)

    def to_json(self) -> dict[str, Any]:
        """The graph as JSON data (sorted, so equal graphs give equal text)."""
        strong = sum(1 for e in self.edges if e.strength == "strong")
        return {
            "env": self.env,
            "version": self.version,
            "role": self.role,
            "stats": {
                "nodes": len(self.nodes),
                "edges": len(self.edges),
                "strong": strong,
                "weak": len(self.edges) - strong,
            },
            "nodes": [self.nodes[n].to_json() for n in sorted(self.nodes)],
            "edges": [e.to_json() for e in self.edges],
        }

    def to_dot(self) -> str:
        """Graphviz DOT: writes are boxes, reads ellipses; strong edges solid, weak
        dashed; one arrow per pair of tools, labelled with up to three field -> param."""
        lines = [
            f"digraph {json.dumps(self.env)} {{",
            "  rankdir=LR;",
            '  node [fontname="Helvetica"];',
        ]
        for name in sorted(self.nodes):
            shape = "box" if self.nodes[name].kind == "write" else "ellipse"
            lines.append(f"  {json.dumps(name)} [shape={shape}];")
        pairs: dict[tuple[str, str], list[Edge]] = defaultdict(list)
        for e in self.edges:
            pairs[(e.source, e.target)].append(e)
        for (source, target), group in sorted(pairs.items()):
            labels = [f"{e.field}→{e.param}" for e in group[:3]]
            if len(group) > 3:
                labels.append(f"+{len(group) - 3} more")
            style = "solid" if any(e.strength == "strong" for e in group) else "dashed"
            label = json.dumps("\n".join(labels), ensure_ascii=False)
            lines.append(
                f"  {json.dumps(source)} -> {json.dumps(target)} [label={label}, style={style}];"
            )
        lines.append("}")
        return "\n".join(lines) + "\n"


def callable_tools(env: Environment, role: str) -> list[str]:
    """The tools a role may call, sorted."""
    access = AccessControl(env.access)
    return sorted(name for name, t in env.tools.items() if access.allowed(role, t))


def _static_outputs(node: Node, env: Environment, keys: dict[str, str]) -> None:
    tool = env.tools[node.name]
    crud = crud_target(tool)
    if crud is None or crud[0] not in keys:
        return
    coll, op = crud
    schema = env.seed.infos()[coll].schema or {}
    props = {k: v for k, v in schema.get("properties", {}).items() if isinstance(v, dict)}
    key = keys[coll]
    if op == "delete":
        props = {"deleted": props.get(key, {})}
    prefix = f"{coll}[]." if op in ("list", "search") else ""
    for name, prop in props.items():
        norm = key_norm(coll, key) if name in (key, "deleted") else name
        out = node.outputs.setdefault(f"{prefix}{name}", OutputField(f"{prefix}{name}", name, norm))
        out.types |= schema_types(prop)
        out.entity, out.static = coll, True
    if op in ("list", "search"):
        total = node.outputs.setdefault("total", OutputField("total", "total", "total"))
        total.types.add("integer")
        total.static = True


async def _probe(node: Node, sandbox: Sandbox, binder: Binder, seed: int, probes: int) -> None:
    tool = sandbox.env.tools[node.name]
    for i in range(probes):
        rng = random.Random(f"{seed}:probe:{node.name}:{i}")
        instance = await sandbox.open(sandbox.env.seed)
        try:
            state = sandbox.gateway.instance(instance).state
            node.probes += 1
            try:
                args, _ = binder.bind(tool, node.params, {}, [], state, rng)
            except BindError:
                continue
            result = await sandbox.call(instance, node.name, args)
            if not result.ok or not informative(result.value):
                continue
            node.probes_ok += 1
            for name, value in args.items():
                node.accepted.setdefault(name, set()).add(_key(value))
            for leaf in leaves(result.value, state):
                out = node.outputs.setdefault(
                    leaf.path, OutputField(leaf.path, leaf.name, leaf.norm)
                )
                out.types.add(json_type(leaf.value))
                out.observed = True
                out.entity = out.entity or leaf.entity
                if out.norm == out.name and leaf.norm != leaf.name:
                    out.norm = leaf.norm
                if len(out.values) < MAX_VALUES:
                    out.values.add(_key(leaf.value))
        finally:
            sandbox.close(instance)


def _key(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) else repr(value)


def _identifier(norm: str, param: Param, entity_key: bool) -> bool:
    if norm == "id" or norm.endswith("_id") or entity_key or param.pattern is not None:
        return True
    return any(word in norm for word in _IDENTIFYING)


def _edge(
    source: Node,
    out: OutputField,
    target: Node,
    p: Param,
    keys: dict[str, str],
    aliases: frozenset[str],
) -> Edge | None:
    if not types_compatible(p.types, frozenset(out.types)):
        return None
    if out.values and not any(p.accepts(v) for v in out.values):
        return None  # every value seen is outside the parameter's enum or pattern
    reasons = []
    if out.norm == p.norm and out.norm not in ("result", "total"):
        reasons.append("name")
    elif out.name in aliases:
        reasons.append("description")
    seen = {v for v in target.accepted.get(p.name, set()) if isinstance(v, str) and len(v) >= 3}
    if seen & out.values:
        reasons.append("observed")
    if not reasons:
        return None
    entity_key = out.entity is not None and out.name == keys.get(out.entity)
    strong = "name" in reasons and _identifier(out.norm, p, entity_key)
    return Edge(
        source.name, target.name, out.path, p.name, "strong" if strong else "weak", tuple(reasons)
    )


async def build_graph(
    env: Environment,
    *,
    role: str | None = None,
    probes: int = 3,
    seed: int = 0,
    sandbox: Sandbox | None = None,
) -> ToolGraph:
    """The tool graph of `env` for `role` (default: the env's default role).

    `probes` calls per tool discover output fields and observed edges (0: declared
    outputs only). Deterministic for a given seed.
    """
    role = role or env.default_role
    if role not in env.roles:
        raise ValueError(f"unknown role {role!r} (roles: {', '.join(env.roles)})")
    sandbox = sandbox or Sandbox(env, role)
    seed_state = env.seed.fork()
    resolver = Resolver(seed_state)
    binder = Binder(resolver)
    keys = resolver.keys
    nodes: dict[str, Node] = {}
    for name in callable_tools(env, role):
        tool = env.tools[name]
        node = Node(name, tool.kind, tool.description, tool_params(tool, keys))
        _static_outputs(node, env, keys)
        if probes > 0:
            await _probe(node, sandbox, binder, seed, probes)
        nodes[name] = node
    edges: list[Edge] = []
    for source in sorted(nodes):
        for path in sorted(nodes[source].outputs):
            out = nodes[source].outputs[path]
            for target in sorted(nodes):
                tool = env.tools[target]
                for p in nodes[target].params:
                    aliases = resolver.aliases(tool, p)
                    edge = _edge(nodes[source], out, nodes[target], p, keys, aliases)
                    if edge is not None:
                        edges.append(edge)
    return ToolGraph(env.name, env.version, role, nodes, edges)


def build_graph_sync(env: Environment, **kwargs: Any) -> ToolGraph:
    """`build_graph` from synchronous code."""
    return asyncio.run(build_graph(env, **kwargs))
