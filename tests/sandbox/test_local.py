"""The local sandbox: a real subprocess in a private folder, held to its limits."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from agentenv.sandbox import LocalProvider, SandboxError, SandboxLimits


def run(coro):
    return asyncio.run(coro)


def test_a_command_runs_in_a_private_folder_seeded_from_the_workspace(tmp_path: Path) -> None:
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "notes.txt").write_text("seeded\n")
    with LocalProvider().create(workspace=tmp_path / "seed") as box:
        result = run(box.exec(["sh", "-c", "pwd; cat notes.txt; echo made > new.txt"]))
        assert result.ok and result.stdout.splitlines() == [str(box.workspace), "seeded"]
        assert (box.workspace / "new.txt").read_text() == "made\n"
        assert not (tmp_path / "seed" / "new.txt").exists()  # the seed is copied, not used
        folder = box.workspace
    assert not folder.exists()  # destroyed on leaving the block


def test_the_environment_is_minimal_and_stdin_env_and_cwd_are_passed(tmp_path: Path) -> None:
    os.environ["AGENTENV_SECRET_FOR_TEST"] = "leak"
    try:
        with LocalProvider().create() as box:
            (box.workspace / "sub").mkdir()
            result = run(
                box.exec(
                    "pwd; echo ${AGENTENV_SECRET_FOR_TEST:-none}; echo $GREETING; cat",
                    env={"GREETING": "hello"},
                    cwd="sub",
                    stdin="from stdin",
                )
            )
    finally:
        del os.environ["AGENTENV_SECRET_FOR_TEST"]
    assert result.stdout.splitlines() == [str(box.workspace / "sub"), "none", "hello", "from stdin"]


def test_a_command_past_its_timeout_is_killed_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child-survived"
    with LocalProvider().create(SandboxLimits(timeout=0.5)) as box:
        began = time.perf_counter()
        result = run(box.exec(f"(sleep 2; touch {marker}) & sleep 30"))
        assert time.perf_counter() - began < 5
    assert result.timed_out and result.exit_code is None and not result.ok
    time.sleep(2.5)
    assert not marker.exists()  # the background child went with the group


def test_output_is_capped_and_says_so() -> None:
    with LocalProvider().create(SandboxLimits(output_bytes=1000)) as box:
        result = run(box.exec("yes x | head -c 5000000"))
    assert result.ok and result.truncated and len(result.stdout) == 1000


def test_a_big_write_stops_at_the_file_size_limit() -> None:
    with LocalProvider().create(SandboxLimits(file_size_mb=1)) as box:
        result = run(box.exec("head -c 5000000 /dev/zero > big.bin"))
        size = (box.workspace / "big.bin").stat().st_size
    assert not result.ok and size <= 1024 * 1024


def test_memory_past_the_limit_fails_the_command_not_us() -> None:
    with LocalProvider().create(SandboxLimits(memory_mb=200)) as box:
        result = run(box.exec(["python3", "-c", "x = bytearray(600 * 1024 * 1024)"]))
    assert result.exit_code not in (0, None) and "MemoryError" in result.stderr


def test_paths_outside_the_workspace_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    with LocalProvider().create() as box:
        (box.workspace / "link").symlink_to(tmp_path)
        for bad in ("../x", "/etc", "link/outside.txt"):
            with pytest.raises(SandboxError, match="outside the sandbox's workspace"):
                box.copy_out(bad, tmp_path / "copy")
        with pytest.raises(SandboxError, match="outside"):
            run(box.exec("true", cwd=".."))


def test_copy_in_copy_out_and_snapshot(tmp_path: Path) -> None:
    (tmp_path / "in.txt").write_text("in")
    with LocalProvider().create() as box:
        box.copy_in(tmp_path / "in.txt", ".")
        run(box.exec("mkdir -p out && cp in.txt out/copied.txt"))
        box.copy_out("out/copied.txt", tmp_path / "back.txt")
        box.snapshot(tmp_path / "snap")
    assert (tmp_path / "back.txt").read_text() == "in"
    assert sorted(p.name for p in (tmp_path / "snap").rglob("*")) == ["copied.txt", "in.txt", "out"]
    with pytest.raises(SandboxError, match="destroyed"):
        box.copy_in(tmp_path / "in.txt")


def test_a_missing_program_or_seed_is_a_sandbox_error(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no such folder"):
        LocalProvider().create(workspace=tmp_path / "nope")
    with LocalProvider().create() as box, pytest.raises(SandboxError, match="cannot start"):
        run(box.exec(["no-such-program-xyz"]))


def test_local_refuses_fixed_inside_paths_and_names_the_providers_that_can() -> None:
    from agentenv.sandbox import LocalProvider, SandboxError

    with pytest.raises(SandboxError, match=r"cannot place folders at fixed paths.*bwrap"):
        LocalProvider().create(workdir="/app")
