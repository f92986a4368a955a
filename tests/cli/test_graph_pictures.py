"""`agent-env graph ENV --format svg|png|html`: pictures of the tool graph, no Graphviz."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentenv.cli import app

DESK = Path(__file__).resolve().parents[2] / "examples" / "envs" / "support-desk"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def test_svg_to_a_file(runner: CliRunner, tmp_path: Path) -> None:
    pytest.importorskip("grandalf", reason="the 'graph' extra is not installed")
    out = tmp_path / "runs" / "desk.svg"
    result = runner.invoke(app, ["graph", str(DESK), "--format", "svg", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"drawn as svg -> {out}" in result.stdout
    root = ET.parse(out).getroot()
    tools = [g.get("data-tool") for g in root.iter(f"{SVG}g") if g.get("class") == "node"]
    assert len(tools) == 12 and "issue_refund" in tools


def test_png_and_html_on_stdout(runner: CliRunner) -> None:
    pytest.importorskip("grandalf", reason="the 'graph' extra is not installed")
    pytest.importorskip("PIL", reason="the 'graph' extra is not installed")
    png = runner.invoke(app, ["graph", str(DESK), "--format", "png", "--probes", "0"])
    assert png.exit_code == 0, png.output
    assert png.stdout_bytes.startswith(b"\x89PNG\r\n\x1a\n")
    page = runner.invoke(app, ["graph", str(DESK), "-f", "html", "--probes", "0"])
    assert page.exit_code == 0, page.output
    assert page.stdout.startswith("<!doctype html>")
    assert "<svg" in page.stdout and "</svg>" in page.stdout


def test_without_the_extra_one_line_says_what_to_install(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "grandalf", None)  # as if it were not installed
    out = tmp_path / "desk.svg"
    result = runner.invoke(app, ["graph", str(DESK), "--format", "svg", "--out", str(out)])
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "pip install 'agentenv-kit[graph]'" in lines[0]
    assert not out.exists()
    # JSON and DOT need nothing extra.
    dot = runner.invoke(app, ["graph", str(DESK), "--format", "dot", "--probes", "0"])
    assert dot.exit_code == 0 and dot.stdout.startswith("digraph")


def test_an_unknown_format_is_a_usage_error(runner: CliRunner) -> None:
    result = runner.invoke(app, ["graph", str(DESK), "--format", "gif"])
    assert result.exit_code == 2
    assert "json, dot, svg, png, html" in result.stderr
