"""Fixtures of the workspace tests: environment documents written to tmp_path, and a
gateway over them whose instances' folders are removed when the test ends."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentenv.env import Environment, Principal
from agentenv.gateway import CallResult, Gateway
from agentenv.state import State

AGENT = Principal("agent")

SEED_FILES = {
    "README.md": "hello\nworld\n",
    "src/app.py": "def total(items):\n    return sum(items)\n",
    "src/util/strings.py": "def shout(s):\n    return s.upper()\n",
    "docs/guide.txt": "one\ntwo\nthree\nfour\nfive\n",
}


def write_document(
    folder: Path,
    workspace: dict[str, Any],
    roles: list[str] | None = None,
    name: str = "ws-test",
) -> Path:
    """An environment document with this `workspace:` block, in `folder` (JSON is YAML)."""
    folder.mkdir(parents=True, exist_ok=True)
    document = {
        "apiVersion": "agentenv/v1",
        "kind": "Environment",
        "name": name,
        "roles": [{"name": r} for r in (roles or ["agent"])],
        "workspace": workspace,
    }
    path = folder / "environment.yaml"
    path.write_text(json.dumps(document, indent=2))
    return path


class Session:
    """A gateway over one workspace environment, with a shorthand for calls."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.gw = Gateway(env)

    @property
    def state(self) -> State:
        return self.gw.instance().state

    async def call(
        self,
        tool: str,
        principal: Principal = AGENT,
        instance: str = "default",
        **args: Any,
    ) -> CallResult:
        return await self.gw.call(principal, tool, args, instance=instance)

    async def ok(self, tool: str, **args: Any) -> Any:
        """The value of a call that must succeed."""
        result = await self.call(tool, **args)
        assert result.ok, result.error
        return result.value

    async def fails(self, tool: str, **args: Any) -> str:
        """The message of a call that must fail as a tool error."""
        result = await self.call(tool, **args)
        assert not result.ok, result.value
        assert result.error is not None and result.error.kind == "tool_error", result.error
        return result.error.message

    def close(self) -> None:
        for instance_id in self.gw.instances:
            self.gw.instance(instance_id).close_resources()


@pytest.fixture
def document() -> Callable[..., Path]:
    """`write_document`, for tests that load (or fail to load) a document themselves."""
    return write_document


@pytest.fixture
def make_env(tmp_path: Path) -> Callable[..., Environment]:
    """Load an environment from a document with the given `workspace:` block (by default
    the local sandbox and the inline `SEED_FILES`)."""
    counter = iter(range(1000))

    def make(workspace: dict[str, Any] | None = None, **kwargs: Any) -> Environment:
        block = workspace or {
            "seed": {"files": SEED_FILES},
            "sandbox": {"provider": "local", "timeout": 10},
        }
        path = write_document(tmp_path / f"env{next(counter)}", block, **kwargs)
        return Environment.load(path)

    return make


@pytest.fixture
def session_of(make_env: Callable[..., Environment]) -> Iterator[Callable[..., Session]]:
    """Make a `Session` from `make_env`'s arguments; its folders go when the test ends."""
    made: list[Session] = []

    def start(workspace: dict[str, Any] | None = None, **kwargs: Any) -> Session:
        session = Session(make_env(workspace, **kwargs))
        made.append(session)
        return session

    yield start
    for session in made:
        session.close()


@pytest.fixture
def ws(session_of: Callable[..., Session]) -> Session:
    """A session over the default workspace (local sandbox, `SEED_FILES`)."""
    return session_of()
