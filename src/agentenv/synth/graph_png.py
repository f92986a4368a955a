"""The PNG form of a tool-graph picture: the layout of `graph_draw`, drawn with Pillow
(the `graph` extra) in the same colours, dashes and arrowheads as the SVG."""

from __future__ import annotations

import io
import itertools
import math

from agentenv.synth.graph_draw import (
    COLOURS,
    FONT_SIZE,
    MARGIN,
    GraphDrawing,
    Point,
    caption,
    require,
)


def to_png(drawing: GraphDrawing, scale: float = 2.0) -> bytes:
    """The drawing as a PNG image (`scale` pixels per layout pixel), drawn with Pillow."""
    require("png")
    from PIL import Image, ImageDraw, ImageFont

    size = (math.ceil(drawing.width * scale), math.ceil(drawing.height * scale))
    image = Image.new("RGB", size, "#ffffff")
    pen = ImageDraw.Draw(image)
    try:
        font = ImageFont.load_default(size=FONT_SIZE * scale)
    except TypeError:  # Pillow < 10.1: one small bitmap font
        font = ImageFont.load_default()

    def at(point: Point) -> Point:
        return (point[0] * scale, point[1] * scale)

    _png_key(pen, drawing, at, font, scale)
    for edge in drawing.edges:
        line = _cubic(edge.points) if edge.loop else edge.points
        colour = COLOURS[edge.strength]
        points = [at(p) for p in line]
        if edge.strength == "weak":
            _dashed(pen, points, colour, width=max(1, round(scale)), dash=5 * scale, gap=4 * scale)
        else:
            pen.line(points, fill=colour, width=max(1, round(scale)))
        _arrowhead(pen, points[-2], points[-1], colour, 7 * scale)
    for node in drawing.nodes:
        fill, stroke = COLOURS[node.kind if node.kind in COLOURS else "read"]
        box = (
            *at((node.x - node.width / 2, node.y - node.height / 2)),
            *at((node.x + node.width / 2, node.y + node.height / 2)),
        )
        pen.rounded_rectangle(box, radius=4 * scale, fill=fill, outline=stroke, width=1)
        pen.text(at((node.x, node.y)), node.name, fill=COLOURS["text"], font=font, anchor="mm")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=True)
    return buffer.getvalue()


def _png_key(pen, drawing: GraphDrawing, at, font, scale: float) -> None:
    """The title and the key, as `_svg_key` draws them."""
    pen.text(
        at((MARGIN, MARGIN + 2)), caption(drawing), fill=COLOURS["text"], font=font, anchor="ls"
    )
    x, y = MARGIN, MARGIN + 20
    for strength, word in (("strong", "strong join"), ("weak", "weak join")):
        line = [at((x, y - 4)), at((x + 28, y - 4))]
        if strength == "weak":
            _dashed(pen, line, COLOURS[strength], max(1, round(scale)), 5 * scale, 4 * scale)
        else:
            pen.line(line, fill=COLOURS[strength], width=max(1, round(scale)))
        pen.text(at((x + 34, y)), word, fill=COLOURS["text"], font=font, anchor="ls")
        x += 120
    for kind in ("read", "write"):
        fill, stroke = COLOURS[kind]
        box = (*at((x, y - 11)), *at((x + 22, y + 3)))
        pen.rounded_rectangle(box, radius=3 * scale, fill=fill, outline=stroke, width=1)
        pen.text(at((x + 28, y)), f"{kind} tool", fill=COLOURS["text"], font=font, anchor="ls")
        x += 100


def _cubic(controls: list[Point], steps: int = 16) -> list[Point]:
    (x0, y0), (x1, y1), (x2, y2), (x3, y3) = controls
    points = []
    for i in range(steps + 1):
        t = i / steps
        a, b, c, d = (1 - t) ** 3, 3 * (1 - t) ** 2 * t, 3 * (1 - t) * t**2, t**3
        points.append((a * x0 + b * x1 + c * x2 + d * x3, a * y0 + b * y1 + c * y2 + d * y3))
    return points


def _dashed(pen, points: list[Point], colour: str, width: int, dash: float, gap: float) -> None:
    """A dashed polyline; the dash pattern runs on across its bends."""
    phase, drawing = 0.0, True
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        length = math.hypot(x1 - x0, y1 - y0)
        done = 0.0
        while done < length:
            step = min((dash if drawing else gap) - phase, length - done)
            if drawing:
                a, b = done / length, (done + step) / length
                pen.line(
                    [
                        (x0 + (x1 - x0) * a, y0 + (y1 - y0) * a),
                        (x0 + (x1 - x0) * b, y0 + (y1 - y0) * b),
                    ],
                    fill=colour,
                    width=width,
                )
            done += step
            phase += step
            if phase >= (dash if drawing else gap) - 1e-9:
                phase, drawing = 0.0, not drawing


def _arrowhead(pen, tail: Point, tip: Point, colour: str, size: float) -> None:
    angle = math.atan2(tip[1] - tail[1], tip[0] - tail[0])
    wing = math.radians(25)
    left = (tip[0] - size * math.cos(angle - wing), tip[1] - size * math.sin(angle - wing))
    right = (tip[0] - size * math.cos(angle + wing), tip[1] - size * math.sin(angle + wing))
    pen.polygon([tip, left, right], fill=colour)


__all__ = ["to_png"]
