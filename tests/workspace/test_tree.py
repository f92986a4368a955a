"""Trees as records: encoding, ignore rules, reading a folder, path cleaning, git seeds."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from agentenv.env import Environment
from agentenv.spec.errors import DocumentError
from agentenv.workspace import Ignore, WorkspaceError, bytes_of, read_folder, record_of, text_of
from agentenv.workspace.tree import clean_path

# -- records --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", b"plain text\n", "caf\u00e9 \u2603\n".encode(), b"no newline at end"],
    ids=["empty", "ascii", "utf-8", "no-newline"],
)
def test_text_is_kept_as_utf8_text_and_round_trips(data: bytes) -> None:
    record = record_of("a/b.txt", data)
    assert record == {
        "path": "a/b.txt",
        "mode": "100644",
        "content": data.decode("utf-8"),
        "encoding": "utf-8",
    }
    assert bytes_of(record) == data
    assert text_of(record) == data.decode("utf-8")


@pytest.mark.parametrize(
    "data",
    [b"\x00\xff\xfe\x80", bytes(range(256)), b"caf\xe9"],
    ids=["bytes", "all-bytes", "latin-1"],
)
def test_binary_is_kept_as_base64_and_round_trips(data: bytes) -> None:
    record = record_of("img.bin", data, "100755")
    assert record["encoding"] == "base64"
    assert record["mode"] == "100755"
    assert record["content"] != data.decode("latin-1")
    assert bytes_of(record) == data
    assert text_of(record) is None


# -- ignore rules ---------------------------------------------------------------------------


def test_ignore_folder_pattern_skips_that_folder_at_any_depth() -> None:
    ignore = Ignore(["node_modules/"])
    assert ignore("node_modules/left-pad/index.js")
    assert ignore("web/app/node_modules/x.js")
    assert ignore.folder("node_modules")
    # Only a folder of exactly that name, and not a file of that name.
    assert not ignore("node_modules_old/x.js")
    assert not ignore("src/my_node_modules/x.js")
    assert not ignore("node_modules")
    assert not ignore.folder("src")


def test_ignore_globs_match_the_name_at_any_depth_or_the_whole_path() -> None:
    ignore = Ignore(["*.pyc", "build/*.log"])
    assert ignore("x.pyc")
    assert ignore("pkg/sub/x.pyc")
    assert not ignore("pkg/x.py")
    assert not ignore("pkg/x.pyc.txt")
    assert ignore("build/out.log")
    assert not ignore("other/out.log")
    assert not ignore("out.log")


def test_ignore_with_no_patterns_keeps_everything() -> None:
    ignore = Ignore([])
    assert not ignore("anything/at/all.pyc")
    assert not ignore.folder("__pycache__")


# -- reading a folder -----------------------------------------------------------------------


def _tree(root: Path) -> None:
    (root / "b").mkdir()
    (root / "b" / "z.txt").write_text("z\n")
    (root / "b" / "a.txt").write_text("a\n")
    (root / "a.txt").write_text("top\n")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "blob.bin").write_bytes(b"\x00\x01\xff")
    (root / "empty").mkdir()
    (root / "deep" / "er").mkdir(parents=True)
    os.symlink("b/a.txt", root / "link")
    os.symlink("/nowhere/at/all", root / "dangling")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "m.cpython-311.pyc").write_bytes(b"\x00")
    (root / "b" / "c.pyc").write_bytes(b"\x00")


def test_read_folder_gives_sorted_records_with_git_modes(tmp_path: Path) -> None:
    _tree(tmp_path)
    records = read_folder(tmp_path, Ignore(["__pycache__/", "*.pyc"]))
    paths = [r["path"] for r in records]
    assert paths == sorted(paths)
    by_path = {r["path"]: r for r in records}
    assert set(by_path) == {
        "a.txt",
        "b/a.txt",
        "b/z.txt",
        "blob.bin",
        "dangling",
        "deep/er",
        "empty",
        "link",
        "run.sh",
    }
    assert by_path["a.txt"] == {
        "path": "a.txt",
        "mode": "100644",
        "content": "top\n",
        "encoding": "utf-8",
    }
    assert by_path["run.sh"]["mode"] == "100755"
    assert by_path["blob.bin"]["encoding"] == "base64"
    assert bytes_of(by_path["blob.bin"]) == b"\x00\x01\xff"
    # Symlinks are kept as links (their target, not what they point at), dangling or not.
    assert by_path["link"]["mode"] == "120000"
    assert by_path["link"]["content"] == "b/a.txt"
    assert by_path["dangling"]["mode"] == "120000"
    assert by_path["dangling"]["content"] == "/nowhere/at/all"
    # Empty folders are records of their own; a folder holding files is not.
    assert by_path["empty"]["mode"] == "040000"
    assert by_path["deep/er"]["mode"] == "040000"
    assert "b" not in by_path and "deep" not in by_path


def test_read_folder_skips_special_files(tmp_path: Path) -> None:
    (tmp_path / "kept.txt").write_text("x")
    os.mkfifo(tmp_path / "pipe")
    assert [r["path"] for r in read_folder(tmp_path, Ignore([]))] == ["kept.txt"]


def test_read_folder_refuses_a_file_over_the_limit(tmp_path: Path) -> None:
    (tmp_path / "small.txt").write_bytes(b"x" * 10)
    (tmp_path / "big.bin").write_bytes(b"x" * 2000)
    with pytest.raises(WorkspaceError, match=r"big\.bin"):
        read_folder(tmp_path, Ignore([]), max_file_bytes=1000)
    assert len(read_folder(tmp_path, Ignore([]), max_file_bytes=2000)) == 2


def test_a_folder_seed_is_read_with_ignore_rules_and_inline_files_on_top(
    tmp_path: Path, document: Callable[..., Path]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _tree(repo)
    path = document(
        tmp_path,
        {
            "seed": {"folder": "repo", "files": {"a.txt": "replaced\n", "b/new.txt": "n"}},
            "sandbox": {"provider": "local"},
        },
    )
    state = Environment.load(path).new_state()
    keys = state.keys("files")
    assert not any("pyc" in k or "__pycache__" in k for k in keys)  # default ignore rules
    assert state.get("files", "a.txt")["content"] == "replaced\n"
    assert state.get("files", "b/new.txt")["content"] == "n"
    assert state.get("files", "b/a.txt")["content"] == "a\n"
    assert state.get("files", "run.sh")["mode"] == "100755"
    assert state.get("files", "empty")["mode"] == "040000"


def test_an_inline_seed_file_inside_an_empty_seed_folder_replaces_the_folder_record(
    tmp_path: Path, document: Callable[..., Path]
) -> None:
    repo = tmp_path / "repo"
    (repo / "empty").mkdir(parents=True)
    (repo / "keep.txt").write_text("k")
    path = document(tmp_path, {"seed": {"folder": "repo", "files": {"empty/new.txt": "n"}}})
    state = Environment.load(path).new_state()
    assert state.get("files", "empty/new.txt")["content"] == "n"
    assert state.get("files", "empty") is None


def test_an_inline_seed_file_under_a_seed_file_is_a_document_error(
    tmp_path: Path, document: Callable[..., Path]
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "a.txt").write_text("file")
    path = document(tmp_path, {"seed": {"folder": "repo", "files": {"a.txt/b.txt": "x"}}})
    with pytest.raises(DocumentError, match="is a file, not a folder"):
        Environment.load(path)


def test_a_missing_seed_folder_is_a_document_error(
    tmp_path: Path, document: Callable[..., Path]
) -> None:
    path = document(tmp_path, {"seed": {"folder": "nope"}})
    with pytest.raises(DocumentError, match="nope"):
        Environment.load(path)


# -- paths ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("a/b.txt", "a/b.txt"),
        ("./a//b/./c.txt", "a/b/c.txt"),
        ("a/x/../b.txt", "a/b.txt"),
        ("a/", "a"),
        (".", ""),
        ("", ""),
    ],
)
def test_clean_path_normalises_relative_paths(given: str, expected: str) -> None:
    assert clean_path(given) == expected
    assert clean_path(given, "/app") == expected


@pytest.mark.parametrize("given", ["..", "../x", "a/../../x", "a/b/../../../etc/passwd"])
def test_clean_path_refuses_to_climb_out(given: str) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        clean_path(given)
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        clean_path(given, "/app")


@pytest.mark.parametrize("given", ["/etc/passwd", "/application/x", "/ap", "/tmp/app/x"])
def test_clean_path_refuses_absolute_paths_outside_the_workdir(given: str) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        clean_path(given, "/app")


@pytest.mark.parametrize("given", ["/etc/passwd", "/app/x.py", "/"])
def test_clean_path_without_a_workdir_refuses_every_absolute_path(given: str) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        clean_path(given)


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("/app", ""),
        ("/app/", ""),
        ("/app/src/x.py", "src/x.py"),
        ("/app/src/../x.py", "x.py"),
    ],
)
def test_clean_path_accepts_absolute_paths_under_the_workdir(given: str, expected: str) -> None:
    assert clean_path(given, "/app") == expected
    assert clean_path(given, "/app/") == expected


def test_clean_path_refuses_climbing_out_of_the_workdir() -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        clean_path("/app/../etc/passwd", "/app")


# -- git seeds ------------------------------------------------------------------------------

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull},
    )
    return done.stdout.strip()


@pytest.fixture
def git_repo(tmp_path: Path) -> tuple[Path, str]:
    """A repository with two commits: v1 (tagged; its sha returned) and a later one."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "--quiet")
    (repo / "app.py").write_text("VERSION = 1\n")
    (repo / "tool.sh").write_text("#!/bin/sh\n")
    (repo / "tool.sh").chmod(0o755)
    os.symlink("app.py", repo / "alias.py")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "mod.py").write_text("x = 1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "one")
    _git(repo, "tag", "v1")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "app.py").write_text("VERSION = 2\n")
    (repo / "later.txt").write_text("added later\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "--quiet", "-m", "two")
    return repo, first


@needs_git
@pytest.mark.parametrize("which", ["tag", "sha"])
def test_a_git_seed_takes_the_tree_at_the_commit_without_git(
    tmp_path: Path, document: Callable[..., Path], git_repo: tuple[Path, str], which: str
) -> None:
    _, first = git_repo
    commit = "v1" if which == "tag" else first
    path = document(tmp_path / "doc", {"seed": {"git": "../repo", "commit": commit}})
    state = Environment.load(path).new_state()
    keys = set(state.keys("files"))
    assert keys == {"alias.py", "app.py", "pkg/mod.py", "tool.sh"}
    assert state.get("files", "app.py")["content"] == "VERSION = 1\n"
    assert state.get("files", "tool.sh")["mode"] == "100755"
    assert state.get("files", "alias.py") == {
        "path": "alias.py",
        "mode": "120000",
        "content": "app.py",
        "encoding": "utf-8",
    }


@needs_git
def test_a_git_seed_defaults_to_head(
    tmp_path: Path, document: Callable[..., Path], git_repo: tuple[Path, str]
) -> None:
    path = document(tmp_path / "doc", {"seed": {"git": "../repo"}})
    state = Environment.load(path).new_state()
    assert state.get("files", "app.py")["content"] == "VERSION = 2\n"
    assert state.get("files", "later.txt")["content"] == "added later\n"
    assert not any(k == ".git" or k.startswith(".git/") for k in state.keys("files"))


@needs_git
def test_a_git_seed_at_an_unknown_commit_is_a_document_error(
    tmp_path: Path, document: Callable[..., Path], git_repo: tuple[Path, str]
) -> None:
    path = document(tmp_path / "doc", {"seed": {"git": "../repo", "commit": "no-such-tag"}})
    with pytest.raises(DocumentError, match="no-such-tag"):
        Environment.load(path)
