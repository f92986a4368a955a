"""The rubric judge: criteria, messages, verdict parsing, and real requests to a local
OpenAI-compatible server (only when the optional `openai` package is installed)."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from agentenv.grading import (
    Criterion,
    RubricError,
    RubricJudge,
    build_messages,
    judge_rubric,
    normalize_criteria,
    parse_verdicts,
)
from agentenv.grading.rubric import render_trajectory

HAS_OPENAI = importlib.util.find_spec("openai") is not None
needs_openai = pytest.mark.skipif(
    not HAS_OPENAI, reason="the optional 'openai' package (extra 'llm') is not installed"
)

CRITERIA = [
    "The answer states the new balance of a1",
    {"id": "polite", "description": "The answer is polite", "weight": 3},
]


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTENV_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)


# -- criteria, messages, parsing ------------------------------------------------------------


def test_criteria_from_strings_and_dicts() -> None:
    items = normalize_criteria([*CRITERIA, {"criterion": "Short", "max_words": 50}])
    assert [(c.id, c.criterion, c.weight) for c in items] == [
        ("c1", "The answer states the new balance of a1", 1.0),
        ("polite", "The answer is polite", 3.0),
        ("c3", "Short", 1.0),
    ]
    assert items[2].model_extra == {"max_words": 50}


def test_bad_criteria() -> None:
    with pytest.raises(RubricError, match="at least one criterion"):
        normalize_criteria([])
    with pytest.raises(RubricError, match="ids must be unique: x repeated"):
        normalize_criteria([{"id": "x", "criterion": "a"}, {"id": "x", "criterion": "b"}])
    with pytest.raises(RubricError, match=r"criteria\[0\]\.criterion: Field required"):
        normalize_criteria([{"id": "x"}])


def test_messages_carry_the_evidence() -> None:
    items = normalize_criteria(CRITERIA)
    messages = build_messages(
        items,
        "New balance: 70. Thanks!",
        prompt="Move 30 from a1 to a2",
        policy="Numbers must be exact.",
        trajectory="1. transfer({}) -> {}",
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    assert '"passed": true or false' in messages[0]["content"]
    user = messages[1]["content"]
    for text in (
        "## Task given to the agent\nMove 30 from a1 to a2",
        "## The agent's tool calls\n1. transfer",
        "## The agent's final response\nNew balance: 70. Thanks!",
        "## Grading policy\nNumbers must be exact.",
        '"id": "polite"',
    ):
        assert text in user
    bare = build_messages(items, None)[1]["content"]
    assert "(the agent gave no response)" in bare and "Grading policy" not in bare


def test_render_trajectory() -> None:
    records = [
        {"kind": "call", "tool": "get", "args": {"id": "a1"}, "result": {"balance": 100}},
        {"kind": "control", "event": "clock_set"},
        {
            "kind": "call",
            "tool": "freeze",
            "args": {},
            "error": {"kind": "denied", "message": "no"},
        },
    ]
    assert render_trajectory(records) == (
        '1. get({"id": "a1"}) -> {"balance": 100}\n2. freeze({}) -> ERROR: no'
    )
    assert render_trajectory([]) == "(no tool calls)"
    many = render_trajectory([records[0]] * 5, max_calls=2)
    assert many.endswith("... and 3 more calls")


@pytest.mark.parametrize(
    "answer",
    [
        '{"criteria": [{"id": "c1", "passed": true, "reason": "says 70"},'
        ' {"id": "polite", "passed": false, "reason": "curt"}]}',
        'Here you go:\n```json\n{"results": [{"id": "c1", "pass": "yes"},'
        ' {"id": "polite", "verdict": "FAIL"}]}\n```',
        '{"c1": {"met": true}, "polite": false}',
        '[{"passed": true}, {"passed": false}]',
        'I think {"verdicts": [{"criterion_id": "c1", "score": 9},'
        ' {"criterion_id": "polite", "score": 0.2}]} overall',
    ],
)
def test_verdicts_parse_leniently(answer: str) -> None:
    verdicts = parse_verdicts(answer, normalize_criteria(CRITERIA))
    assert {k: v.passed for k, v in verdicts.items()} == {"c1": True, "polite": False}


def test_a_missing_verdict_fails_and_garbage_raises() -> None:
    items = normalize_criteria(CRITERIA)
    verdicts = parse_verdicts('{"criteria": [{"id": "c1", "passed": true}]}', items)
    assert not verdicts["polite"].passed
    assert verdicts["polite"].reason == "the judge gave no verdict"
    with pytest.raises(RubricError, match="not JSON"):
        parse_verdicts("I refuse.", items)
    with pytest.raises(RubricError, match="no verdicts"):
        parse_verdicts('{"criteria": [{"id": "zz", "passed": "maybe"}]}', items)


def test_one_criterion_may_get_a_bare_verdict() -> None:
    verdicts = parse_verdicts('{"passed": true, "reason": "fine"}', normalize_criteria(["x"]))
    assert verdicts["c1"].passed and verdicts["c1"].reason == "fine"


# -- configuration errors -------------------------------------------------------------------


async def test_no_endpoint_is_a_clear_error_not_a_score() -> None:
    with pytest.raises(RubricError, match="no LLM judge endpoint is configured"):
        await judge_rubric("hi", ["polite"], model="m")


async def test_no_model_is_a_clear_error() -> None:
    with pytest.raises(RubricError, match="no judge model"):
        await judge_rubric("hi", ["polite"], base_url="http://127.0.0.1:9/v1")


async def test_without_openai_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "openai", None)  # makes `import openai` fail
    with pytest.raises(RubricError, match=r"needs the 'openai' package.*\[llm\]"):
        await judge_rubric("hi", ["polite"], model="m", base_url="http://127.0.0.1:9/v1")


def test_configuration_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://judge.local/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("AGENTENV_JUDGE_MODEL", "judge-1")
    judge = RubricJudge()
    assert (judge.base_url, judge.api_key, judge.model) == (
        "http://judge.local/v1",
        "sk-test",
        "judge-1",
    )
    explicit = RubricJudge("other", base_url="http://x/v1", api_key="k")
    assert (explicit.base_url, explicit.api_key, explicit.model) == ("http://x/v1", "k", "other")


# -- a local OpenAI-compatible server ---------------------------------------------------------


class JudgeServer:
    """Answers /v1/chat/completions with queued replies and records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.replies: list[str | int] = []
        self.base_url = ""


