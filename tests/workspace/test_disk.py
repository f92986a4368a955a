"""The instance's folder kept in step with its state: after forks, rollbacks, state-first
writes, limits, empty folders, and dropped instances."""

from __future__ import annotations

from pathlib import Path

from agentenv.env import Principal
from agentenv.workspace import WorkTree

AGENT = Principal("agent")


def _trees(inst) -> list[WorkTree]:
    return [r for r in inst.resources.values() if isinstance(r, WorkTree)]


async def test_bash_sees_the_restored_files_after_a_rollback(ws) -> None:
    await ws.ok("bash", command="true")  # the folder exists and is synced
    snapshot = ws.state.snapshot()
    await ws.ok("bash", command="echo changed > README.md && echo x > extra.txt && rm src/app.py")
    await ws.ok("write_file", path="written.txt", content="w")
    assert ws.state.get("files", "README.md")["content"] == "changed\n"
    ws.state.restore(snapshot)
    value = await ws.ok("bash", command="cat README.md src/app.py; ls")
    assert value["stdout"] == (
        "hello\nworld\ndef total(items):\n    return sum(items)\nREADME.md\ndocs\nsrc\n"
    )
    assert value["changed"] == {"added": [], "modified": [], "removed": []}
    assert ws.state.collection_hash("files") == snapshot.collection_hash("files")


async def test_a_rollback_leaves_no_stray_folder_behind(ws) -> None:
    await ws.ok("bash", command="true")
    snapshot = ws.state.snapshot()
    await ws.ok("bash", command="mkdir -p new/deep && echo x > new/deep/f.txt")
    ws.state.restore(snapshot)
    value = await ws.ok("bash", command="ls")
    assert value["stdout"] == "README.md\ndocs\nsrc\n"
    assert value["changed"] == {"added": [], "modified": [], "removed": []}
    assert ws.state.collection_hash("files") == snapshot.collection_hash("files")


async def test_a_rollback_across_file_and_folder_swaps(ws) -> None:
    await ws.ok("bash", command="true")
    seeded = ws.state.snapshot()
    swapped = await ws.ok(
        "bash",
        command="rm -r src && echo file > src && rm README.md && mkdir README.md "
        "&& echo inner > README.md/inner && ln -s nowhere dangling",
    )
    assert swapped["changed"]["added"] == ["README.md/inner", "dangling", "src"]
    after_swap = ws.state.snapshot()
    ws.state.restore(seeded)
    value = await ws.ok("bash", command="cat README.md src/app.py; test -e dangling || echo gone")
    assert value["stdout"] == "hello\nworld\ndef total(items):\n    return sum(items)\ngone\n"
    assert value["changed"] == {"added": [], "modified": [], "removed": []}
    ws.state.restore(after_swap)
    value = await ws.ok("bash", command="cat src README.md/inner; readlink dangling")
    assert value["stdout"] == "file\ninner\nnowhere\n"
    assert value["changed"] == {"added": [], "modified": [], "removed": []}


async def test_a_fork_of_the_state_gets_a_folder_of_its_own_with_its_files(ws) -> None:
    await ws.ok("bash", command="echo from bash > made.txt && chmod +x made.txt")
    forked = ws.gw.create_instance("fork", state=ws.state.snapshot())
    await ws.ok("bash", command="echo later > made.txt")  # after the fork: not in it
    value = await ws.gw.call(
        AGENT, "bash", {"command": "cat made.txt && test -x made.txt && echo x"}, instance="fork"
    )
    assert value.ok and value.value["stdout"] == "from bash\nx\n"
    assert forked.state.get("files", "made.txt")["content"] == "from bash\n"


async def test_ignored_paths_written_by_bash_are_not_kept(ws) -> None:
    value = await ws.ok(
        "bash",
        command="mkdir -p src/__pycache__ && echo x > src/__pycache__/app.cpython-311.pyc "
        "&& echo y > top.pyc && echo z > kept.txt",
    )
    assert value["changed"] == {"added": ["kept.txt"], "modified": [], "removed": []}
    assert not any("pyc" in k or "__pycache__" in k for k in ws.state.keys("files"))


async def test_a_state_first_write_reaches_the_folder(ws) -> None:
    await ws.ok("bash", command="cat README.md")  # the folder is made and synced
    await ws.ok("write_file", path="README.md", content="from write_file\n")
    await ws.ok("edit_file", path="src/app.py", old_string="sum", new_string="max")
    await ws.ok("write_file", path="fresh/new.txt", content="new\n")
    value = await ws.ok("bash", command="cat README.md src/app.py fresh/new.txt")
    assert value["stdout"] == "from write_file\ndef total(items):\n    return max(items)\nnew\n"
    assert value["changed"] == {"added": [], "modified": [], "removed": []}


