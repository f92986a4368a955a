"""The sandbox verifiers: verify_sandbox (upstream's four criterion kinds and its score
aggregators) and run_container_unit_tests_verifier (a reward file or the exit code), run as
tasks of a bundle written to tmp_path."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tests.tasks.sandbox_bundles import BOX, NO_BWRAP, run, step, write_bundle

from agentenv.tasks import TaskResult

pytestmark = pytest.mark.skipif(
    NO_BWRAP is not None, reason=f"bwrap is not available here: {NO_BWRAP}"
)

REWARD = "/logs/verifier/reward.txt"
LOAD = {
    "id": "load",
    "type": "load_artifact",
    "sandbox_name": "box",
    "artifact_id": "greeting",
    "destination_path": "/app/greeting",
    "depends_on": ["box"],
}
GREETING = {"greeting": {"hello.txt": "well, hello there\n", "other.txt": "hello\n"}}

WORKSPACE_ENV = """\
apiVersion: agentenv/v1
kind: Environment
name: ws
roles: [{name: agent}]
workspace:
  seed:
    files:
      "README.md": "the seed\\n"
      "src/app.py": "print('hi')\\n"
  sandbox: {provider: bwrap, workdir: /app}
"""


def verify(criteria: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    return {
        "id": "v",
        "type": "verify_sandbox",
        "sandbox_name": "box",
        "criteria": criteria,
        "depends_on": ["load"],
        **fields,
    }


def unit_tests(**fields: Any) -> dict[str, Any]:
    return {
        "id": "u",
        "type": "run_container_unit_tests_verifier",
        "sandbox_name": "box",
        "depends_on": ["box"],
        **fields,
    }


async def verified(tmp_path: Path, check: dict[str, Any]) -> tuple[TaskResult, list[Any]]:
    """Run box + greeting + `check`; the result and the verifier's rows."""
    _, result = await run(write_bundle(tmp_path / "b", [BOX, LOAD, check], GREETING))
    record = step(result, check["id"])
    assert record.status == "succeeded", record.error
    return result, result.scores[check["id"]].details["results"]


EXISTS = {"type": "probe_file_exists", "paths": ["/app/greeting/hello.txt"]}
ABSENT = {"type": "probe_file_exists", "paths": ["/app/greeting/absent.txt"]}


# -- verify_sandbox ------------------------------------------------------------------------


async def test_an_unhandled_criterion_type_is_a_skipped_row_not_counted(tmp_path: Path) -> None:
    judge = {"type": "llm_judge", "criterion": "is it polite?", "weight": 3}
    result, rows = await verified(tmp_path, verify([EXISTS, judge]))
    assert result.scores["v"].score == 1.0  # all_pass over the one row that counts
    assert result.status == "passed"
    skipped = rows[1]
    assert skipped["skipped"] is True
    assert "llm_judge" in skipped["justification"]
    assert "result" not in skipped
    assert rows[0]["skipped"] is False


async def test_only_unhandled_criteria_score_zero(tmp_path: Path) -> None:
    result, rows = await verified(tmp_path, verify([{"type": "llm_judge"}]))
    assert [r["skipped"] for r in rows] == [True]
    assert result.scores["v"].score == 0.0


async def test_weighted_average_takes_a_negative_weight_off(tmp_path: Path) -> None:
    criteria = [
        {**EXISTS, "weight": 1},  # passes
        {**ABSENT, "weight": 1},  # fails
        {**ABSENT, "weight": -0.5},  # a penalty, applied: it failed
        {**EXISTS, "weight": -4},  # a penalty not applied: it passed
        {"type": "llm_judge", "weight": 10},  # skipped: not in the sum
    ]
    result, _ = await verified(tmp_path, verify(criteria, score_aggregator="weighted_average"))
    assert result.scores["v"].score == pytest.approx((1 * 1 + 0 * 1 - 0.5) / 2)
    assert result.scores["v"].passed is False
    assert result.status == "failed"