def _completion(content: str, model: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


@pytest.fixture
def judge_server() -> Iterator[JudgeServer]:
    if not HAS_OPENAI:
        pytest.skip("the optional 'openai' package (extra 'llm') is not installed")
    recorded = JudgeServer()
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def complete(request: Request) -> Any:
        body = await request.json()
        recorded.requests.append({"body": body, "auth": request.headers.get("authorization")})
        reply = recorded.replies.pop(0) if recorded.replies else "{}"
        if isinstance(reply, int):
            return JSONResponse({"error": {"message": "judge down"}}, status_code=reply)
        return _completion(reply, body.get("model", "?"))

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "the test judge server did not start"
    recorded.base_url = f"http://127.0.0.1:{port}/v1"
    try:
        yield recorded
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


VERDICT = json.dumps(
    {
        "criteria": [
            {"id": "c1", "passed": True, "reason": "states 70"},
            {"id": "polite", "passed": False, "reason": "no greeting"},
        ]
    }
)


@needs_openai
async def test_a_request_and_its_verdicts(judge_server: JudgeServer) -> None:
    judge_server.replies.append("```json\n" + VERDICT + "\n```")
    score = await judge_rubric(
        "New balance: 70",
        CRITERIA,
        model="judge-1",
        base_url=judge_server.base_url,
        api_key="sk-local",
        prompt="Move 30 from a1 to a2",
        policy="Be strict.",
        trajectory=[{"kind": "call", "tool": "transfer", "args": {"amount": 30}, "result": {}}],
    )
    assert score.score == 0.0 and not score.passed  # all must pass by default
    assert score.details["failed"] == ["polite"]
    assert score.details["criteria"][0] == {
        "id": "c1",
        "passed": True,
        "score": 1.0,
        "reason": "states 70",
        "criterion": "The answer states the new balance of a1",
    }
    assert score.details["model"] == "judge-1"
    [request] = judge_server.requests
    assert request["auth"] == "Bearer sk-local"
    body = request["body"]
    assert body["model"] == "judge-1" and body["temperature"] == 0.0
    user = body["messages"][1]["content"]
    assert "Move 30 from a1 to a2" in user and "New balance: 70" in user
    assert '1. transfer({"amount": 30})' in user and "Be strict." in user


@needs_openai
async def test_aggregators_and_env_configuration(
    judge_server: JudgeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("AGENTENV_JUDGE_MODEL", "env-judge")
    judge_server.replies += [VERDICT, VERDICT]
    mean = await RubricJudge().grade("x", CRITERIA, aggregator="mean", threshold=0.5)
    assert (mean.score, mean.passed) == (0.5, True)
    weighted = await RubricJudge().grade("x", CRITERIA, aggregator="weighted")
    assert weighted.score == pytest.approx(1 / 4)
    assert judge_server.requests[0]["body"]["model"] == "env-judge"
    assert judge_server.requests[0]["auth"] == "Bearer not-needed"


@needs_openai
async def test_an_unreadable_answer_is_asked_again(judge_server: JudgeServer) -> None:
    judge_server.replies += ["Let me think about it.", VERDICT]
    judge = RubricJudge("m", base_url=judge_server.base_url)
    score = await judge.grade("x", [Criterion(id="c1", criterion="a"), "b"])
    assert len(judge_server.requests) == 2
    assert score.details["criteria"][0]["passed"]

    judge_server.replies += ["nope", "still nope"]
    with pytest.raises(RubricError, match="not JSON: 'still nope'"):
        await judge.grade("x", ["a"])


@needs_openai
async def test_a_failing_endpoint_is_an_error(judge_server: JudgeServer) -> None:
    judge_server.replies += [500, 500]
    judge = RubricJudge("m", base_url=judge_server.base_url, timeout=10)
    with pytest.raises(RubricError, match=r"judge request to http://127\.0\.0\.1:\d+/v1 failed"):
        await judge.grade("x", ["a"])
