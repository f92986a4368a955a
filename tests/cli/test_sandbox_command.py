"""`agent-env sandbox run` and `providers`, through the real CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from agentenv.cli import app
from agentenv.sandbox import BwrapProvider

runner = CliRunner()


@pytest.mark.parametrize("provider", ["local", "bwrap"])
def test_run_prints_the_output_and_returns_the_exit_code(provider: str) -> None:
    if provider == "bwrap" and BwrapProvider.unavailable():
        pytest.skip(str(BwrapProvider.unavailable()))
    ok = runner.invoke(
        app, ["sandbox", "run", "--provider", provider, "--", "python3", "-c", "print('hi')"]
    )
    assert ok.exit_code == 0 and ok.stdout == "hi\n"
    failing = runner.invoke(app, ["sandbox", "run", "-p", provider, "--", "sh", "-c", "exit 3"])
    assert failing.exit_code == 3


def test_a_timeout_is_exit_124_and_says_so() -> None:
    result = runner.invoke(app, ["sandbox", "run", "--timeout", "0.3", "--", "sleep", "10"])
    assert result.exit_code == 124 and "killed at its 0.3 s timeout" in result.output


def test_the_workspace_is_copied_in_and_kept_where_asked(tmp_path: Path) -> None:
    (tmp_path / "seed").mkdir()
    (tmp_path / "seed" / "a.txt").write_text("a")
    result = runner.invoke(
        app,
        ["sandbox", "run", "-w", str(tmp_path / "seed"), "--keep", str(tmp_path / "kept"), "--",
         "sh", "-c", "cat a.txt; echo b > b.txt"],
    )  # fmt: skip
    assert result.exit_code == 0 and result.stdout == "a"
    assert (tmp_path / "kept" / "b.txt").read_text() == "b\n"


def test_an_unknown_provider_is_one_error_line() -> None:
    result = runner.invoke(app, ["sandbox", "run", "-p", "e2b", "--", "true"])
    assert result.exit_code == 1
    assert "no sandbox provider 'e2b' (we have: local, bwrap" in result.output
    assert "Traceback" not in result.output


def test_providers_lists_each_with_its_state() -> None:
    result = runner.invoke(app, ["sandbox", "providers"])
    assert result.exit_code == 0 and "local" in result.output and "bwrap" in result.output


def test_a_program_that_does_not_exist_is_exit_127_with_a_message() -> None:
    result = runner.invoke(app, ["sandbox", "run", "--", "no-such-program-here"])
    assert result.exit_code == 127
    assert "cannot start 'no-such-program-here': no such program" in result.output


def test_programs_are_found_on_the_callers_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tool = tmp_path / "bin" / "my-tool"
    tool.parent.mkdir()
    tool.write_text("#!/bin/sh\necho from my tool\n")
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}:/usr/bin:/bin")
    result = runner.invoke(app, ["sandbox", "run", "--", "my-tool"])
    assert result.exit_code == 0 and result.stdout == "from my tool\n"
