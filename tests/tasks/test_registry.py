"""The step registry: built-ins, entry-point plugins, `agentenv.toml` plugins, and clashes.

Entry points are faked by replacing `agentenv.registry.entry_points`; plugin modules are
written to tmp_path and put on sys.path. The global STEPS is only used with its plugin
cache saved and restored by monkeypatch.
"""

from __future__ import annotations

import itertools
import textwrap
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from agentenv.registry import Registry, RegistryError
from agentenv.spec.task import TaskSpec
from agentenv.tasks import STEPS, Step, TaskContext, run_task
from agentenv.tasks.steps.deploy import DeployEnv

GROUP = "agentenv.tests.steps"
_counter = itertools.count()


class BuiltinHello(Step):
    type_name = "hello"

    async def run(self, ctx: TaskContext) -> Any:
        return {"from": "builtin"}


def fresh_registry() -> Registry[type[Step]]:
    return Registry(
        kind="step type", group=GROUP, config_key="steps", name_of=lambda c: c.type_name
    )


def plugin_module(folder: Path, monkeypatch: pytest.MonkeyPatch, type_name: str) -> str:
    """Write a module with one step class `Plugin` of this type name; return its name."""
    name = f"agentenv_registry_plugin_{next(_counter)}"
    (folder / f"{name}.py").write_text(
        textwrap.dedent(
            f"""
            from agentenv.tasks import Step


            class Plugin(Step):
                type_name = {type_name!r}

                async def run(self, ctx):
                    return {{"from": {name!r}}}
            """
        )
    )
    monkeypatch.syspath_prepend(str(folder))
    return name


def fake_entry_points(monkeypatch: pytest.MonkeyPatch, *eps: tuple[str, str]) -> None:
    points = [EntryPoint(name=n, value=v, group=GROUP) for n, v in eps]

    def entry_points(group: str) -> list[EntryPoint]:
        return [p for p in points if p.group == group]

    monkeypatch.setattr("agentenv.registry.entry_points", entry_points)


