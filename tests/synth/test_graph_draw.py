"""Pictures of the tool graph without Graphviz: the layout, the SVG and the HTML page."""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from agentenv import Environment
from agentenv.synth.graph import ToolGraph, build_graph_sync

pytest.importorskip("grandalf", reason="the 'graph' extra is not installed")

from agentenv.synth.graph_draw import (
    DrawingUnavailable,
    draw,
    layout,
    require,
    to_html,
    to_svg,
)

ROOT = Path(__file__).resolve().parents[2]
DESK = ROOT / "examples" / "envs" / "support-desk"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def graph() -> ToolGraph:
    return build_graph_sync(Environment.load(DESK))


def pairs(graph: ToolGraph) -> set[tuple[str, str]]:
    return {(e.source, e.target) for e in graph.edges}


def test_the_svg_has_one_box_per_tool_and_one_path_per_arrow(graph: ToolGraph) -> None:
    root = ET.fromstring(to_svg(layout(graph)))
    assert root.tag == f"{SVG}svg"
    nodes = [g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]
    assert sorted(g.get("data-tool") for g in nodes) == sorted(graph.nodes)
    for node in nodes:
        assert node.find(f"{SVG}rect") is not None
        assert node.find(f"{SVG}text").text == node.get("data-tool")
    edges = [p for p in root.iter(f"{SVG}path") if (p.get("class") or "").startswith("edge")]
    drawn = [(p.get("data-source"), p.get("data-target")) for p in edges]
    assert len(drawn) == len(set(drawn)) == len(pairs(graph))
    assert set(drawn) == pairs(graph)
    assert len(graph.edges) > len(drawn)  # many joins share one arrow; the tooltip lists them


def test_strong_arrows_are_solid_weak_ones_dashed_all_with_heads(graph: ToolGraph) -> None:
    root = ET.fromstring(to_svg(layout(graph)))
    strength = {}
    for e in graph.edges:
        if e.strength == "strong" or (e.source, e.target) not in strength:
            strength[(e.source, e.target)] = e.strength
    seen = set()
    for path in root.iter(f"{SVG}path"):
        if not (path.get("class") or "").startswith("edge"):
            continue
        kind = strength[(path.get("data-source"), path.get("data-target"))]
        seen.add(kind)
        assert path.get("class") == f"edge {kind}"
        assert (path.get("stroke-dasharray") is not None) == (kind == "weak")
        assert path.get("marker-end") == f"url(#arrow-{kind})"
        assert re.fullmatch(r"M[-\d.,]+( [LC][-\d., ]+)+", path.get("d"))
    assert seen == {"strong", "weak"}
    markers = {m.get("id") for m in root.iter(f"{SVG}marker")}
    assert markers == {"arrow-strong", "arrow-weak"}


def test_the_layout_keeps_boxes_apart_and_inside_the_picture(graph: ToolGraph) -> None:
    drawing = layout(graph)
    boxes = [
        (n.x - n.width / 2, n.y - n.height / 2, n.x + n.width / 2, n.y + n.height / 2)
        for n in drawing.nodes
    ]
    for x0, y0, x1, y1 in boxes:
        assert 0 <= x0 < x1 <= drawing.width and 0 <= y0 < y1 <= drawing.height
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a[2] <= b[0] or b[2] <= a[0] or a[3] <= b[1] or b[3] <= a[1], (a, b)
    for edge in drawing.edges:
        for x, y in edge.points:
            assert -1 <= x <= drawing.width + 1 and -1 <= y <= drawing.height + 1


def test_the_same_graph_gives_the_same_bytes(graph: ToolGraph) -> None:
    assert draw(graph, "svg") == draw(graph, "svg")


def test_the_html_page_holds_the_svg_inline(graph: ToolGraph) -> None:
    drawing = layout(graph)
    page = to_html(drawing)
    assert page.startswith("<!doctype html>")
    svg = to_svg(drawing)
    assert svg in page
    inline = page[page.index("<svg") : page.index("</svg>") + len("</svg>")]
    assert ET.fromstring(inline).tag == f"{SVG}svg"
    assert page.count("<tr>") == len(pairs(graph)) + 1  # a row per arrow, and the header


def test_without_the_extra_the_error_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "grandalf", None)
    with pytest.raises(DrawingUnavailable) as caught:
        require("svg")
    message = str(caught.value)
    assert "\n" not in message
    assert "grandalf" in message
    assert "pip install 'agentenv-kit[graph]'" in message


def test_png_without_pillow_names_pillow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "PIL", None)
    require("svg")  # SVG and HTML need no Pillow
    require("html")
    with pytest.raises(DrawingUnavailable, match=r"needs Pillow .*agentenv-kit\[graph\]"):
        require("png")
