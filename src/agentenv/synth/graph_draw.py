"""Pictures of a tool dependency graph without Graphviz: SVG, PNG and an HTML page.

A layered (Sugiyama) layout from `grandalf` places the tools; we draw it ourselves, as
SVG text or as a PNG with Pillow, from the same coordinates. Both libraries come with the
`graph` extra and are imported only here, when a picture is asked for, so the base install
stays light. One arrow per pair of tools, as in the DOT output: solid when any of its joins
is strong, dashed when all are weak, with the joins (`field→param`) in its tooltip.
"""

from __future__ import annotations

import html
import importlib.util
import math
from collections import defaultdict
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agentenv.synth.graph import Edge, ToolGraph

PictureFormat = Literal["svg", "png", "html"]
INSTALL_HINT = "pip install 'agentenv-kit[graph]'"
NEEDS: dict[str, tuple[str, ...]] = {
    "svg": ("grandalf",),
    "html": ("grandalf",),
    "png": ("grandalf", "PIL"),
}
FONT_SIZE = 12
CHAR_WIDTH = 7.0  # a generous average advance of a 12 px sans-serif glyph
NODE_HEIGHT = 28.0
PAD_X = 12.0
MARGIN = 24.0
HEADER = 44.0  # room above the graph for its title and the key
COMPONENT_GAP = 48.0
TWIN_OFFSET = 4.0  # A -> B and B -> A drawn side by side, not on top of each other
COLOURS = {
    "read": ("#e8f1fb", "#3b6ea8"),
    "write": ("#fdeedd", "#b8651b"),
    "strong": "#404040",
    "weak": "#8c8c8c",
    "text": "#1a1a1a",
}

Point = tuple[float, float]


class DrawingUnavailable(RuntimeError):
    """A picture format was asked for, but the libraries it draws with are not installed."""


class DrawnNode(BaseModel):
    """A tool's box: its centre, size, and what it is."""

    model_config = ConfigDict(frozen=True)

    name: str
    kind: str
    description: str
    x: float
    y: float
    width: float
    height: float


class DrawnEdge(BaseModel):
    """One arrow for every pair of tools joined by one or more edges of the graph.

    `points` is a polyline from the source's border to the target's border; for a tool
    that feeds itself (`loop`) it is the four control points of a cubic curve."""

    model_config = ConfigDict(frozen=True)

    source: str
    target: str
    strength: Literal["strong", "weak"]
    joins: list[str]
    loop: bool = False
    points: list[Point]


class GraphDrawing(BaseModel):
    """A laid-out tool graph, ready to be drawn in any format (coordinates in pixels)."""

    env: str
    role: str
    width: float
    height: float
    nodes: list[DrawnNode]
    edges: list[DrawnEdge]


def require(format: PictureFormat) -> None:
    """Raise DrawingUnavailable, naming the extra to install, unless `format` can be drawn."""
    missing = [name for name in NEEDS[format] if _missing(name)]
    if missing:
        raise DrawingUnavailable(
            f"--format {format} needs {' and '.join(_pretty(m) for m in missing)} "
            f"(the 'graph' extra): {INSTALL_HINT}"
        )


def _missing(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):  # a module set to None in sys.modules, or half-gone
        return True


def _pretty(module: str) -> str:
    return {"PIL": "Pillow"}.get(module, module)


def _pairs(graph: ToolGraph) -> dict[tuple[str, str], list[Edge]]:
    pairs: dict[tuple[str, str], list[Edge]] = defaultdict(list)
    for edge in graph.edges:
        pairs[(edge.source, edge.target)].append(edge)
    return dict(sorted(pairs.items()))


