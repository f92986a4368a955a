"""Globs on tree paths: `*` and `?` within a folder, `**` across folders, classes."""

from __future__ import annotations

import pytest

from agentenv.workspace import glob_match


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("*.py", "app.py"),
        ("*.py", "src/app.py"),  # no `/` in the pattern: the name, at any depth
        ("*.py", "src/deep/er/app.py"),
        ("app.py", "src/app.py"),
        ("src/*.py", "src/app.py"),
        ("src/**", "src/app.py"),
        ("src/**", "src/a/b/c.txt"),
        ("**", "a/b/c"),
        ("**", "top.txt"),
        ("**/*.py", "app.py"),  # `**/` may be no folder at all
        ("**/*.py", "a/b/app.py"),
        ("src/**/test_*.py", "src/test_a.py"),
        ("src/**/test_*.py", "src/x/y/test_a.py"),
        ("?.txt", "a.txt"),
        ("file[0-9].txt", "file7.txt"),
        ("file[!0-9].txt", "fileX.txt"),
        ("a.b", "a.b"),
        ("[ab]/*.md", "b/readme.md"),
    ],
)
def test_matches(pattern: str, path: str) -> None:
    assert glob_match(pattern, path)


@pytest.mark.parametrize(
    ("pattern", "path"),
    [
        ("*.py", "app.pyc"),
        ("*.py", "src/app.py.bak"),
        ("src/*.py", "src/deep/app.py"),  # `*` does not cross a folder
        ("src/*.py", "other/src/app.py"),  # a pattern with `/` is anchored at the root
        ("src/*.py", "app.py"),
        ("src/**", "lib/app.py"),
        ("**/*.py", "a/b/app.txt"),
        ("?.txt", "ab.txt"),
        ("?.txt", "a/bc.txt"),
        ("a?b.txt", "a/b.txt"),  # `?` does not match `/`
        ("file[0-9].txt", "fileX.txt"),
        ("file[!0-9].txt", "file7.txt"),
        ("a.b", "aXb"),  # `.` is a plain character
        ("a+b", "aab"),  # so is `+`
        ("src", "src/app.py"),  # a name, not a prefix
        ("app.py", "src/myapp.py"),
    ],
)
def test_does_not_match(pattern: str, path: str) -> None:
    assert not glob_match(pattern, path)


def test_an_unclosed_bracket_is_a_plain_character() -> None:
    assert glob_match("a[b", "a[b")
    assert not glob_match("a[b", "ab")
