"""The workspace tools through a real Gateway (local sandbox): what an agent sees."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from agentenv.env import Principal

REVIEWER = Principal("reviewer")

# -- read_file ------------------------------------------------------------------------------


async def test_read_file_whole_and_ranges(ws) -> None:
    assert await ws.ok("read_file", path="docs/guide.txt") == "one\ntwo\nthree\nfour\nfive\n"
    assert await ws.ok("read_file", path="docs/guide.txt", start_line=2, end_line=3) == (
        "two\nthree\n"
    )
    assert await ws.ok("read_file", path="docs/guide.txt", start_line=4) == "four\nfive\n"
    assert await ws.ok("read_file", path="docs/guide.txt", end_line=1) == "one\n"
    assert await ws.ok("read_file", path="docs/guide.txt", start_line=5, end_line=5) == "five\n"
    # An end past the last line stops at the last line.
    assert await ws.ok("read_file", path="docs/guide.txt", start_line=4, end_line=99) == (
        "four\nfive\n"
    )
    assert await ws.ok("read_file", path="./docs/../docs/guide.txt", end_line=1) == "one\n"


@pytest.mark.parametrize(
    ("start", "end", "message"),
    [
        (-2, 3, "lines count from 1"),
        (-1, None, "lines count from 1"),
        (3, 2, "lines count from 1"),
        (9, 12, "has 5 lines"),
    ],
)
async def test_read_file_bad_ranges_are_tool_errors(ws, start, end, message) -> None:
    assert message in await ws.fails(
        "read_file", path="docs/guide.txt", start_line=start, end_line=end
    )


async def test_read_file_start_past_the_end_names_the_line_count(ws) -> None:
    assert "has 5 lines" in await ws.fails("read_file", path="docs/guide.txt", start_line=9)


async def test_read_file_of_a_folder_a_missing_file_and_a_binary_file(ws) -> None:
    assert "is a folder" in await ws.fails("read_file", path="src")
    assert "no file 'nope.txt'" in await ws.fails("read_file", path="nope.txt")
    await ws.ok("bash", command="printf '\\x00\\x01\\xff\\xfe' > blob.bin")
    message = await ws.fails("read_file", path="blob.bin")
    assert "binary" in message and "4 bytes" in message


# -- write_file -----------------------------------------------------------------------------


async def test_write_file_creates_folders_and_bash_sees_it(ws) -> None:
    value = await ws.ok("write_file", path="new/deep/notes.md", content="# notes\n")
    assert value == {"path": "new/deep/notes.md", "bytes": 8, "created": True}
    assert ws.state.get("files", "new/deep/notes.md")["content"] == "# notes\n"
    assert (await ws.ok("bash", command="cat new/deep/notes.md"))["stdout"] == "# notes\n"
    again = await ws.ok("write_file", path="new/deep/notes.md", content="v2")
    assert again["created"] is False
    assert await ws.ok("read_file", path="new/deep/notes.md") == "v2"


async def test_write_file_over_a_folder_is_refused_and_changes_nothing(ws) -> None:
    before = ws.state.collection_hash("files")
    assert "is a folder" in await ws.fails("write_file", path="src", content="x")
    assert "is a file, not a folder" in await ws.fails(
        "write_file", path="README.md/inner", content="x"
    )
    assert ws.state.collection_hash("files") == before


async def test_write_file_over_the_size_limit_is_refused(session_of) -> None:
    ws = session_of({"seed": {"files": {"a.txt": "a"}}, "max_file_mb": 0.001})
    assert "limit" in await ws.fails("write_file", path="big.txt", content="x" * 5000)
    assert ws.state.get("files", "big.txt") is None


# -- edit_file ------------------------------------------------------------------------------


async def test_edit_file_replaces_the_one_match(ws) -> None:
    value = await ws.ok(
        "edit_file", path="src/app.py", old_string="sum(items)", new_string="sum(items) + 1"
    )
    assert value == {"path": "src/app.py", "replacements": 1}
    assert await ws.ok("read_file", path="src/app.py") == (
        "def total(items):\n    return sum(items) + 1\n"
    )
    assert "sum(items) + 1" in (await ws.ok("bash", command="cat src/app.py"))["stdout"]


@pytest.mark.parametrize(
    ("old", "message"),
    [
        ("no such text", "does not occur"),
        ("o", "occurs 3 times"),  # one, two, four
        ("", "old_string is empty"),
    ],
)
async def test_edit_file_that_is_not_one_match_fails_and_changes_nothing(ws, old, message) -> None:
    before = ws.state.collection_hash("files")
    text = await ws.ok("read_file", path="docs/guide.txt")
    error = await ws.fails("edit_file", path="docs/guide.txt", old_string=old, new_string="0")
    assert message in error
    assert ws.state.collection_hash("files") == before
    assert await ws.ok("read_file", path="docs/guide.txt") == text


async def test_edit_file_replace_all(ws) -> None:
    value = await ws.ok(
        "edit_file", path="docs/guide.txt", old_string="o", new_string="0", replace_all=True
    )
    assert value["replacements"] == 3
    assert await ws.ok("read_file", path="docs/guide.txt") == "0ne\ntw0\nthree\nf0ur\nfive\n"


async def test_edit_file_of_a_missing_file(ws) -> None:
    assert "no file" in await ws.fails("edit_file", path="x.py", old_string="a", new_string="b")


# -- list_files -----------------------------------------------------------------------------


async def test_list_files_default_lists_everything_sorted(ws) -> None:
    value = await ws.ok("list_files")
    assert value == {
        "files": ["README.md", "docs/guide.txt", "src/app.py", "src/util/strings.py"],
        "count": 4,
        "truncated": False,
    }


async def test_list_files_globs(ws) -> None:
    assert (await ws.ok("list_files", pattern="*.py"))["files"] == [
        "src/app.py",
        "src/util/strings.py",
    ]
    assert (await ws.ok("list_files", pattern="src/*.py"))["files"] == ["src/app.py"]
    assert (await ws.ok("list_files", pattern="src/**"))["files"] == [
        "src/app.py",
        "src/util/strings.py",
    ]
    assert (await ws.ok("list_files", pattern="*.rs"))["files"] == []
    # Under a folder, the pattern is relative to it (paths shown in full).
    under = await ws.ok("list_files", path="src", pattern="util/*")
    assert under["files"] == ["src/util/strings.py"]
    assert (await ws.ok("list_files", path="src/util"))["files"] == ["src/util/strings.py"]


async def test_list_files_shows_links_and_empty_folders(ws) -> None:
    await ws.ok("bash", command="ln -s src/app.py app_link && mkdir out")
    files = (await ws.ok("list_files"))["files"]
    assert "app_link -> src/app.py" in files
    assert "out/" in files


async def test_list_files_of_a_file_or_outside_is_refused(ws) -> None:
    assert "is a file, not a folder" in await ws.fails("list_files", path="README.md")
    assert "outside the workspace" in await ws.fails("list_files", path="..")


async def test_list_files_of_an_empty_folder_is_empty(ws) -> None:
    await ws.ok("bash", command="mkdir out")
    assert (await ws.ok("list_files", path="out"))["files"] == []


# -- search_files ---------------------------------------------------------------------------


async def test_search_files_regex_and_glob(ws) -> None:
    value = await ws.ok("search_files", pattern=r"^def \w+\(")
    assert value == {
        "matches": [
            {"path": "src/app.py", "line": 1, "text": "def total(items):"},
            {"path": "src/util/strings.py", "line": 1, "text": "def shout(s):"},
        ],
        "count": 2,
        "truncated": False,
    }
    only = await ws.ok("search_files", pattern="return", glob="src/util/*")
    assert [(m["path"], m["line"]) for m in only["matches"]] == [("src/util/strings.py", 2)]
    assert (await ws.ok("search_files", pattern="HELLO"))["count"] == 0
    insensitive = await ws.ok("search_files", pattern="HELLO", ignore_case=True)
    assert insensitive["matches"] == [{"path": "README.md", "line": 1, "text": "hello"}]


async def test_search_files_truncates_at_max_results(ws) -> None:
    value = await ws.ok("search_files", pattern="e", glob="*.txt", max_results=2)
    assert [m["text"] for m in value["matches"]] == ["one", "three"]
    assert value["count"] == 3  # one, three, five
    assert value["truncated"] is True


async def test_search_files_skips_binary_files_and_links(ws) -> None:
    await ws.ok("bash", command="printf 'hello\\n\\xff\\n' > blob.bin && ln -s README.md link")
    value = await ws.ok("search_files", pattern="hello")
    assert [m["path"] for m in value["matches"]] == ["README.md"]


async def test_search_files_bad_regex_is_a_tool_error(ws) -> None:
    assert "not a regular expression" in await ws.fails("search_files", pattern="(unclosed")


# -- paths that leave the tree --------------------------------------------------------------


@pytest.mark.parametrize("path", ["../x", "../../etc/passwd", "/etc/passwd", "src/../../x"])
async def test_paths_out_of_the_tree_are_tool_errors(ws, path) -> None:
    assert "outside the workspace" in await ws.fails("read_file", path=path)
    assert "outside the workspace" in await ws.fails("write_file", path=path, content="x")
    assert "outside the workspace" in await ws.fails(
        "edit_file", path=path, old_string="a", new_string="b"
    )


async def test_an_absolute_host_path_write_touches_nothing_on_the_host(ws, tmp_path: Path) -> None:
    target = tmp_path / "host-file.txt"
    assert "outside the workspace" in await ws.fails("write_file", path=str(target), content="x")
    assert not target.exists()


async def test_a_link_made_by_bash_out_of_the_tree_is_not_followed(ws) -> None:
    result = await ws.ok("bash", command="ln -s /etc etc_link && ln -s /etc/hostname host")
    assert result["changed"]["added"] == ["etc_link", "host"]
    assert ws.state.get("files", "etc_link")["mode"] == "120000"
    for path in ["etc_link/passwd", "host"]:
        message = await ws.fails("read_file", path=path)
        assert "leads out of the workspace" in message
    assert "leads out of the workspace" in await ws.fails(
        "write_file", path="etc_link/agentenv-test", content="x"
    )
    assert not os.path.exists("/etc/agentenv-test")
    assert "leads out of the workspace" in await ws.fails("list_files", path="etc_link")


# -- bash -----------------------------------------------------------------------------------


async def test_bash_exit_code_stdout_and_stderr(ws) -> None:
    value = await ws.ok("bash", command="echo out; echo err >&2; exit 3")
    assert value["exit_code"] == 3
    assert value["stdout"] == "out\n"
    assert value["stderr"] == "err\n"
    assert "timed_out" not in value and "truncated" not in value
    assert (await ws.ok("bash", command="true"))["exit_code"] == 0


async def test_bash_runs_in_the_tree_with_the_seed_files(ws) -> None:
    value = await ws.ok("bash", command="cat README.md && ls src")
    assert value["stdout"] == "hello\nworld\napp.py\nutil\n"


async def test_bash_reports_added_modified_and_removed(ws) -> None:
    value = await ws.ok(
        "bash",
        command="echo new > new.txt && echo more >> README.md && rm src/util/strings.py",
    )
    assert value["changed"] == {
        "added": ["new.txt", "src/util"],  # the folder left empty is a folder record now
        "modified": ["README.md"],
        "removed": ["src/util/strings.py"],
    }
    assert await ws.ok("read_file", path="new.txt") == "new\n"
    assert await ws.ok("read_file", path="README.md") == "hello\nworld\nmore\n"
    assert ws.state.get("files", "src/util/strings.py") is None
    assert ws.state.get("files", "src/util")["mode"] == "040000"
    assert "no file" in await ws.fails("read_file", path="src/util/strings.py")


async def test_bash_mode_changes_are_kept(ws) -> None:
    value = await ws.ok(
        "bash", command="printf '#!/bin/sh\\necho ran\\n' > run.sh; chmod +x run.sh"
    )
    assert value["changed"]["added"] == ["run.sh"]
    assert ws.state.get("files", "run.sh")["mode"] == "100755"
    assert (await ws.ok("bash", command="./run.sh"))["stdout"] == "ran\n"
    changed = await ws.ok("bash", command="chmod -x run.sh")
    assert changed["changed"]["modified"] == ["run.sh"]
    assert ws.state.get("files", "run.sh")["mode"] == "100644"


async def test_bash_that_rewrites_the_same_content_changes_nothing(ws) -> None:
    before = ws.state.collection_hash("files")
    value = await ws.ok("bash", command="touch README.md && cp README.md x && mv x README.md")
    assert value["changed"] == {"added": [], "modified": [], "removed": []}
    assert ws.state.collection_hash("files") == before


async def test_bash_sees_the_documents_variables(session_of) -> None:
    ws = session_of(
        {"seed": {"files": {"a": "a"}}, "sandbox": {"provider": "local", "env": {"GREETING": "hi"}}}
    )
    assert (await ws.ok("bash", command="echo $GREETING"))["stdout"] == "hi\n"


async def test_bash_timeout_is_a_normal_result_that_says_so(ws) -> None:
    result = await ws.call(
        "bash", command="echo started; echo partial > p.txt; sleep 30", timeout=0.5
    )
    assert result.ok, result.error
    value = result.value
    assert value["timed_out"] is True
    assert value["exit_code"] != 0
    assert value["stdout"] == "started\n"
    assert "timeout" in value["stderr"]
    # What it did before it was killed is kept, as a shell would leave it.
    assert value["changed"]["added"] == ["p.txt"]
    assert await ws.ok("read_file", path="p.txt") == "partial\n"
    # And the next command runs normally.
    assert (await ws.ok("bash", command="echo fine"))["stdout"] == "fine\n"


async def test_bash_output_is_cut_and_marked(session_of) -> None:
    ws = session_of(
        {"seed": {"files": {"a": "a"}}, "sandbox": {"provider": "local", "output_bytes": 1000}}
    )
    value = await ws.ok("bash", command="head -c 5000 /dev/zero | tr '\\0' a")
    assert value["truncated"] is True
    assert len(value["stdout"]) <= 1000
    assert value["stdout"].startswith("a" * 100)
    assert "[output cut" in value["stderr"] and "1000 bytes" in value["stderr"]
    short = await ws.ok("bash", command="echo small")
    assert "truncated" not in short and short["stdout"] == "small\n"


# -- roles ----------------------------------------------------------------------------------

ROLE_TOOLS = {
    "bash": ["agent"],
    "read_file": ["agent", "reviewer"],
    "write_file": ["agent"],
    "edit_file": ["agent"],
    "list_files": None,
    "search_files": ["agent", "reviewer"],
}


@pytest.fixture
def two_roles(session_of: Callable):
    return session_of(
        {"seed": {"files": {"a.txt": "a\n"}}, "tools": ROLE_TOOLS},
        roles=["agent", "reviewer"],
    )


async def test_a_role_without_bash_is_denied(two_roles) -> None:
    before = two_roles.state.collection_hash("files")
    for tool, args in [
        ("bash", {"command": "echo x > b.txt"}),
        ("write_file", {"path": "b.txt", "content": "x"}),
        ("edit_file", {"path": "a.txt", "old_string": "a", "new_string": "b"}),
    ]:
        result = await two_roles.call(tool, principal=REVIEWER, **args)
        assert result.denied, (tool, result)
        assert not result.ok
    assert two_roles.state.collection_hash("files") == before
    read = await two_roles.call("read_file", principal=REVIEWER, path="a.txt")
    assert read.ok and read.value == "a\n"
    assert (await two_roles.call("bash", command="echo ok")).ok  # the agent may


async def test_each_role_is_listed_its_tools(two_roles) -> None:
    gw = two_roles.gw
    assert two_roles.env.roles == ("agent", "reviewer")
    assert {t.name for t in gw.tools_for(Principal("agent"))} == set(ROLE_TOOLS)
    assert {t.name for t in gw.tools_for(REVIEWER)} == {"read_file", "list_files", "search_files"}


async def test_a_tool_list_serves_only_those_tools(session_of) -> None:
    ws = session_of({"seed": {"files": {"a.txt": "a"}}, "tools": ["read_file", "list_files"]})
    assert {t.name for t in ws.gw.tools_for(Principal("agent"))} == {"read_file", "list_files"}
    result = await ws.call("bash", command="true")
    assert not result.ok and result.error.kind == "unknown_tool"


# -- more bash and file-tool behaviour ------------------------------------------------------


async def test_bash_timeout_is_capped_by_the_documents_limit(session_of) -> None:
    ws = session_of({"seed": {"files": {"a": "a"}}, "sandbox": {"provider": "local", "timeout": 1}})
    value = await ws.ok("bash", command="sleep 30", timeout=100)
    assert value["timed_out"] is True
    assert "its 1 s timeout" in value["stderr"]


async def test_list_files_is_capped_and_says_so(ws) -> None:
    await ws.ok("bash", command="mkdir many && for i in $(seq 1 1005); do : > many/f$i; done")
    value = await ws.ok("list_files", path="many")
    assert value["count"] == 1005
    assert len(value["files"]) == 1000
    assert value["truncated"] is True


async def test_writes_through_a_link_land_on_its_target(ws) -> None:
    await ws.ok("bash", command="ln -s src/app.py app_link")
    await ws.ok("write_file", path="app_link", content="print('via link')\n")
    assert ws.state.get("files", "src/app.py")["content"] == "print('via link')\n"
    assert ws.state.get("files", "app_link")["mode"] == "120000"
    value = await ws.ok("bash", command="readlink app_link && cat src/app.py")
    assert value["stdout"] == "src/app.py\nprint('via link')\n"


async def test_file_names_with_spaces_and_unicode(ws) -> None:
    value = await ws.ok("bash", command="echo hi > 'na\u00efve file.txt'")
    assert value["changed"]["added"] == ["na\u00efve file.txt"]
    assert await ws.ok("read_file", path="na\u00efve file.txt") == "hi\n"
    await ws.ok("edit_file", path="na\u00efve file.txt", old_string="hi", new_string="ho")
    assert (await ws.ok("bash", command="cat 'na\u00efve file.txt'"))["stdout"] == "ho\n"


async def test_edit_file_of_a_binary_file_is_refused(ws) -> None:
    await ws.ok("bash", command="printf '\\xff\\xfe' > blob.bin")
    before = ws.state.collection_hash("files")
    message = await ws.fails("edit_file", path="blob.bin", old_string="a", new_string="b")
    assert "binary" in message
    assert ws.state.collection_hash("files") == before