def layout(graph: ToolGraph) -> GraphDrawing:
    """Lay the graph out in layers (each weakly connected part on its own, side by side)."""
    require("svg")
    from grandalf.graphs import Edge as GEdge
    from grandalf.graphs import Vertex, graph_core
    from grandalf.layouts import SugiyamaLayout

    class _Box:
        def __init__(self, w: float, h: float) -> None:
            self.w, self.h, self.xy = w, h, (0.0, 0.0)

    class _Route:
        def __init__(self) -> None:
            self.points: list[Point] = []

        def setpath(self, points: list[Point]) -> None:
            self.points = [(float(x), float(y)) for x, y in points]

    names = sorted(graph.nodes)
    vertices = {name: Vertex(name) for name in names}
    for name, vertex in vertices.items():
        vertex.view = _Box(len(name) * CHAR_WIDTH + 2 * PAD_X, NODE_HEIGHT)
    pairs = _pairs(graph)
    routed: dict[tuple[str, str], GEdge] = {}
    for source, target in pairs:
        if source != target:  # loops are drawn by hand, the layout need not know them
            edge = GEdge(vertices[source], vertices[target])
            edge.view = _Route()
            routed[(source, target)] = edge

    centres: dict[str, Point] = {}
    routes: dict[tuple[str, str], list[Point]] = {}
    cursor = MARGIN
    for members_names, part_edges in _components(names, list(routed)):
        # graph_core with ordered lists: grandalf's Graph keeps a component's edges in a
        # set, whose order (and so the picture) changes from run to run.
        part = graph_core(
            [vertices[n] for n in members_names], [routed[pair] for pair in part_edges]
        )
        sugiyama = SugiyamaLayout(part)
        sugiyama.xspace, sugiyama.yspace = 20, 56
        sugiyama.dw = sugiyama.dh = 4  # the bends of long edges: small, so they pack tight
        sugiyama.init_all(optimize=True)
        sugiyama.draw()
        members = [v for v in part.sV]
        left = min(v.view.xy[0] - v.view.w / 2 for v in members)
        right = max(v.view.xy[0] + v.view.w / 2 for v in members)
        top = min(v.view.xy[1] - v.view.h / 2 for v in members)
        for edge in part.sE:
            for x, _ in edge.view.points:
                left, right = min(left, x), max(right, x)
        dx, dy = cursor - left, MARGIN + HEADER - top
        for v in members:
            centres[v.data] = (v.view.xy[0] + dx, v.view.xy[1] + dy)
        for edge in part.sE:
            key = (edge.v[0].data, edge.v[1].data)
            routes[key] = [(x + dx, y + dy) for x, y in edge.view.points]
        cursor += right - left + COMPONENT_GAP

    nodes = {
        name: DrawnNode(
            name=name,
            kind=graph.nodes[name].kind,
            description=graph.nodes[name].description,
            x=centres[name][0],
            y=centres[name][1],
            width=vertices[name].view.w,
            height=NODE_HEIGHT,
        )
        for name in names
    }
    edges = [
        _drawn_edge(source, target, group, nodes, routes.get((source, target), []), pairs)
        for (source, target), group in pairs.items()
    ]
    width = cursor - COMPONENT_GAP + MARGIN + 32  # 32: room for the loops on the right
    bottom = max((n.y + n.height / 2 for n in nodes.values()), default=MARGIN + HEADER)
    for drawn in edges:
        bottom = max([bottom, *(y for _, y in drawn.points)])
    return GraphDrawing(
        env=graph.env,
        role=graph.role,
        width=math.ceil(max(width, 360.0)),
        height=math.ceil(bottom + MARGIN),
        nodes=list(nodes.values()),
        edges=edges,
    )


def _components(
    names: list[str], pairs: list[tuple[str, str]]
) -> list[tuple[list[str], list[tuple[str, str]]]]:
    """The weakly connected parts: their tools and arrows, sorted, parts by first name."""
    parent = {name: name for name in names}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    for source, target in pairs:
        parent[root(source)] = root(target)
    parts: dict[str, tuple[list[str], list[tuple[str, str]]]] = {}
    for name in names:
        parts.setdefault(root(name), ([], []))[0].append(name)
    for pair in sorted(pairs):
        parts[root(pair[0])][1].append(pair)
    return sorted(parts.values(), key=lambda part: part[0][0])


