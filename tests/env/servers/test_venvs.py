"""Cached virtualenvs for environment folders, built for real with the local pip (no
network: the requirements are empty or name a local folder)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agentenv.env.servers.base import ServerError
from agentenv.env.servers.venvs import (
    MARKER,
    VenvRecord,
    ensure_venv,
    find_python,
    venv_python,
    venv_root,
)


def test_an_empty_requirements_file_builds_once_then_hits_the_cache(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("# nothing needed\n")
    root = tmp_path / "venvs"
    venv = ensure_venv(requirements, root=root, use_uv=False)
    assert venv.parent == root and (venv / MARKER).is_file()
    record = VenvRecord.model_validate(json.loads((venv / MARKER).read_text()))
    assert record.installer == "pip" and record.requirements == str(requirements)
    python = venv_python(venv)
    done = subprocess.run(
        [str(python), "-c", "import sys; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(done.stdout.strip()).resolve() == venv.resolve()
    built_at = (venv / MARKER).stat().st_mtime_ns
    assert ensure_venv(requirements, root=root, use_uv=False) == venv
    assert (venv / MARKER).stat().st_mtime_ns == built_at  # not built again
    other = tmp_path / "other.txt"
    other.write_text("# another\n")
    assert ensure_venv(other, root=root, use_uv=False) != venv  # another key


def test_a_bad_requirement_fails_with_nothing_left(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("./no-such-local-package\n")
    root = tmp_path / "venvs"
    with pytest.raises(ServerError) as caught:
        ensure_venv(requirements, root=root, use_uv=False)
    message = str(caught.value)
    assert str(requirements) in message and "no-such-local-package" in message
    leftovers = [p for p in root.iterdir() if p.is_dir()]
    assert leftovers == []  # no half-built virtualenv


def test_a_half_built_folder_is_built_again(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("")
    root = tmp_path / "venvs"
    venv = ensure_venv(requirements, root=root, use_uv=False)
    (venv / MARKER).unlink()  # as if a build was killed before its last step
    (venv / "junk").write_text("left by a killed build")
    again = ensure_venv(requirements, root=root, use_uv=False)
    assert again == venv and (venv / MARKER).is_file() and not (venv / "junk").exists()


def test_interpreters_and_the_root(tmp_path: Path, monkeypatch) -> None:
    assert find_python(None) == sys.executable
    with pytest.raises(ServerError, match="not found"):
        find_python("no-such-python-here")
    monkeypatch.setenv("AGENTENV_VENV_DIR", str(tmp_path / "cache"))
    assert venv_root() == tmp_path / "cache"
    monkeypatch.delenv("AGENTENV_VENV_DIR")
    assert venv_root().parts[-3:] == (".cache", "agentenv", "venvs")
