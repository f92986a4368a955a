"""Harbor (Terminal-Bench) task directories as our tasks: the example's conversion, the
environment built from its Dockerfile, and what is refused (with the Dockerfile's line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentenv.sandbox import BwrapProvider
from agentenv.spec.errors import DocumentError
from agentenv.tasks.harbor import build_environment, harbor_task_spec, is_harbor_task

_NO_BWRAP = BwrapProvider.unavailable()
pytestmark = pytest.mark.skipif(
    _NO_BWRAP is not None, reason=f"building a Harbor environment needs bwrap: {_NO_BWRAP}"
)

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "harbor" / "word-stats"
TEST_SH = "#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n"


def harbor_task(
    root: Path, dockerfile: str | None, *, tests: bool = True, files: dict[str, str] | None = None
) -> Path:
    """A minimal Harbor task directory."""
    (root / "environment").mkdir(parents=True)
    (root / "instruction.md").write_text("Write /app/out.txt.\n")
    (root / "task.toml").write_text('version = "1.0"\n\n[verifier]\ntimeout_sec = 30.0\n')
    if dockerfile is not None:
        (root / "environment" / "Dockerfile").write_text(dockerfile)
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if tests:
        (root / "tests").mkdir()
        (root / "tests" / "test.sh").write_text(TEST_SH)
    return root


async def refusal(task: Path) -> str:
    with pytest.raises(DocumentError) as info:
        await harbor_task_spec(task)
    return str(info.value)


async def test_the_example_converts_to_our_steps_and_a_one_call_solution() -> None:
    assert is_harbor_task(EXAMPLE)
    spec = await harbor_task_spec(EXAMPLE)
    assert [s.type for s in spec.steps] == [
        "deploy_env",
        "deploy_agent",
        "prompt_agent",
        "run_container_unit_tests_verifier",
    ]
    by_id = {s.id: s for s in spec.steps}
    assert by_id["solve"].params["prompt"] == (EXAMPLE / "instruction.md").read_text()
    assert by_id["solve"].timeout_seconds == 300.0  # task.toml's [agent] timeout_sec
    assert by_id["tests"].params == {
        "env_id": "task",
        "load": {str(EXAMPLE / "tests"): "/tests"},  # the agent never sees them
        "command": "bash /tests/test.sh",
        "reward_path": "/logs/verifier/reward.txt",
        "timeout_sec": 120.0,  # task.toml's [verifier] timeout_sec
    }
    solution = spec.solution["main"]
    assert len(solution.calls) == 1
    call = solution.calls[0]
    assert call.tool == "bash"
    assert call.args == {"command": (EXAMPLE / "solution" / "solve.sh").read_text()}
    assert spec.metadata["harbor"]["difficulty"] == "easy"  # task.toml's [metadata]


def test_tasks_of_a_harbor_folder_names_it_harbor() -> None:
    from agentenv.cli.run_command import tasks_of

    assert [t.name for t in tasks_of(str(EXAMPLE))] == ["harbor/word-stats"]
    assert "harbor/word-stats" in [t.name for t in tasks_of(str(EXAMPLE.parent))]


async def test_the_dockerfile_builds_the_tree(tmp_path: Path) -> None:
    dockerfile = (
        "FROM ubuntu:24.04\n"
        "WORKDIR /app\n"
        "ENV GREETING=hello\n"
        "COPY data/ /app/data/\n"
        "COPY one.txt ./\n"
        "RUN mkdir -p out \\\n"
        '    && echo "$GREETING from $(pwd)" > out/made.txt\n'
    )
    files = {"environment/data/a.txt": "a\n", "environment/one.txt": "one\n"}
    build = await build_environment(harbor_task(tmp_path / "t", dockerfile, files=files))
    assert build.workdir == "/app"
    assert build.env == {"GREETING": "hello"}
    tree = {
        p.relative_to(build.tree).as_posix(): p.read_text()
        for p in build.tree.rglob("*")
        if p.is_file()
    }
    assert tree == {"data/a.txt": "a\n", "one.txt": "one\n", "out/made.txt": "hello from /app\n"}


async def test_copy_from_a_build_stage_is_refused_naming_its_line(tmp_path: Path) -> None:
    dockerfile = (
        "FROM python:3.12 AS builder\n"
        "RUN true\n"
        "\n"
        "FROM python:3.12-slim\n"
        "WORKDIR /app\n"
        "COPY --from=builder /out /app/out\n"
    )
    message = await refusal(harbor_task(tmp_path / "t", dockerfile))
    assert "Dockerfile: line 6:" in message
    assert "COPY --from=builder /out /app/out" in message
    assert "need Docker" in message


async def test_installing_a_package_the_host_lacks_is_refused_naming_it(tmp_path: Path) -> None:
    dockerfile = (
        "FROM ubuntu:24.04\n"
        "WORKDIR /app\n"
        "RUN apt-get update && \\\n"
        "    apt-get install -y some-package-that-does-not-exist-xyz\n"
    )
    message = await refusal(harbor_task(tmp_path / "t", dockerfile))
    assert "line 3:" in message  # a continued line is named by its first line
    assert "installs some-package-that-does-not-exist-xyz, which this machine lacks" in message


async def test_a_failing_run_is_refused_with_its_exit_code(tmp_path: Path) -> None:
    dockerfile = "FROM ubuntu:24.04\nWORKDIR /app\nRUN echo broken >&2; exit 3\n"
    message = await refusal(harbor_task(tmp_path / "t", dockerfile))
    assert "line 3:" in message
    assert "failed here (exit 3)" in message
    assert "broken" in message


async def test_run_false_is_refused(tmp_path: Path) -> None:
    message = await refusal(harbor_task(tmp_path / "t", "FROM x\nWORKDIR /app\nRUN false\n"))
    assert "line 3: 'RUN false': failed here (exit 1)" in message


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("ADD https://example.com/data.tar.gz /app/", "ADD of a URL needs the network"),
        ("COPY data.txt /etc/data.txt", "only files under the WORKDIR (/app) become the tree"),
        ("COPY ../secret.txt /app/", "is outside the build context"),
        ("COPY nothere.txt /app/", "no 'nothere.txt' in environment/"),
    ],
)
async def test_what_cannot_be_built_here_is_refused_naming_its_line(
    tmp_path: Path, line: str, why: str
) -> None:
    files = {"environment/data.txt": "d\n", "secret.txt": "s\n"}
    task = harbor_task(tmp_path / "t", f"FROM x\nWORKDIR /app\n\n{line}\n", files=files)
    message = await refusal(task)
    assert f"line 4: {line!r}" in message
    assert why in message


async def test_a_task_without_tests_is_refused(tmp_path: Path) -> None:
    message = await refusal(harbor_task(tmp_path / "t", "FROM x\nWORKDIR /app\n", tests=False))
    assert "tests/test.sh" in message
    assert "a Harbor task needs tests/test.sh" in message


async def test_the_rest_of_a_run_line_that_installs_present_packages_still_runs(
    tmp_path: Path,
) -> None:
    dockerfile = (
        "FROM ubuntu:24.04\nWORKDIR /app\n"
        "RUN apt-get install -y bash && mkdir -p /app/out && echo made > /app/out/f.txt\n"
    )
    build = await build_environment(harbor_task(tmp_path / "t", dockerfile))
    assert (build.tree / "out" / "f.txt").read_text() == "made\n"


async def test_an_imported_task_is_a_bundle_that_runs_and_refuses_a_second_import(
    tmp_path: Path,
) -> None:
    from agentenv.agents import make_agent
    from agentenv.tasks import run_task
    from agentenv.tasks.bundle import Task
    from agentenv.tasks.harbor import import_harbor_task

    bundle = tmp_path / "bundle"
    written = await import_harbor_task(EXAMPLE, bundle)
    assert written == bundle / "tasks" / "word-stats.yaml"
    assert (bundle / "envs" / "word-stats" / "tree" / "data" / "extra.txt").is_file()
    assert (bundle / "artifacts" / "word-stats-tests" / "test.sh").is_file()
    task = Task.load(written)
    result = await run_task(task.spec, task.context(agent_factory=lambda r: make_agent("oracle")))
    assert result.passed and result.score == 1.0
    idle = await run_task(task.spec, task.context(agent_factory=lambda r: make_agent("noop")))
    assert not idle.passed and idle.score == 0.0
    with pytest.raises(DocumentError, match="already has a task or env of this name"):
        await import_harbor_task(EXAMPLE, bundle)
