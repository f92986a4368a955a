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


def python_block(path: Path, containing: str) -> str:
    """The first ```python block of a page that mentions `containing`."""
    text = path.read_text(encoding="utf-8")
    for block in text.split("```python\n")[1:]:
        code = block.split("\n```", 1)[0]
        if containing in code:
            return code
    raise AssertionError(f"{path} has no python block with {containing!r}")


def test_the_loops_in_the_readme_and_docs_run_as_written(tmp_path: Path) -> None:
    for page in (ROOT / "README.md", ROOT / "docs" / "sdk.md"):
        script = tmp_path / f"{page.stem}_loop.py"
        script.write_text(python_block(page, "asyncio.run(main())"), encoding="utf-8")
        out = subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, f"{page.name}: {out.stderr}"
        assert "passed" in out.stdout, f"{page.name}: {out.stdout}"