async def test_any_pass_passes_with_one_row(tmp_path: Path) -> None:
    result, rows = await verified(tmp_path, verify([ABSENT, EXISTS], score_aggregator="any_pass"))
    assert [r["result"] for r in rows] == [False, True]
    assert result.scores["v"].score == 1.0


async def test_all_pass_fails_with_one_failing_row(tmp_path: Path) -> None:
    result, _ = await verified(tmp_path, verify([EXISTS, ABSENT]))
    assert result.scores["v"].score == 0.0
    assert result.status == "failed"


async def test_probe_file_contains_is_a_regex_search_of_the_first_path(tmp_path: Path) -> None:
    def contains(expected: str, paths: list[str]) -> dict[str, Any]:
        return {"type": "probe_file_contains", "paths": paths, "expected": expected}

    criteria = [
        contains("h.l+o", ["hello.txt"]),  # a regex, searched (not matched from the start)
        contains("^hello", ["hello.txt"]),  # it starts "well, "
        contains("h.l+o", ["missing.txt", "hello.txt"]),  # only the first path is read
        contains("^well", ["other.txt", "hello.txt"]),  # other.txt does not start so
        contains("(unclosed", ["hello.txt"]),  # not a regex: the criterion fails
    ]
    _, rows = await verified(tmp_path, verify(criteria, base_dir="/app/greeting"))
    assert [r["result"] for r in rows] == [True, False, False, False, False]
    assert "cannot read 'missing.txt'" in rows[2]["justification"]
    assert "not a regular expression" in rows[4]["justification"]


async def test_bash_cmd_succeeds_runs_in_base_dir(tmp_path: Path) -> None:
    here = 'test "$(pwd)" = /app/greeting && test -f hello.txt'
    criteria = [
        {"type": "bash_cmd_succeeds", "bash_cmd": here},
        {"type": "bash_cmd_succeeds", "bash_cmd": "exit 7"},
    ]
    _, rows = await verified(tmp_path, verify(criteria, base_dir="/app/greeting"))
    assert [r["result"] for r in rows] == [True, False]
    assert rows[1]["justification"].startswith("exit=7")


async def test_relative_probe_paths_are_from_base_dir(tmp_path: Path) -> None:
    criteria = [
        {"type": "probe_file_exists", "paths": ["hello.txt", "other.txt"]},
        {"type": "probe_dir_exists", "paths": ["."]},
        {"type": "probe_dir_exists", "paths": ["hello.txt"]},  # a file is not a folder
    ]
    _, rows = await verified(tmp_path, verify(criteria, base_dir="/app/greeting"))
    assert [r["result"] for r in rows] == [True, True, False]


async def test_a_path_outside_the_roots_fails_the_criterion_not_the_run(tmp_path: Path) -> None:
    criteria = [
        {"type": "probe_file_exists", "paths": ["/etc/passwd"]},
        {"type": "probe_file_contains", "paths": ["/etc/passwd"], "expected": "root"},
        {"type": "probe_file_exists", "paths": ["../../etc/passwd"]},
        {"type": "probe_dir_exists", "paths": ["/tmp"]},
        EXISTS,
    ]
    result, rows = await verified(tmp_path, verify(criteria, score_aggregator="weighted_average"))
    assert [r["result"] for r in rows] == [False, False, False, False, True]
    assert "is not under its folders" in rows[1]["justification"]
    assert result.status == "failed"  # a low score, not an error
    assert result.scores["v"].score == pytest.approx(1 / 5)