def _drawn_edge(
    source: str,
    target: str,
    group: list[Edge],
    nodes: dict[str, DrawnNode],
    route: list[Point],
    pairs: dict[tuple[str, str], list[Edge]],
) -> DrawnEdge:
    strength = "strong" if any(e.strength == "strong" for e in group) else "weak"
    joins = [f"{e.field}→{e.param}" for e in group]
    if source == target:
        node = nodes[source]
        right, y = node.x + node.width / 2, node.y
        points = [(right, y - 6), (right + 26, y - 18), (right + 26, y + 18), (right, y + 6)]
        return DrawnEdge(
            source=source, target=target, strength=strength, joins=joins, loop=True, points=points
        )
    points = list(route)
    points[0] = _border(nodes[source], points[1])
    points[-1] = _border(nodes[target], points[-2])
    if (target, source) in pairs:
        points = _shifted(points, TWIN_OFFSET)
    return DrawnEdge(source=source, target=target, strength=strength, joins=joins, points=points)


def _border(node: DrawnNode, towards: Point) -> Point:
    """Where the line from the node's centre towards a point leaves its box."""
    dx, dy = towards[0] - node.x, towards[1] - node.y
    if dx == 0 and dy == 0:
        return (node.x, node.y)
    scale = min(
        (node.width / 2) / abs(dx) if dx else math.inf,
        (node.height / 2) / abs(dy) if dy else math.inf,
    )
    return (node.x + dx * scale, node.y + dy * scale)


def _shifted(points: list[Point], offset: float) -> list[Point]:
    """The polyline moved sideways (to the left of its direction of travel)."""
    (x0, y0), (x1, y1) = points[0], points[-1]
    length = math.hypot(x1 - x0, y1 - y0) or 1.0
    nx, ny = -(y1 - y0) / length * offset, (x1 - x0) / length * offset
    return [(x + nx, y + ny) for x, y in points]


def _fmt(value: float) -> str:
    return f"{value:.1f}".rstrip("0").rstrip(".")


def caption(drawing: GraphDrawing) -> str:
    """The picture's one-line title: the environment, the role, how many tools and arrows."""
    arrows = len(drawing.edges)
    return f"{drawing.env} (role {drawing.role}): {len(drawing.nodes)} tools, {arrows} arrows"


def to_svg(drawing: GraphDrawing) -> str:
    """The drawing as a standalone SVG document."""
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_fmt(drawing.width)}" '
        f'height="{_fmt(drawing.height)}" viewBox="0 0 {_fmt(drawing.width)} '
        f'{_fmt(drawing.height)}" font-family="Helvetica, Arial, sans-serif" '
        f'font-size="{FONT_SIZE}">',
        "<defs>",
    ]
    for strength in ("strong", "weak"):
        out.append(
            f'<marker id="arrow-{strength}" viewBox="0 0 10 10" refX="10" refY="5" '
            f'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
            f'<path d="M0,0 L10,5 L0,10 z" fill="{COLOURS[strength]}"/></marker>'
        )
    out += ["</defs>", '<rect width="100%" height="100%" fill="#ffffff"/>']
    out += _svg_key(drawing)
    out.append('<g class="edges" fill="none">')
    for edge in drawing.edges:
        out.append(_svg_edge(edge))
    out += ["</g>", '<g class="nodes">']
    for node in drawing.nodes:
        fill, stroke = COLOURS[node.kind if node.kind in COLOURS else "read"]
        tip = html.escape(f"{node.name} ({node.kind}): {node.description}".strip())
        out.append(
            f'<g class="node" data-tool="{html.escape(node.name)}"><title>{tip}</title>'
            f'<rect x="{_fmt(node.x - node.width / 2)}" y="{_fmt(node.y - node.height / 2)}" '
            f'width="{_fmt(node.width)}" height="{_fmt(node.height)}" rx="4" '
            f'fill="{fill}" stroke="{stroke}"/>'
            f'<text x="{_fmt(node.x)}" y="{_fmt(node.y + FONT_SIZE / 3)}" '
            f'text-anchor="middle" fill="{COLOURS["text"]}">{html.escape(node.name)}</text></g>'
        )
    out += ["</g>", "</svg>"]
    return "\n".join(out) + "\n"


