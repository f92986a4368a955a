"""The commands in README.md and docs/*.md write their outputs under runs/, which git ignores."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
# `--out X`, `-o X`, `--db X` and a shell redirection `> X`, on a command line.
TARGET = re.compile(r"(?:--out|-o|--db)[ =](\S+)|(?<![<>=-])>\s*(\S+)")
# Writing into examples/ on purpose: regenerating a tracked example (the docs say so).
ON_PURPOSE = ("examples/",)
PLACEHOLDERS = {"DIR", "FILE", "BUNDLE", "PATH", "...", "/dev/null"}


def command_lines(page: Path) -> list[tuple[int, str]]:
    """Each command line (`$ ` prompts stripped) of the page's code blocks, with its line."""
    text = page.read_text(encoding="utf-8")
    lines = []
    for block in FENCE.finditer(text):
        first = text[: block.start(1)].count("\n") + 1
        for offset, line in enumerate(block.group(1).splitlines()):
            line = line.removeprefix("$ ").strip()
            if line.startswith(("agent-env ", "python ", "mkdir ", "dot ")):
                lines.append((first + offset, line.split("  #")[0]))
    return lines


def test_gitignore_covers_runs() -> None:
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").split()
    assert "runs/" in ignored


def test_every_documented_output_is_under_runs() -> None:
    outside = []
    for page in PAGES:
        for number, line in command_lines(page):
            for match in TARGET.finditer(line):
                target = (match.group(1) or match.group(2)).strip("'\"")
                if target in PLACEHOLDERS or target.startswith(("&", "|", "$")):
                    continue
                if target.startswith(("runs/", *ON_PURPOSE)):
                    continue
                outside.append(f"{page.relative_to(ROOT)}:{number}: {target}  ({line})")
    assert outside == [], "\n".join(outside)


def test_the_walk_sees_the_commands_it_checks() -> None:
    readme = [line for _, line in command_lines(ROOT / "README.md")]
    assert any("--out runs/" in line for line in readme)
    assert any("make_sample.py --db runs/" in line for line in readme)
