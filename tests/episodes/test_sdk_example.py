"""examples/sdk/drive_episode.py runs as docs/sdk.md says: no API key, the task passes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "sdk" / "drive_episode.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI")}
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
        check=False,
    )


def test_the_sdk_example_drives_the_flagship_task_to_a_pass() -> None:
    out = run()
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "task support-desk/resolve-billing: 1/1 passed"
    assert "status passed, score 1.0" in lines
    assert "  outcome: 1.00 passed=True" in lines
    assert any(line.startswith("messages: ") and "tool" in line for line in lines)
    assert any(line.startswith("usage: {'prompt_tokens': ") for line in lines)
    assert "final state: T-1042 is closed" in lines


def test_the_sdk_example_runs_episodes_concurrently() -> None:
    out = run("--episodes", "8")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "task support-desk/resolve-billing: 8/8 passed"
