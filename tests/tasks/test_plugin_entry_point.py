"""A real, installed plugin package (tests/plugins/agentenv_test_plugin) is discovered
through the `agentenv.steps` entry point and runs in a task like a built-in.

Install it first: `pip install -e tests/plugins/agentenv_test_plugin` (CI does).
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from agentenv.registry import Registry
from agentenv.spec.task import TaskSpec
from agentenv.tasks import STEPS, Step, TaskContext, TaskError, build_steps, run_task

PLUGIN = "agentenv_test_plugin"
INSTALL = "pip install -e tests/plugins/agentenv_test_plugin"

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec(PLUGIN) is None
    or not any(ep.name == "echo_step" for ep in entry_points(group="agentenv.steps")),
    reason=f"the test plugin package is not installed (run `{INSTALL}`)",
)


@pytest.fixture(autouse=True)
def rescan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A clean folder (no agentenv.toml) and a fresh plugin scan of STEPS, both restored."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(STEPS, "_plugins", None)


def test_the_entry_point_is_declared_by_the_installed_package() -> None:
    (ep,) = [ep for ep in entry_points(group="agentenv.steps") if ep.name == "echo_step"]
    assert ep.value == "agentenv_test_plugin:EchoStep"
    assert ep.dist is not None and ep.dist.name == "agentenv-test-plugin"


def test_the_global_step_registry_finds_the_plugin() -> None:
    from agentenv_test_plugin import EchoStep

    assert "echo_step" in STEPS.names()
    assert not STEPS.is_builtin("echo_step")
    assert STEPS.get("echo_step") is EchoStep
    assert issubclass(EchoStep, Step)


def test_a_fresh_registry_on_the_group_finds_it_too() -> None:
    registry: Registry[type[Step]] = Registry(
        kind="step type", group="agentenv.steps", config_key="steps", name_of=lambda c: c.type_name
    )
    assert registry.names() == ["echo_step"]


async def test_a_task_runs_the_plugin_step(tmp_path: Path) -> None:
    spec = TaskSpec.model_validate(
        {
            "seed": {"word": "hi"},
            "steps": [
                {"id": "one", "type": "echo_step", "message": "<word>", "times": 2},
                {"id": "two", "type": "echo_step", "message": "bye"},
            ],
        }
    )
    ctx = TaskContext(task=spec, base_dir=tmp_path)
    result = await run_task(spec, ctx)  # the default registry: STEPS
    assert result.status == "passed", result.error
    assert result.steps[0].output == {"echo": ["hi", "hi"], "step": "one"}
    assert ctx.artifacts["echo"] == ["hi", "hi", "bye"]


def test_the_plugins_fields_are_checked_like_a_builtins() -> None:
    spec = TaskSpec.model_validate([{"id": "e", "type": "echo_step", "mesage": "typo"}])
    with pytest.raises(TaskError, match=r"steps\[0\]\.message: Field required"):
        build_steps(spec)
