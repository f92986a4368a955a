"""Verifier steps run inside whole tasks: deploy an env and an agent, prompt it, grade."""

from __future__ import annotations

import importlib.util
import json
import socket
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request

from agentenv.agents import make_agent
from agentenv.agents.base import AgentTurn
from agentenv.env.environment import Environment
from agentenv.spec.task import TaskSpec
from agentenv.tasks import STEPS, TaskContext, TaskError, TaskResult, build_steps, run_task

ENV = """
apiVersion: agentenv/v1
kind: Environment
name: bank
roles: [{name: agent}, {name: supervisor}]
default_role: agent
state:
  accounts: {}
  audit: {}
seed:
  accounts:
    - {id: a1, owner: Ada, balance: 100}
    - {id: a2, owner: Bob, balance: 50}
tools:
  - module: tools.py
  - name: get_account
    crud: {collection: accounts, op: get}
"""

TOOLS = '''
from agentenv import ToolContext, ToolError, tool


@tool
def transfer(ctx: ToolContext, source: str, target: str, amount: int) -> dict:
    """Move money between accounts."""
    src = ctx.state.require("accounts", source)
    if src["balance"] < amount:
        raise ToolError("insufficient funds")
    dst = ctx.state.require("accounts", target)
    ctx.state.update("accounts", source, {"balance": src["balance"] - amount})
    ctx.state.update("accounts", target, {"balance": dst["balance"] + amount})
    ctx.state.put("audit", {"id": f"t{ctx.state.count('audit') + 1}", "amount": amount})
    return {"moved": amount}


@tool(roles=["supervisor"])
def freeze(ctx: ToolContext, account_id: str) -> dict:
    """Freeze an account (supervisors only)."""
    return ctx.state.update("accounts", account_id, {"frozen": True})
'''

MOVE = {"tool": "transfer", "args": {"source": "a1", "target": "a2", "amount": 30}}
ANSWER = '{"a1": 70, "a2": 80}'

OUTCOME = {
    "id": "outcome",
    "type": "env_outcome_verifier",
    "checks": [
        {"collection": "accounts", "key": "a1", "field": "balance", "equals": 70},
        {"collection": "accounts", "key": "a2", "field": "balance", "equals": 80},
        {"collection": "audit", "count": 1},
    ],
    "gold_replay": {"prompt_id": "p1"},
    "trajectory": {
        "prompt_id": "p1",
        "checks": [
            {"called": "transfer", "args": {"amount": 30}},
            {"max_denied": 0},
            {"max_calls": 3},
        ],
    },
}
RESPONSE = {
    "id": "response",
    "type": "agent_prompt_response_verifier",
    "prompt_id": "p1",
    "checks": [{"json_field": "a1", "equals": 70}, {"not_contains": "error", "ignore_case": True}],
}


@pytest.fixture
def env_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bank"
    folder.mkdir()
    (folder / "env.yaml").write_text(textwrap.dedent(ENV))
    (folder / "tools.py").write_text(textwrap.dedent(TOOLS))
    return folder


def _task(
    env_dir: Path,
    verifiers: list[dict[str, Any]],
    *,
    calls: list[dict[str, Any]] | None = None,
    response: str = ANSWER,
    extra_envs: int = 0,
) -> TaskSpec:
    steps: list[dict[str, Any]] = [
        {"id": "env", "type": "deploy_env", "env_id": "bank", "env": str(env_dir)}
    ]
    for i in range(extra_envs):
        steps.append(
            {"id": f"env{i + 2}", "type": "deploy_env", "env_id": f"bank{i + 2}", "env": "bank"}
        )
    steps += [
        {"id": "agent", "type": "deploy_agent", "agent_name": "teller", "role": "agent"},
        {
            "id": "ask",
            "type": "prompt_agent",
            "prompt_id": "p1",
            "prompt": "Move 30 from a1 to a2, then give both balances as JSON.",
        },
        *verifiers,
    ]
    solution = {"p1": {"calls": [MOVE] if calls is None else calls, "response": response}}
    return TaskSpec.model_validate({"name": "move-money", "steps": steps, "solution": solution})


