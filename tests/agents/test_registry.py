"""Finding agents by spec: every built-in, plugins from agentenv.toml, and clear errors."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from pathlib import Path

import pytest

from agentenv.agents import (
    AGENTS,
    Agent,
    HumanAgent,
    OpenAIAgent,
    OracleAgent,
    ReplayAgent,
    ScriptedAgent,
    make_agent,
)
from agentenv.registry import RegistryError

BUILTINS = ["oracle", "openai", "replay", "scripted", "human"]

PLUGIN = """
from agentenv.agents import OracleAgent


def shouty(argument):
    agent = OracleAgent()
    agent.name = "shouty:" + argument
    return agent


def oracle(argument):
    raise AssertionError("a plugin never replaces a built-in")
"""


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean working folder (no agentenv.toml above it) and a fresh plugin scan."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(AGENTS, "_plugins", None)
    monkeypatch.setattr(AGENTS, "_extra", [])
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def test_every_builtin_is_registered(folder: Path) -> None:
    assert AGENTS.names()[: len(BUILTINS)] == BUILTINS
    assert all(AGENTS.is_builtin(name) for name in BUILTINS)


def test_each_builtin_spec_makes_its_agent(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trajectory = folder / "trajectory.jsonl"
    trajectory.write_text('{"kind": "call", "tool": "t", "args": {}}\n')
    module = f"scripted_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text("def answer(turn):\n    return 'hi'\n")
    monkeypatch.syspath_prepend(str(folder))

    made: dict[str, Agent] = {
        "oracle": make_agent("oracle"),
        "human": make_agent("human"),
        "replay": make_agent(f"replay:{trajectory}"),
        "scripted": make_agent(f"scripted:{module}:answer"),
    }
    if importlib.util.find_spec("openai") is not None:
        made["openai"] = make_agent("openai:some-model?base_url=http://127.0.0.1:1/v1")
        assert isinstance(made["openai"], OpenAIAgent)
    assert isinstance(made["oracle"], OracleAgent)
    assert isinstance(made["human"], HumanAgent)
    assert isinstance(made["replay"], ReplayAgent)
    assert isinstance(made["scripted"], ScriptedAgent)
    for agent in made.values():
        assert isinstance(agent, Agent)  # the protocol: a name and async run_turn
    sys.modules.pop(module, None)


def test_an_unknown_agent_lists_the_known_ones(folder: Path) -> None:
    with pytest.raises(RegistryError) as info:
        make_agent("gpt:4")
    message = str(info.value)
    assert message.startswith("unknown agent 'gpt' (known: ")
    for name in BUILTINS:
        assert name in message


def test_arguments_the_agent_does_not_take_are_errors(folder: Path) -> None:
    with pytest.raises(RegistryError, match="the oracle agent takes no argument"):
        make_agent("oracle:x")
    with pytest.raises(RegistryError, match="agent 'human': the human agent takes no argument"):
        make_agent("human:x")


def test_without_the_openai_package_the_error_names_the_extra(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # `import openai` now fails
    with pytest.raises(RegistryError) as info:
        make_agent("openai:gpt-4o-mini?base_url=http://127.0.0.1:1/v1")
    message = str(info.value)
    assert "needs the optional `openai` package" in message
    assert "agentenv-kit[llm]" in message


def test_plugins_come_from_the_config_file_and_never_replace_builtins(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = f"agent_plugin_{uuid.uuid4().hex[:8]}"
    (folder / f"{module}.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(folder))
    (folder / "agentenv.toml").write_text(
        f'[plugins]\nagents = ["{module}:shouty", "{module}:oracle"]\n'
    )
    agent = make_agent("shouty:loud")
    assert agent.name == "shouty:loud"
    assert not AGENTS.is_builtin("shouty")
    assert "shouty" in AGENTS.names()
    assert isinstance(make_agent("oracle"), OracleAgent)  # the built-in wins
    sys.modules.pop(module, None)