def write_config(folder: Path, refs: list[str]) -> None:
    lines = ", ".join(f'"{r}"' for r in refs)
    (folder / "agentenv.toml").write_text(f"[plugins]\nsteps = [{lines}]\n")


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty current folder (no agentenv.toml above it but what a test writes)."""
    folder = tmp_path / "work"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


# -- built-ins win ----------------------------------------------------------------------


def test_a_builtin_wins_over_an_entry_point_of_the_same_name(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin_module(workdir, monkeypatch, "hello")
    fake_entry_points(monkeypatch, ("hello", f"{module}:Plugin"), ("other", f"{module}:Plugin"))
    registry = fresh_registry()
    registry.add_builtin(BuiltinHello)
    assert registry.get("hello") is BuiltinHello
    assert registry.names().count("hello") == 1
    assert registry.is_builtin("hello")
    assert registry.get("other").__module__ == module
    assert not registry.is_builtin("other")


def test_a_builtin_wins_over_a_config_plugin_of_the_same_name(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin_module(workdir, monkeypatch, "hello")
    write_config(workdir, [f"{module}:Plugin"])
    registry = fresh_registry()
    registry.add_builtin(BuiltinHello)
    assert registry.get("hello") is BuiltinHello
    assert registry.names() == ["hello"]


def test_the_global_steps_keep_their_builtins_against_a_plugin(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin_module(workdir, monkeypatch, "deploy_env")
    write_config(workdir, [f"{module}:Plugin"])
    monkeypatch.setattr(STEPS, "_plugins", None)  # rescan here; restored after the test
    assert STEPS.get("deploy_env") is DeployEnv


# -- clashes ----------------------------------------------------------------------------


def test_two_entry_points_claiming_one_name_is_an_error_naming_both(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = plugin_module(workdir, monkeypatch, "clash")
    second = plugin_module(workdir, monkeypatch, "clash")
    fake_entry_points(monkeypatch, ("clash", f"{first}:Plugin"), ("clash", f"{second}:Plugin"))
    registry = fresh_registry()
    with pytest.raises(RegistryError) as info:
        registry.get("clash")
    message = str(info.value)
    assert "two plugins claim the step type 'clash'" in message
    assert f"{first}:Plugin" in message and f"{second}:Plugin" in message


def test_two_config_plugins_claiming_one_name_is_an_error_naming_both(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = plugin_module(workdir, monkeypatch, "clash")
    second = plugin_module(workdir, monkeypatch, "clash")
    write_config(workdir, [f"{first}:Plugin", f"{second}:Plugin"])
    with pytest.raises(RegistryError) as info:
        fresh_registry().names()
    message = str(info.value)
    assert f"{first}:Plugin" in message and f"{second}:Plugin" in message


def test_an_entry_point_and_a_config_plugin_claiming_one_name_clash(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = plugin_module(workdir, monkeypatch, "clash")
    second = plugin_module(workdir, monkeypatch, "clash")
    fake_entry_points(monkeypatch, ("clash", f"{first}:Plugin"))
    write_config(workdir, [f"{second}:Plugin"])
    with pytest.raises(RegistryError) as info:
        fresh_registry().get("clash")
    message = str(info.value)
    assert "entry point" in message and "agentenv.toml" in message
    assert f"{first}:Plugin" in message and f"{second}:Plugin" in message


def test_the_same_plugin_from_an_entry_point_and_the_config_is_no_clash(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin_module(workdir, monkeypatch, "same")
    fake_entry_points(monkeypatch, ("same", f"{module}:Plugin"))
    write_config(workdir, [f"{module}:Plugin"])
    assert fresh_registry().get("same").__module__ == module


# -- agentenv.toml ----------------------------------------------------------------------


async def test_a_config_plugin_adds_a_step_type_a_task_can_use(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin_module(workdir, monkeypatch, "greet")
    write_config(workdir, [f"{module}:Plugin"])
    registry = fresh_registry()
    assert "greet" in registry.names()
    assert not registry.is_builtin("greet")
    spec = TaskSpec.model_validate([{"id": "g", "type": "greet"}])
    result = await run_task(spec, TaskContext(task=spec, base_dir=workdir), registry=registry)
    assert result.status == "passed"
    assert result.steps[0].output == {"from": module}


async def test_a_config_plugin_reaches_the_global_steps(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin_module(workdir, monkeypatch, "greet_global")
    write_config(workdir, [f"{module}:Plugin"])
    monkeypatch.setattr(STEPS, "_plugins", None)  # rescan here; restored after the test
    assert "greet_global" in STEPS.names()
    spec = TaskSpec.model_validate([{"id": "g", "type": "greet_global"}])
    result = await run_task(spec, TaskContext(task=spec, base_dir=workdir))
    assert result.steps[0].output == {"from": module}


def test_the_config_is_found_in_a_parent_folder(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin_module(workdir, monkeypatch, "from_parent")
    write_config(workdir, [f"{module}:Plugin"])
    deeper = workdir / "a" / "b"
    deeper.mkdir(parents=True)
    monkeypatch.chdir(deeper)
    assert "from_parent" in fresh_registry().names()


def test_add_references_adds_plugins_without_a_config(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = plugin_module(workdir, monkeypatch, "added")
    registry = fresh_registry()
    assert registry.names() == []
    registry.add_references([f"{module}:Plugin"])
    assert registry.get("added").__module__ == module


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('[plugins]\nsteps = ["no_colon_here"]\n', "expected 'module:Object'"),
        ('[plugins]\nsteps = ["no_such_module_xyz:Thing"]\n', "cannot be imported"),
        ('[plugins]\nsteps = "not-a-list"\n', "must be a list of 'module:Object'"),
        ("[plugins\n", "agentenv.toml"),
    ],
)
def test_a_bad_config_is_a_clear_error(workdir: Path, config: str, expected: str) -> None:
    (workdir / "agentenv.toml").write_text(config)
    with pytest.raises(RegistryError, match=expected.replace("(", r"\(")):
        fresh_registry().names()


def test_an_unknown_name_lists_what_exists(workdir: Path) -> None:
    registry = fresh_registry()
    registry.add_builtin(BuiltinHello)
    with pytest.raises(RegistryError, match=r"unknown step type 'nope' \(known: hello\)"):
        registry.get("nope")


def test_a_plugin_that_fails_to_load_names_its_origin(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_entry_points(monkeypatch, ("broken", "no_such_module_abc:Thing"))
    with pytest.raises(RegistryError, match=r"'broken' from entry point .* failed to load"):
        fresh_registry().get("broken")