async def test_verify_sandbox_with_env_id_probes_the_envs_tree_and_leaves_it(
    tmp_path: Path,
) -> None:
    steps = [
        {"id": "env", "type": "deploy_env", "env_id": "ws", "env": "ws"},
        {
            "id": "v",
            "type": "verify_sandbox",
            "env_id": "ws",
            "depends_on": ["env"],
            "criteria": [
                {"type": "probe_file_contains", "paths": ["README.md"], "expected": "seed"},
                {"type": "probe_file_exists", "paths": ["/app/src/app.py"]},
                {"type": "bash_cmd_succeeds", "bash_cmd": "python3 src/app.py | grep -qx hi"},
                {"type": "bash_cmd_succeeds", "bash_cmd": "echo x > made-by-verifier.txt"},
            ],
        },
    ]
    task = write_bundle(tmp_path / "b", steps, envs={"ws": WORKSPACE_ENV})
    ctx, result = await run(task, tmp_path / "run")
    assert result.status == "passed", result.scores["v"].details["results"]
    paths = {r["path"] for r in ctx.envs["ws"].snapshot().to_dict()["files"]}
    assert "made-by-verifier.txt" not in paths  # a verifier cannot change the env's state
    assert {"README.md", "src/app.py"} <= paths


# -- run_container_unit_tests_verifier -------------------------------------------------------


async def test_a_reward_of_half_scores_half_and_does_not_pass(tmp_path: Path) -> None:
    write = f"mkdir -p /logs/verifier && echo 0.5 > {REWARD}"
    task = write_bundle(tmp_path / "b", [BOX, unit_tests(command=write, reward_path=REWARD)])
    _, result = await run(task)
    score = result.scores["u"]
    assert score.score == 0.5
    assert score.passed is False
    assert result.status == "failed"
    assert score.details["extracted_files"] == {REWARD: 0.5}


async def test_the_reward_decides_not_the_exit_code(tmp_path: Path) -> None:
    write = f"mkdir -p /logs/verifier && echo 1 > {REWARD}; exit 3"
    task = write_bundle(tmp_path / "b", [BOX, unit_tests(command=write, reward_path=REWARD)])
    _, result = await run(task)
    assert result.scores["u"].score == 1.0
    assert result.scores["u"].details["exit_code"] == 3


async def test_a_reward_left_before_the_run_is_deleted_first(tmp_path: Path) -> None:
    steps = [
        BOX,
        {
            "id": "plant",
            "type": "load_artifact",
            "sandbox_name": "box",
            "artifact_id": "planted",
            "destination_path": "/logs/verifier",
            "depends_on": ["box"],
        },
        {**unit_tests(command="true", reward_path=REWARD), "depends_on": ["plant"]},
    ]
    task = write_bundle(tmp_path / "b", steps, {"planted": {"reward.txt": "1\n"}})
    _, result = await run(task)
    assert step(result, "plant").output["files"] == [REWARD]
    score = result.scores["u"]
    assert score.score == 0.0
    assert score.passed is False
    assert "missing" in score.details["results"][0]["message"]


@pytest.mark.parametrize(("command", "expected"), [("true", 1.0), ("exit 3", 0.0)])
async def test_without_reward_path_the_exit_code_decides(
    tmp_path: Path, command: str, expected: float
) -> None:
    task = write_bundle(tmp_path / "b", [BOX, unit_tests(command=command)])
    _, result = await run(task)
    assert result.scores["u"].score == expected
    assert result.scores["u"].passed is (expected == 1.0)


async def test_a_timeout_fails(tmp_path: Path) -> None:
    task = write_bundle(tmp_path / "b", [BOX, unit_tests(command="sleep 30", timeout_sec=1)])
    _, result = await run(task)
    score = result.scores["u"]
    assert score.passed is False
    assert score.score == 0.0
    assert score.details["timed_out"] is True


async def test_a_timeout_fails_even_after_a_reward_was_written(tmp_path: Path) -> None:
    command = f"mkdir -p /logs/verifier && echo 1 > {REWARD}; sleep 30"
    step_ = unit_tests(command=command, reward_path=REWARD, timeout_sec=1)
    _, result = await run(write_bundle(tmp_path / "b", [BOX, step_]))
    assert result.scores["u"].details["timed_out"] is True
    assert result.scores["u"].passed is False


async def test_a_seed_placeholder_is_substituted(tmp_path: Path) -> None:
    command = "test <word> = plain"
    task = write_bundle(tmp_path / "b", [BOX, unit_tests(command=command)])
    _, result = await run(task, seed={"word": "plain"})
    assert result.scores["u"].passed is True, result.scores["u"].details


