"""A tree's hash follows its content and modes only; `tree_diff` says what changed."""

from __future__ import annotations

from collections.abc import Callable

from agentenv.env import Environment
from agentenv.workspace import tree_diff


async def test_the_hash_changes_with_content_and_returns_when_reverted(ws) -> None:
    original = ws.state.collection_hash("files")
    await ws.ok("write_file", path="README.md", content="hello\nWORLD\n")
    edited = ws.state.collection_hash("files")
    assert edited != original
    await ws.ok("write_file", path="README.md", content="hello\nworld\n")
    assert ws.state.collection_hash("files") == original
    # Through bash as well: the same bytes, written again, hash the same.
    await ws.ok("bash", command="printf 'hello\\nWORLD\\n' > README.md")
    assert ws.state.collection_hash("files") == edited
    await ws.ok("bash", command="printf 'hello\\nworld\\n' > README.md")
    assert ws.state.collection_hash("files") == original


async def test_the_hash_changes_with_the_mode_and_returns_when_reverted(ws) -> None:
    original = ws.state.collection_hash("files")
    await ws.ok("bash", command="chmod +x src/app.py")
    assert ws.state.get("files", "src/app.py")["mode"] == "100755"
    assert ws.state.collection_hash("files") != original
    await ws.ok("bash", command="chmod -x src/app.py")
    assert ws.state.collection_hash("files") == original


async def test_adding_and_removing_a_file_returns_to_the_same_hash(ws) -> None:
    original = ws.state.collection_hash("files")
    await ws.ok("bash", command="echo tmp > scratch.txt")
    assert ws.state.collection_hash("files") != original
    await ws.ok("bash", command="rm scratch.txt")
    assert ws.state.collection_hash("files") == original


def test_equal_trees_loaded_twice_hash_the_same(make_env: Callable[..., Environment]) -> None:
    first = make_env().new_state()
    second = make_env().new_state()
    assert first.collection_hash("files") == second.collection_hash("files")
    assert first.hash() == second.hash()
    # One character of one file apart: a different hash.
    files = {r["path"]: r["content"] for r in first.list("files")}
    files["README.md"] += "!"
    other = make_env({"seed": {"files": files}}).new_state()
    assert other.collection_hash("files") != first.collection_hash("files")


def test_a_folder_seed_and_the_same_inline_files_hash_the_same(
    make_env: Callable[..., Environment], tmp_path
) -> None:
    repo = tmp_path / "repo"
    (repo / "src").mkdir(parents=True)
    (repo / "src" / "a.py").write_text("a = 1\n")
    (repo / "b.txt").write_text("b\n")
    from_folder = make_env({"seed": {"folder": str(repo)}}).new_state()
    inline = make_env({"seed": {"files": {"src/a.py": "a = 1\n", "b.txt": "b\n"}}}).new_state()
    assert from_folder.collection_hash("files") == inline.collection_hash("files")


async def test_tree_diff_lists_changes_and_a_unified_patch(ws) -> None:
    before = ws.state.snapshot()
    assert tree_diff(before, ws.state).empty
    await ws.ok(
        "bash",
        command="echo brand new > added.txt && rm README.md && printf '\\x00\\xff' > blob.bin",
    )
    await ws.ok(
        "edit_file", path="src/app.py", old_string="sum(items)", new_string="sum(items) * 2"
    )
    change = tree_diff(before, ws.state)
    assert not change.empty
    assert change.added == ["added.txt", "blob.bin"]
    assert change.removed == ["README.md"]
    assert change.changed == ["src/app.py"]
    patch = change.patch
    assert "--- a/src/app.py\n+++ b/src/app.py\n" in patch
    assert "\n-    return sum(items)\n" in patch
    assert "\n+    return sum(items) * 2\n" in patch
    assert " def total(items):\n" in patch  # context kept
    assert "--- /dev/null\n+++ b/added.txt\n" in patch and "\n+brand new\n" in patch
    assert "--- a/README.md\n+++ /dev/null\n" in patch and "\n-world\n" in patch
    assert "Binary files a/blob.bin and b/blob.bin differ" in patch
    assert "\x00" not in patch


async def test_tree_diff_between_snapshots_and_in_reverse(ws) -> None:
    before = ws.state.snapshot()
    await ws.ok("write_file", path="README.md", content="hello\nthere")
    after = ws.state.snapshot()
    forward = tree_diff(before, after)
    assert forward.changed == ["README.md"] and not forward.added and not forward.removed
    assert "-world\n+there\n\\ No newline at end of file\n" in forward.patch
    backward = tree_diff(after, before)
    assert backward.changed == ["README.md"]
    assert "-there\n\\ No newline at end of file\n+world\n" in backward.patch
    assert tree_diff(after, after).empty and tree_diff(after, after).patch == ""