async def _run(spec: TaskSpec, tmp_path: Path, agent: Any = None) -> tuple[TaskResult, TaskContext]:
    ctx = TaskContext(
        task=spec,
        base_dir=tmp_path,
        agent_factory=lambda req: agent if agent is not None else make_agent("oracle"),
    )
    return await run_task(spec, ctx), ctx


class IdleAgent:
    """Answers without doing anything."""

    name = "idle"

    async def run_turn(self, turn: AgentTurn) -> str:
        return "I did nothing."


class ClumsyAgent:
    """Tries a forbidden tool, then moves the wrong amount."""

    name = "clumsy"

    async def run_turn(self, turn: AgentTurn) -> str:
        await turn.tools.call("freeze", {"account_id": "a1"})
        await turn.tools.call("transfer", {"source": "a1", "target": "a2", "amount": 20})
        return '{"a1": 80, "a2": 70}'


def _step(result: TaskResult, sid: str):
    return next(s for s in result.steps if s.id == sid)


# -- the oracle passes, others do not ---------------------------------------------------------


async def test_the_oracle_scores_one(env_dir: Path, tmp_path: Path) -> None:
    spec = _task(env_dir, [OUTCOME, RESPONSE, {"id": "total", "type": "aggregate_verifiers"}])
    result, _ = await _run(spec, tmp_path)
    assert result.status == "passed", result.error
    assert result.score == 1.0 and result.passed
    assert set(result.scores) == {"outcome", "response", "total"}
    outcome = result.scores["outcome"]
    assert set(outcome.details["parts"]) == {"state", "gold_replay", "trajectory"}
    assert outcome.details["parts"]["gold_replay"]["details"]["role"] == "agent"
    assert result.scores["total"].details["scores"] == {"outcome": 1.0, "response": 1.0}
    assert _step(result, "outcome").output["score"] == 1.0


async def test_an_empty_solution_fails_the_state_checks(env_dir: Path, tmp_path: Path) -> None:
    spec = _task(env_dir, [OUTCOME, RESPONSE], calls=[], response="")
    result, _ = await _run(spec, tmp_path)
    assert result.status == "failed" and result.score is not None and result.score < 1.0
    outcome = result.scores["outcome"]
    state = outcome.details["parts"]["state"]
    assert state["score"] == 0.0
    assert state["details"]["failed"] == [
        "accounts[a1].balance == 70",
        "accounts[a2].balance == 80",
        "count(audit) == 1",
    ]
    assert outcome.details["parts"]["trajectory"]["details"]["failed"] == [
        "called transfer(amount=30)"
    ]
    assert result.scores["response"].score == 0.5


async def test_an_agent_that_did_nothing_gets_a_readable_diff(
    env_dir: Path, tmp_path: Path
) -> None:
    outcome = {"id": "outcome", "type": "env_outcome_verifier", "gold_replay": {"prompt_id": "p1"}}
    result, _ = await _run(_task(env_dir, [outcome]), tmp_path, agent=IdleAgent())
    score = result.scores["outcome"]
    assert score.score == 0.0 and not result.passed
    assert (
        score.details["diff"].splitlines()
        == [
            "[bank] expected -> actual:",
            "- audit[t1]",
            "~ accounts[a1].balance: 70 -> 100",
            "~ accounts[a2].balance: 80 -> 50",
        ]
        or "~ accounts[a1].balance: 70 -> 100" in score.details["diff"]
    )


async def test_partial_credit_for_a_clumsy_agent(env_dir: Path, tmp_path: Path) -> None:
    spec = _task(
        env_dir,
        [
            {**OUTCOME, "threshold": 0.3},
            RESPONSE,
            {"id": "total", "type": "aggregate_verifiers", "aggregator": "mean"},
        ],
    )
    result, _ = await _run(spec, tmp_path, agent=ClumsyAgent())
    outcome = result.scores["outcome"]
    parts = outcome.details["parts"]
    assert parts["state"]["score"] == pytest.approx(1 / 3)  # one transfer was audited
    assert parts["gold_replay"]["score"] == 0.0
    assert parts["trajectory"]["details"]["failed"] == [
        "called transfer(amount=30)",
        "at most 0 denied calls",
    ]
    assert outcome.score == pytest.approx((1 / 3 + 0 + 1 / 3) / 3)
    assert outcome.passed is False
    assert result.scores["response"].score == 0.5
    assert result.score == pytest.approx((outcome.score + 0.5) / 2)