async def test_a_state_write_keeps_the_executable_bit_on_disk(ws) -> None:
    await ws.ok("bash", command="printf '#!/bin/sh\\necho one\\n' > run.sh && chmod +x run.sh")
    await ws.ok("write_file", path="run.sh", content="#!/bin/sh\necho two\n")
    assert ws.state.get("files", "run.sh")["mode"] == "100755"
    assert (await ws.ok("bash", command="./run.sh"))["stdout"] == "two\n"


async def test_a_file_over_the_limit_fails_the_call_and_is_not_kept(session_of) -> None:
    ws = session_of(
        {
            "seed": {"files": {"README.md": "hello\n"}},
            "sandbox": {"provider": "local"},
            "max_file_mb": 0.01,
        }
    )
    before = ws.state.collection_hash("files")
    result = await ws.call(
        "bash", command="echo edited > README.md; head -c 40000 /dev/zero > big.bin"
    )
    assert not result.ok
    assert result.error.kind == "tool_error"
    assert "big.bin" in result.error.message and "limit" in result.error.message
    # Nothing of the command is kept: not the big file, not its other changes.
    assert ws.state.collection_hash("files") == before
    assert ws.state.get("files", "big.bin") is None
    assert ws.state.get("files", "README.md")["content"] == "hello\n"
    # The next command sees the folder as the state has it.
    value = await ws.ok("bash", command="ls; cat README.md")
    assert value["stdout"] == "README.md\nhello\n"
    assert value["changed"] == {"added": [], "modified": [], "removed": []}


async def test_a_tree_over_its_limit_fails_the_call(session_of) -> None:
    ws = session_of({"seed": {"files": {"a.txt": "a"}}, "max_file_mb": 0.01, "max_tree_mb": 0.02})
    command = "for i in 1 2 3 4; do head -c 8000 /dev/zero > f$i.bin; done"
    result = await ws.call("bash", command=command)
    assert not result.ok and "MiB limit" in result.error.message
    assert ws.state.keys("files") == ["a.txt"]
    assert (await ws.ok("bash", command="ls"))["stdout"] == "a.txt\n"


async def test_an_empty_folder_is_a_record_and_survives_a_fork(ws) -> None:
    value = await ws.ok("bash", command="mkdir out")
    assert value["changed"]["added"] == ["out"]
    assert ws.state.get("files", "out") == {
        "path": "out",
        "mode": "040000",
        "content": "",
        "encoding": "utf-8",
    }
    snapshot = ws.state.snapshot()
    forked = ws.gw.create_instance("forked", state=snapshot)
    assert forked.state.get("files", "out")["mode"] == "040000"
    seen = await ws.gw.call(
        AGENT, "bash", {"command": "test -d out && echo folder"}, instance="forked"
    )
    assert seen.ok and seen.value["stdout"] == "folder\n"
    assert seen.value["changed"] == {"added": [], "modified": [], "removed": []}
    # A file written into it stands for the folder: the folder record goes.
    written = await ws.gw.call(
        AGENT, "write_file", {"path": "out/result.txt", "content": "r"}, instance="forked"
    )
    assert written.ok
    assert forked.state.get("files", "out") is None
    assert forked.state.get("files", "out/result.txt")["content"] == "r"
    listed = await ws.gw.call(AGENT, "bash", {"command": "ls out"}, instance="forked")
    assert listed.value["stdout"] == "result.txt\n"
    # The original instance is untouched by the fork's writes.
    assert ws.state.get("files", "out")["mode"] == "040000"
    assert ws.state.get("files", "out/result.txt") is None
    assert (await ws.ok("bash", command="ls out"))["stdout"] == ""


async def test_instances_have_their_own_folders(ws) -> None:
    ws.gw.create_instance("other")
    await ws.ok("bash", command="echo mine > mine.txt")
    other = await ws.gw.call(AGENT, "bash", {"command": "ls"}, instance="other")
    assert "mine.txt" not in other.value["stdout"]
    assert ws.gw.instance("other").state.get("files", "mine.txt") is None
    (tree,) = _trees(ws.gw.instance())
    (other_tree,) = _trees(ws.gw.instance("other"))
    assert tree.root != other_tree.root


async def test_dropping_an_instance_removes_its_folder(ws) -> None:
    inst = ws.gw.create_instance("temp")
    result = await ws.gw.call(AGENT, "bash", {"command": "pwd"}, instance="temp")
    assert result.ok
    (tree,) = _trees(inst)
    root = Path(tree.root)
    assert root.is_dir()
    assert Path(result.value["stdout"].strip()).resolve() == root.resolve()
    ws.gw.drop_instance("temp")
    assert not root.exists()
    assert "temp" not in ws.gw.instances
