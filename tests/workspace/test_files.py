"""`Files` on a real state: resolving paths through the tree's symlinks, reading, writing."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentenv.env import Environment
from agentenv.state import State
from agentenv.workspace import Files, WorkspaceError


def _link(path: str, target: str) -> dict[str, str]:
    return {"path": path, "mode": "120000", "content": target, "encoding": "utf-8"}


@pytest.fixture
def state(make_env: Callable[..., Environment]) -> State:
    """The default seed, with a few links put in."""
    state = make_env().new_state()
    for path, target in [
        ("to_src", "src"),  # a folder, relative
        ("src/util/up", "../app.py"),  # up one folder, still inside
        ("chain", "to_src/app.py"),  # a link through a link
        ("out", "../outside"),
        ("etc", "/etc"),
        ("abs_app", "/app/src/app.py"),  # absolute, under the workdir /app
        ("loop1", "loop2"),
        ("loop2", "loop1"),
    ]:
        state.put("files", _link(path, target))
    state.put("files", {"path": "empty", "mode": "040000", "content": "", "encoding": "utf-8"})
    return state


def test_resolve_follows_links_inside_the_tree(state: State) -> None:
    files = Files(state, "files", None)
    assert files.resolve("src/app.py") == "src/app.py"
    assert files.resolve("to_src/app.py") == "src/app.py"
    assert files.resolve("to_src/util/strings.py") == "src/util/strings.py"
    assert files.resolve("src/util/up") == "src/app.py"
    assert files.resolve("chain") == "src/app.py"
    assert files.resolve("to_src") == "src"
    assert files.resolve("./src/../README.md") == "README.md"


@pytest.mark.parametrize("path", ["src/app.py", "to_src", "to_src/app.py"])
def test_resolve_without_following_the_last_part(state: State, path: str) -> None:
    files = Files(state, "files", None)
    expected = {"src/app.py": "src/app.py", "to_src": "to_src", "to_src/app.py": "src/app.py"}
    assert files.resolve(path, follow_last=False) == expected[path]


@pytest.mark.parametrize("path", ["out", "etc", "etc/passwd", "to_src/../out/x"])
def test_resolve_refuses_links_that_lead_out(state: State, path: str) -> None:
    files = Files(state, "files", None)
    with pytest.raises(WorkspaceError, match="leads out of the workspace"):
        files.resolve(path)
    with pytest.raises(WorkspaceError, match="leads out of the workspace"):
        files.read(path)


def test_an_absolute_link_under_the_workdir_stays_inside(state: State) -> None:
    assert Files(state, "files", "/app").resolve("abs_app") == "src/app.py"
    assert Files(state, "files", "/app").read("abs_app")["content"].startswith("def total")
    with pytest.raises(WorkspaceError, match="leads out of the workspace"):
        Files(state, "files", None).resolve("abs_app")  # no workdir: /app is the host's


def test_a_symlink_loop_is_an_error(state: State) -> None:
    with pytest.raises(WorkspaceError, match="too many levels of symlinks"):
        Files(state, "files", None).resolve("loop1")


def test_is_folder(state: State) -> None:
    files = Files(state, "files", None)
    assert files.is_folder("")
    assert files.is_folder("src")
    assert files.is_folder("src/util")
    assert files.is_folder("empty")
    assert not files.is_folder("src/app.py")
    assert not files.is_folder("sr")  # a prefix of a name is not a folder
    assert not files.is_folder("nothing")


def test_read_names_what_is_there_instead(state: State) -> None:
    files = Files(state, "files", None)
    assert files.read("src/app.py")["path"] == "src/app.py"
    with pytest.raises(WorkspaceError, match="is a folder, not a file"):
        files.read("src")
    with pytest.raises(WorkspaceError, match="is a folder, not a file"):
        files.read("empty")
    with pytest.raises(WorkspaceError, match=r"no file 'missing\.txt'"):
        files.read("missing.txt")


def test_write_creates_a_file_with_its_folders(state: State) -> None:
    files = Files(state, "files", None)
    record, created = files.write("new/deep/file.txt", b"x\n")
    assert created
    assert record == {
        "path": "new/deep/file.txt",
        "mode": "100644",
        "content": "x\n",
        "encoding": "utf-8",
    }
    assert state.get("files", "new/deep/file.txt") == record
    assert files.is_folder("new/deep")


def test_write_keeps_the_mode_and_writes_through_a_link(state: State) -> None:
    state.put("files", {"path": "run.sh", "mode": "100755", "content": "old", "encoding": "utf-8"})
    files = Files(state, "files", None)
    record, created = files.write("run.sh", b"new")
    assert not created
    assert record["mode"] == "100755"
    files.write("chain", b"through the link\n")
    assert state.get("files", "src/app.py")["content"] == "through the link\n"
    assert state.get("files", "chain")["mode"] == "120000"  # the link itself is kept


def test_write_into_an_empty_folder_removes_its_record(state: State) -> None:
    files = Files(state, "files", None)
    files.write("empty/inside.txt", b"i")
    assert state.get("files", "empty") is None
    assert state.get("files", "empty/inside.txt")["content"] == "i"
    assert files.is_folder("empty")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("src", "is a folder, not a file"),
        ("empty", "is a folder, not a file"),
        ("", "root folder"),
        (".", "root folder"),
        ("README.md/inner.txt", "'README.md' is a file, not a folder"),
        ("../escape.txt", "outside the workspace"),
        ("/tmp/escape.txt", "outside the workspace"),
        ("etc/passwd", "leads out of the workspace"),
    ],
)
def test_write_refusals_change_nothing(state: State, path: str, message: str) -> None:
    before = state.collection_hash("files")
    with pytest.raises(WorkspaceError, match=message):
        Files(state, "files", None).write(path, b"x")
    assert state.collection_hash("files") == before


def test_binary_data_is_stored_as_base64(state: State) -> None:
    record, _ = Files(state, "files", None).write("blob.bin", b"\x00\xff")
    assert record["encoding"] == "base64"