async def test_gold_replay_role_can_be_overridden(env_dir: Path, tmp_path: Path) -> None:
    freeze = [{"tool": "freeze", "args": {"account_id": "a1"}}]
    as_agent = {"id": "v1", "type": "env_outcome_verifier", "gold_replay": {"prompt_id": "p1"}}
    as_boss = {
        "id": "v2",
        "type": "env_outcome_verifier",
        "gold_replay": {"prompt_id": "p1", "role": "supervisor"},
    }
    result, _ = await _run(_task(env_dir, [as_agent, as_boss], calls=freeze), tmp_path)
    assert result.scores["v1"].passed  # refused for the agent both times
    assert result.scores["v1"].details["parts"]["gold_replay"]["details"]["failed_reference_calls"][
        0
    ]["tool"] == ("freeze")
    assert not result.scores["v2"].passed
    assert "accounts[a1].frozen: True -> '<absent>'" in result.scores["v2"].details["diff"]


# -- failures ---------------------------------------------------------------------------------


async def test_a_verifier_that_raises_fails_its_step_and_scores_zero(
    env_dir: Path, tmp_path: Path
) -> None:
    # (an unknown collection is caught sooner, when the env is deployed: test_env_fields)
    broken = {
        "id": "broken",
        "type": "env_outcome_verifier",
        "trajectory": {"prompt_id": "p9", "checks": [{"max_calls": 3}]},
    }
    spec = _task(env_dir, [RESPONSE, broken, {"id": "total", "type": "aggregate_verifiers"}])
    result, _ = await _run(spec, tmp_path)
    assert result.status == "error" and not result.passed
    assert result.score == 0.0
    step = _step(result, "broken")
    assert step.status == "failed"
    assert step.error == (
        "no prompt_agent step sends prompt_id 'p9' (prompted: p1; the task's prompt ids: p1)"
    )
    assert result.scores["response"].score == 1.0  # partial scores are kept
    assert result.scores["broken"].score == 0.0
    assert _step(result, "total").status == "skipped"


async def test_a_failed_verifier_counts_zero_in_the_aggregate(
    env_dir: Path, tmp_path: Path
) -> None:
    broken = {
        "id": "broken",
        "type": "agent_prompt_response_verifier",
        "prompt_id": "p9",
        "checks": [{"contains": "x"}],
        "fail_task_on_error": False,
    }
    total = {"id": "total", "type": "aggregate_verifiers", "aggregator": "mean", "threshold": 0.5}
    result, _ = await _run(_task(env_dir, [RESPONSE, broken, total]), tmp_path)
    assert _step(result, "broken").error == (
        "no prompt_agent step sends prompt_id 'p9' (prompted: p1; the task's prompt ids: p1)"
    )
    assert result.status == "passed" and result.score == 0.5
    assert result.scores["total"].details["missing"] == ["broken"]


async def test_a_prompt_not_sent_yet_says_how_to_fix_it(env_dir: Path, tmp_path: Path) -> None:
    early = {
        "id": "early",
        "type": "agent_prompt_response_verifier",
        "prompt_id": "p1",
        "checks": [{"contains": "x"}],
        "depends_on": [{"task_step_id": "agent"}],
    }
    spec = _task(env_dir, [])
    steps = [s.model_dump(exclude_none=True) for s in spec.steps]
    steps.insert(2, early)  # before the prompt_agent step
    spec = TaskSpec.model_validate({"steps": steps, "solution": spec.model_dump()["solution"]})
    result, _ = await _run(spec, tmp_path)
    assert _step(result, "early").error == (
        "prompt_id 'p1' has not been prompted yet (prompted: none yet); make this step "
        "depend on the prompt_agent step that sends it"
    )


