"""Our distribution is not upstream AgentEnv's: its name, its two commands, `--version`."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

from typer.testing import CliRunner

from agentenv import __version__
from agentenv.cli import DISTRIBUTION, app

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_DISTRIBUTION = "agentenv-framework"


def test_pyproject_names_our_distribution_not_upstreams() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == DISTRIBUTION
    assert project["name"] != UPSTREAM_DISTRIBUTION
    assert project["scripts"] == {"agent-env": "agentenv.cli:main", "agentenv": "agentenv.cli:main"}


def test_version_names_the_distribution() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"agent-env ({DISTRIBUTION}) {__version__}"


def test_installed_metadata_has_both_console_scripts() -> None:
    scripts = {
        entry.name: entry.value
        for entry in metadata.distribution(DISTRIBUTION).entry_points
        if entry.group == "console_scripts"
    }
    assert scripts.get("agentenv") == "agentenv.cli:main"
    assert scripts.get("agent-env") == "agentenv.cli:main"
    assert metadata.version(DISTRIBUTION) == __version__


def test_the_agentenv_script_answers_as_ours() -> None:
    # The installed `agentenv` script, run as a user would (next to this Python).
    script = Path(sys.executable).with_name("agentenv")
    command = [str(script)] if script.exists() else ["agentenv"]
    done = subprocess.run(
        [*command, "--version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"agent-env ({DISTRIBUTION}) {__version__}"