async def test_a_seed_placeholder_is_substituted_shell_quoted(tmp_path: Path) -> None:
    phrase = "it's a b; echo injected"
    command = "printf '%s' <phrase> > /output/got.txt"
    step_ = unit_tests(command=command, result_paths=["/output/got.txt"])
    _, result = await run(write_bundle(tmp_path / "b", [BOX, step_]), seed={"phrase": phrase})
    details = result.scores["u"].details
    assert details["exit_code"] == 0, details
    assert details["extracted_files"]["/output/got.txt"] == phrase


async def test_env_vars_reach_the_command(tmp_path: Path) -> None:
    command = 'test "$GREETING" = "hi there" && test "$EMPTYISH" = "-"'
    step_ = unit_tests(command=command, env_vars={"GREETING": "hi there", "EMPTYISH": "-"})
    _, result = await run(write_bundle(tmp_path / "b", [BOX, step_]))
    assert result.scores["u"].passed is True, result.scores["u"].details


async def test_a_bad_env_var_name_is_refused(tmp_path: Path) -> None:
    step_ = unit_tests(command="true", env_vars={"NOT A NAME": "x"})
    _, result = await run(write_bundle(tmp_path / "b", [BOX, step_]))
    assert result.status == "error"
    assert "'NOT A NAME' is not a variable name" in (result.error or "")


async def test_setup_commands_run_first_and_a_failing_one_fails_the_step(tmp_path: Path) -> None:
    good = unit_tests(
        command="test -f /tests/ready", setup_commands=["mkdir -p /tests", "touch /tests/ready"]
    )
    _, result = await run(write_bundle(tmp_path / "good", [BOX, good]))
    assert result.scores["u"].passed is True
    bad = unit_tests(command="true", setup_commands=["echo nope >&2; exit 4"])
    _, result = await run(write_bundle(tmp_path / "bad", [BOX, bad]))
    record = step(result, "u")
    assert record.status == "failed"
    assert "failed (exit 4)" in record.error
    assert "nope" in record.error


async def test_result_paths_are_read_back_as_json_or_text(tmp_path: Path) -> None:
    command = "echo '{\"passed\": 3}' > /output/r.json; echo plain > /output/r.txt"
    paths = ["/output/r.json", "/output/r.txt", "/output/none.txt"]
    step_ = unit_tests(command=command, result_paths=paths)
    _, result = await run(write_bundle(tmp_path / "b", [BOX, step_]))
    assert result.scores["u"].details["extracted_files"] == {
        "/output/r.json": {"passed": 3},
        "/output/r.txt": "plain\n",
        "/output/none.txt": None,
    }


async def test_load_puts_artifacts_in_the_sandbox_before_the_command(tmp_path: Path) -> None:
    test_sh = (
        f"mkdir -p /logs/verifier\ngrep -q hello /app/greeting/hello.txt && echo 1 > {REWARD}\n"
    )
    step_ = {
        **unit_tests(command="bash /tests/test.sh", reward_path=REWARD, load={"grader": "/tests"}),
        "depends_on": ["load"],
    }
    arts = {**GREETING, "grader": {"test.sh": test_sh}}
    _, result = await run(write_bundle(tmp_path / "b", [BOX, LOAD, step_], arts))
    assert result.scores["u"].score == 1.0, result.scores["u"].details


async def test_unit_tests_with_env_id_run_over_the_envs_tree(tmp_path: Path) -> None:
    steps = [
        {"id": "env", "type": "deploy_env", "env_id": "ws", "env": "ws"},
        {
            "id": "u",
            "type": "run_container_unit_tests_verifier",
            "env_id": "ws",
            "command": 'test "$(python3 /app/src/app.py)" = hi && test -f README.md',
            "depends_on": ["env"],
        },
    ]
    _, result = await run(write_bundle(tmp_path / "b", steps, envs={"ws": WORKSPACE_ENV}))
    assert result.status == "passed", result.scores["u"].details