async def test_gold_replay_needs_a_solution(env_dir: Path, tmp_path: Path) -> None:
    spec = _task(env_dir, [])
    steps = [s.model_dump(exclude_none=True) for s in spec.steps]
    steps.append({"id": "v", "type": "env_outcome_verifier", "gold_replay": {"prompt_id": "p1"}})
    bare = TaskSpec.model_validate({"steps": steps})
    result, _ = await _run(bare, tmp_path, agent=IdleAgent())
    assert _step(result, "v").error == (
        "gold_replay: the task has no reference solution for prompt 'p1' (solutions for: none); "
        "add it under `solution:`"
    )


async def test_several_envs_need_an_env_id(env_dir: Path, tmp_path: Path) -> None:
    vague = {"id": "vague", "type": "env_outcome_verifier", "checks": [OUTCOME["checks"][0]]}
    precise = {**vague, "id": "precise", "env_id": "bank"}
    other = {
        **vague,
        "id": "other",
        "env_id": "bank2",
        "checks": [{"collection": "accounts", "key": "a1", "field": "balance", "equals": 100}],
        "gold_replay": {"prompt_id": "p1"},
        "fail_task_on_error": False,
    }
    spec = _task(
        env_dir,
        [{**vague, "fail_task_on_error": False}, precise, other],
        calls=[{**MOVE, "env_id": "bank"}],
        extra_envs=1,
    )
    bundle = {"bank": Environment.load(env_dir)}
    ctx = TaskContext(
        task=spec,
        base_dir=tmp_path,
        env_resolver=bundle.get,
        agent_factory=lambda req: make_agent("oracle"),
    )
    result = await run_task(spec, ctx)
    assert _step(result, "vague").error == "name the env_id: the task has 2 (bank, bank2)"
    assert result.scores["precise"].passed
    assert result.scores["other"].passed, result.scores["other"].details  # untouched, as replayed


# -- aggregate_verifiers -----------------------------------------------------------------------


async def test_aggregate_over_chosen_verifiers_with_weights(env_dir: Path, tmp_path: Path) -> None:
    failing = {
        "id": "strict",
        "type": "agent_prompt_response_verifier",
        "prompt_id": "p1",
        "checks": [{"contains": "nope"}],
    }
    steps = [
        RESPONSE,
        failing,
        {
            "id": "weighted",
            "type": "aggregate_verifiers",
            "verifier_step_ids": ["response", "strict"],
            "aggregator": "weighted",
            "weights": {"response": 3},
            "threshold": 0.7,
        },
        {"id": "only", "type": "aggregate_verifiers", "verifier_step_ids": ["response"]},
    ]
    result, _ = await _run(_task(env_dir, steps), tmp_path)
    assert result.scores["weighted"].score == pytest.approx(0.75)
    assert result.scores["weighted"].passed
    assert result.score == 1.0 and result.passed  # the last aggregate decides


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"verifier_step_ids": ["ghost"]}, "verifier_step_ids: no step 'ghost' (verifier steps"),
        ({"verifier_step_ids": ["ask"]}, "'ask' is a prompt_agent step, not a verifier"),
        ({"verifier_step_ids": ["later"]}, "'later' does not come before this step"),
        ({"weights": {"x": 1}}, "weights: x not among response"),
    ],
)
async def test_aggregate_errors(
    env_dir: Path, tmp_path: Path, params: dict[str, Any], message: str
) -> None:
    total = {"id": "total", "type": "aggregate_verifiers", **params}
    later = {**RESPONSE, "id": "later"}
    result, _ = await _run(_task(env_dir, [RESPONSE, total, later]), tmp_path)
    assert message in (_step(result, "total").error or "")


async def test_aggregate_needs_a_verifier_before_it(env_dir: Path, tmp_path: Path) -> None:
    result, _ = await _run(
        _task(env_dir, [{"id": "total", "type": "aggregate_verifiers"}]), tmp_path
    )
    assert _step(result, "total").error == "no verifier step comes before this one"


# -- documents are checked before anything runs ------------------------------------------------