def _svg_edge(edge: DrawnEdge) -> str:
    (x0, y0), *rest = edge.points
    if edge.loop:
        (c1x, c1y), (c2x, c2y), (x1, y1) = rest
        d = f"M{_fmt(x0)},{_fmt(y0)} C{_fmt(c1x)},{_fmt(c1y)} {_fmt(c2x)},{_fmt(c2y)} "
        d += f"{_fmt(x1)},{_fmt(y1)}"
    else:
        d = f"M{_fmt(x0)},{_fmt(y0)} " + " ".join(f"L{_fmt(x)},{_fmt(y)}" for x, y in rest)
    dash = ' stroke-dasharray="5,4"' if edge.strength == "weak" else ""
    tip = html.escape(f"{edge.source} → {edge.target}: " + ", ".join(edge.joins))
    return (
        f'<path class="edge {edge.strength}" data-source="{html.escape(edge.source)}" '
        f'data-target="{html.escape(edge.target)}" d="{d}" stroke="{COLOURS[edge.strength]}" '
        f'stroke-width="1.2"{dash} marker-end="url(#arrow-{edge.strength})">'
        f"<title>{tip}</title></path>"
    )


def _svg_key(drawing: GraphDrawing) -> list[str]:
    y = MARGIN + 2
    parts = [
        f'<g class="key"><text x="{_fmt(MARGIN)}" y="{_fmt(y)}" font-weight="bold">'
        f"{html.escape(caption(drawing))}</text>"
    ]
    x, y = MARGIN, y + 18
    for strength, word in (("strong", "strong join"), ("weak", "weak join")):
        dash = ' stroke-dasharray="5,4"' if strength == "weak" else ""
        parts.append(
            f'<line x1="{_fmt(x)}" y1="{_fmt(y - 4)}" x2="{_fmt(x + 28)}" y2="{_fmt(y - 4)}" '
            f'stroke="{COLOURS[strength]}" stroke-width="1.2"{dash}/>'
            f'<text x="{_fmt(x + 34)}" y="{_fmt(y)}">{word}</text>'
        )
        x += 120
    for kind in ("read", "write"):
        fill, stroke = COLOURS[kind]
        parts.append(
            f'<rect x="{_fmt(x)}" y="{_fmt(y - 11)}" width="22" height="14" rx="3" '
            f'fill="{fill}" stroke="{stroke}"/><text x="{_fmt(x + 28)}" y="{_fmt(y)}">'
            f"{kind} tool</text>"
        )
        x += 100
    parts.append("</g>")
    return parts


def to_html(drawing: GraphDrawing) -> str:
    """A standalone HTML page: the SVG inline, then every arrow's joins in a table."""
    rows = "\n".join(
        f"<tr><td>{html.escape(e.source)}</td><td>{html.escape(e.target)}</td>"
        f"<td>{e.strength}</td><td>{html.escape(', '.join(e.joins))}</td></tr>"
        for e in drawing.edges
    )
    title = html.escape(f"Tool graph of {drawing.env}")
    return f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title}</title>
<style>
body {{ font-family: Helvetica, Arial, sans-serif; margin: 1.5rem; color: #1a1a1a; }}
.picture {{ overflow: auto; border: 1px solid #ddd; }}
table {{ border-collapse: collapse; margin-top: 1rem; font-size: 0.9rem; }}
td, th {{ border: 1px solid #ddd; padding: 0.2rem 0.5rem; text-align: left; }}
</style>
</head>
<body>
<h1>{title}</h1>
<p>{html.escape(caption(drawing))}. Hover a tool or an arrow for its details.</p>
<div class="picture">
{to_svg(drawing)}</div>
<table>
<tr><th>from</th><th>to</th><th>strength</th><th>joins (field→param)</th></tr>
{rows}
</table>
</body>
</html>
"""


def draw(graph: ToolGraph, format: PictureFormat) -> bytes:
    """The graph as a picture in the given format, as the bytes of the file to write."""
    require(format)
    drawing = layout(graph)
    if format == "png":
        from agentenv.synth.graph_png import to_png

        return to_png(drawing)
    text = to_svg(drawing) if format == "svg" else to_html(drawing)
    return text.encode("utf-8")


__all__ = [
    "DrawingUnavailable",
    "DrawnEdge",
    "DrawnNode",
    "GraphDrawing",
    "PictureFormat",
    "caption",
    "draw",
    "layout",
    "require",
    "to_html",
    "to_svg",
]
