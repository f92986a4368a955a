"""The PNG picture of the tool graph, drawn with Pillow from the same layout as the SVG."""

from __future__ import annotations

import io
import math
import struct
from pathlib import Path

import pytest

from agentenv import Environment
from agentenv.synth.graph import build_graph_sync

pytest.importorskip("grandalf", reason="the 'graph' extra is not installed")
Image = pytest.importorskip("PIL.Image", reason="the 'graph' extra is not installed")

from agentenv.synth.graph_draw import COLOURS, draw, layout  # noqa: E402
from agentenv.synth.graph_png import to_png  # noqa: E402

DESK = Path(__file__).resolve().parents[2] / "examples" / "envs" / "support-desk"
SIGNATURE = b"\x89PNG\r\n\x1a\n"


def test_the_png_is_a_png_of_the_layouts_size() -> None:
    graph = build_graph_sync(Environment.load(DESK))
    drawing = layout(graph)
    data = to_png(drawing, scale=2.0)
    assert data.startswith(SIGNATURE)
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (math.ceil(drawing.width * 2), math.ceil(drawing.height * 2))
    assert 400 <= width <= 20_000 and 200 <= height <= 20_000
    assert 5_000 < len(data) < 5_000_000
    assert draw(graph, "png") == data  # the command's default scale, and deterministic

    image = Image.open(io.BytesIO(data)).convert("RGB")
    colours = {colour for _, colour in image.getcolors(maxcolors=1 << 20)}
    fills = {COLOURS["read"][0], COLOURS["write"][0]}
    for fill in fills:  # both kinds of box are painted
        rgb = tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
        assert rgb in colours
    # Every box sits where the layout put it: its centre pixel is its fill or its text.
    for node in drawing.nodes:
        x, y = round((node.x - node.width / 2 + 3) * 2), round(node.y * 2)
        fill = COLOURS[node.kind][0]
        assert image.getpixel((x, y)) == tuple(int(fill[i : i + 2], 16) for i in (1, 3, 5))