@pytest.mark.parametrize(
    ("step", "message"),
    [
        (
            {"type": "env_outcome_verifier"},
            "give 'file_artifact_id', 'checks', 'gold_replay' or 'trajectory'",
        ),
        ({"type": "env_outcome_verifier", "checks": [{"collection": "a"}]}, "needs 'count'"),
        ({"type": "env_outcome_verifier", "chekcs": []}, "chekcs: unknown field"),
        ({"type": "agent_prompt_response_verifier", "prompt_id": "p1", "checks": []}, "at least 1"),
        (
            {"type": "agent_prompt_response_verifier", "prompt_id": "p1", "checks": [{"x": 1}]},
            "has one of 'contains'",
        ),
        ({"type": "rubrics_verifier", "prompt_id": "p1", "criteria": []}, "at least 1"),
        ({"type": "aggregate_verifiers", "aggregator": "median"}, "aggregator"),
        ({"type": "aggregate_verifiers", "threshold": 2}, "less than or equal to 1"),
    ],
)
def test_bad_verifier_fields_are_task_errors(
    env_dir: Path, step: dict[str, Any], message: str
) -> None:
    spec = _task(env_dir, [{"id": "v", **step}])
    with pytest.raises(TaskError, match=r"steps\[3\].*\(step 'v'\)") as info:
        build_steps(spec)
    assert message in str(info.value)


def test_verifier_steps_are_registered() -> None:
    for name in (
        "env_outcome_verifier",
        "agent_prompt_response_verifier",
        "rubrics_verifier",
        "aggregate_verifiers",
    ):
        cls = STEPS.get(name)
        assert cls.is_verifier and cls.Params.model_config.get("extra") == "forbid"


def test_rubric_fields_accept_protocol_spellings(env_dir: Path) -> None:
    step = {
        "id": "judge",
        "type": "rubrics_verifier",
        "prompt_id": "p1",
        "criteria": ["is polite", {"id": "exact", "description": "says 70"}],
        "score_aggregator": "ALL_PASS",
        "default_model_api_base": "http://127.0.0.1:9/v1",
    }
    [*_, judge] = build_steps(_task(env_dir, [step]))
    assert judge.params.score_aggregator == "all_pass"
    assert judge.params.base_url == "http://127.0.0.1:9/v1"


# -- rubrics_verifier ---------------------------------------------------------------------------


async def test_rubrics_verifier_without_an_endpoint_fails_clearly(
    env_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTENV_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    judge = {"id": "judge", "type": "rubrics_verifier", "prompt_id": "p1", "criteria": ["ok"]}
    result, _ = await _run(_task(env_dir, [judge]), tmp_path)
    step = _step(result, "judge")
    assert step.status == "failed"
    assert step.error.startswith("rubrics_verifier: no LLM judge endpoint is configured")
    assert result.score == 0.0


@pytest.fixture
def judge_url() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    if importlib.util.find_spec("openai") is None:
        pytest.skip("the optional 'openai' package (extra 'llm') is not installed")
    seen: list[dict[str, Any]] = []
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Any:
        body = await request.json()
        seen.append(body)
        verdict = {"criteria": [{"id": "c1", "passed": True, "reason": "ok"}]}
        return {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": json.dumps(verdict)},
                    "finish_reason": "stop",
                }
            ],
        }

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1", seen
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


async def test_rubrics_verifier_asks_the_judge(
    env_dir: Path, tmp_path: Path, judge_url: tuple[str, list[dict[str, Any]]]
) -> None:
    url, seen = judge_url
    judge = {
        "id": "judge",
        "type": "rubrics_verifier",
        "prompt_id": "p1",
        "criteria": ["gives both balances"],
        "default_model": "judge-1",
        "base_url": url,
        "grading_policy_prompt": "Balances must be exact.",
    }
    result, _ = await _run(_task(env_dir, [judge]), tmp_path)
    assert result.passed and result.score == 1.0, result.error
    [body] = seen
    user = body["messages"][1]["content"]
    assert "Move 30 from a1 to a2" in user
    assert '1. transfer({"amount": 30, "source": "a1", "target": "a2"})' in user
    assert ANSWER in user and "Balances must be exact." in user
    assert result.scores["judge"].details["prompt_id"] == "p1"
