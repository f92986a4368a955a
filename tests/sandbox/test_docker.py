"""The docker sandbox against a real daemon, where one answers; skipped here with the
reason otherwise (no Docker engine runs on the CI machines)."""

from __future__ import annotations

import asyncio

import pytest

from agentenv.sandbox import DockerProvider, SandboxError, sandbox_provider

REASON = DockerProvider.unavailable()


def test_without_a_daemon_the_provider_says_why() -> None:
    if REASON is None:
        pytest.skip("a Docker daemon answers here")
    with pytest.raises(SandboxError, match="the docker sandbox cannot run here"):
        sandbox_provider("docker")
    with pytest.raises(SandboxError, match="docker"):
        DockerProvider().create()


@pytest.mark.skipif(REASON is not None, reason=f"docker: {REASON}")
def test_commands_run_in_the_container_with_the_workspace_bound_in() -> None:
    with DockerProvider().create(workdir="/app") as box:
        (box.workspace / "seed.txt").write_text("seed\n")
        result = asyncio.run(box.exec("pwd; cat seed.txt; echo out > made.txt"))
        assert result.ok, result.stderr
        assert result.stdout.split() == ["/app", "seed"]
        assert (box.workspace / "made.txt").read_text() == "out\n"
