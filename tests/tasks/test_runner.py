"""The task runner: waves, dependency order, timeouts, retries, failure policy, validation
and `<key>` placeholders. Custom steps live in a registry of their own (the built-ins plus
the test's types), so the global STEPS is never touched."""

from __future__ import annotations

import asyncio
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from agentenv.agents import make_agent
from agentenv.registry import Registry
from agentenv.spec.task import TaskSpec
from agentenv.tasks import (
    STEPS,
    Score,
    Step,
    StepError,
    TaskContext,
    TaskError,
    TaskResult,
    build_steps,
    run_task,
)

BANK_ENV = """
apiVersion: agentenv/v1
kind: Environment
name: bank
roles: [{name: customer}, {name: teller}]
default_role: customer
state:
  accounts:
    schema:
      type: object
      required: [id, balance]
      properties:
        id: {type: string}
        balance: {type: integer, minimum: 0}
seed:
  accounts:
    - {id: a1, balance: 100}
    - {id: a2, balance: 50}
tools:
  - module: bank_tools.py
  - name: get_account
    crud: {collection: accounts, op: get}
"""

BANK_TOOLS = '''
from agentenv import ToolContext, ToolError, tool


@tool
def deposit(ctx: ToolContext, account_id: str, amount: int) -> dict:
    """Add money to an account.

    Args:
        account_id: The account's id.
        amount: How much to add.
    """
    if amount <= 0:
        raise ToolError("amount must be positive")
    account = ctx.state.require("accounts", account_id)
    return ctx.state.update("accounts", account_id, {"balance": account["balance"] + amount})
'''


# -- test step types --------------------------------------------------------------------


class _P(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GateParams(_P):
    open: str
    wait: str


class Gate(Step):
    """Opens one event, then waits for another: two of these finish only if concurrent."""

    type_name = "gate"
    Params = GateParams

    async def run(self, ctx: TaskContext) -> Any:
        p: GateParams = self.params  # type: ignore[assignment]
        events: dict[str, asyncio.Event] = ctx.artifacts.setdefault("events", {})
        events.setdefault(p.open, asyncio.Event()).set()
        try:
            await asyncio.wait_for(events.setdefault(p.wait, asyncio.Event()).wait(), 2)
        except TimeoutError:
            raise StepError(f"{p.wait!r} never opened: the steps did not run together") from None
        return {"opened": p.open}


class RecordParams(_P):
    sleep: float = 0.0


class Record(Step):
    """Appends its id to ctx.artifacts['order'] when it starts and when it ends."""

    type_name = "record"
    Params = RecordParams

    async def run(self, ctx: TaskContext) -> Any:
        p: RecordParams = self.params  # type: ignore[assignment]
        order = ctx.artifacts.setdefault("order", [])
        order.append(f"start:{self.id}")
        await asyncio.sleep(p.sleep)
        order.append(f"end:{self.id}")
        return {"id": self.id}


class FlakyParams(_P):
    fail_times: int = 1


class Flaky(Step):
    """Fails its first `fail_times` runs, then succeeds."""

    type_name = "flaky"
    Params = FlakyParams

    async def run(self, ctx: TaskContext) -> Any:
        p: FlakyParams = self.params  # type: ignore[assignment]
        runs = ctx.artifacts.setdefault("runs", {})
        runs[self.id] = runs.get(self.id, 0) + 1
        if runs[self.id] <= p.fail_times:
            raise StepError(f"failing on purpose (run {runs[self.id]})")
        return {"runs": runs[self.id]}


class FlakyVerifier(Flaky):
    """A verifier that fails its first runs (as a StepError), then passes."""

    type_name = "flaky_verifier"
    is_verifier = True

    async def run(self, ctx: TaskContext) -> Any:
        await super().run(ctx)
        return Score(score=1.0, passed=True)


class DepositParams(_P):
    account_id: str = "a1"
    amount: int = 10


class Deposit(Step):
    """Deposits through the gateway as the system principal."""

    type_name = "deposit"
    Params = DepositParams

    async def run(self, ctx: TaskContext) -> Any:
        p: DepositParams = self.params  # type: ignore[assignment]
        result = await ctx.system_client().call(
            "deposit", {"account_id": p.account_id, "amount": p.amount}
        )
        if not result.ok:
            raise StepError(result.text)
        return result.value


class EchoParams(_P):
    value: Any = None


class Echo(Step):
    type_name = "echo"
    Params = EchoParams

    async def run(self, ctx: TaskContext) -> Any:
        return {"value": self.params.value}  # type: ignore[attr-defined]


class Sleepy(Step):
    """Sleeps long; its class default timeout is short."""

    type_name = "sleepy"
    default_timeout = 0.05

    async def run(self, ctx: TaskContext) -> Any:
        await asyncio.sleep(5)


TEST_TYPES = [Gate, Record, Flaky, FlakyVerifier, Deposit, Echo, Sleepy]


def make_registry(*extra: type[Step]) -> Registry[type[Step]]:
    """The built-in step types plus the test's own, in a registry of their own."""
    registry: Registry[type[Step]] = Registry(
        kind="step type",
        group="agentenv.tests.no-such-group",
        config_key="no_such_key",
        name_of=lambda cls: cls.type_name,
    )
    for name in STEPS.names():
        if STEPS.is_builtin(name):
            registry.add_builtin(STEPS.get(name), name)
    for cls in [*TEST_TYPES, *extra]:
        registry.add_builtin(cls)
    return registry


REGISTRY = make_registry()


@pytest.fixture
def bank_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "bank"
    folder.mkdir()
    (folder / "env.yaml").write_text(textwrap.dedent(BANK_ENV))
    (folder / "bank_tools.py").write_text(textwrap.dedent(BANK_TOOLS))
    return tmp_path


async def run(
    doc: Any, base: Path, *, seed: dict[str, Any] | None = None
) -> tuple[TaskResult, TaskContext]:
    spec = TaskSpec.model_validate(doc)
    ctx = TaskContext(
        task=spec,
        base_dir=base,
        seed=seed or {},
        agent_factory=lambda req: make_agent("oracle"),
    )
    result = await run_task(spec, ctx, registry=REGISTRY)
    return result, ctx


def by_id(result: TaskResult) -> dict[str, Any]:
    return {s.id: s for s in result.steps}


DEPLOY = {"id": "env", "type": "deploy_env", "env_id": "bank", "env": "bank"}


def balance(ctx: TaskContext, account: str = "a1") -> int:
    return ctx.env("bank").state.require("accounts", account)["balance"]


# -- waves and order --------------------------------------------------------------------


async def test_steps_of_one_wave_run_concurrently(tmp_path: Path) -> None:
    result, _ctx = await run(
        [
            {"id": "a", "type": "gate", "open": "a", "wait": "b", "depends_on": []},
            {"id": "b", "type": "gate", "open": "b", "wait": "a", "depends_on": []},
            {"id": "after", "type": "record"},
        ],
        tmp_path,
    )
    steps = by_id(result)
    assert result.status == "passed", result.error
    assert steps["a"].status == steps["b"].status == "succeeded"
    assert steps["after"].started_at >= max(steps["a"].ended_at, steps["b"].ended_at)


async def test_dependencies_decide_the_order(tmp_path: Path) -> None:
    result, ctx = await run(
        [
            {"id": "slow", "type": "record", "sleep": 0.05, "depends_on": []},
            {"id": "fast", "type": "record", "depends_on": []},
            {"id": "after_slow", "type": "record", "depends_on": [{"task_step_id": "slow"}]},
            {"id": "after_fast", "type": "record", "depends_on": [{"task_step_id": "fast"}]},
        ],
        tmp_path,
    )
    assert result.status == "passed"
    order = ctx.artifacts["order"]
    # first wave: slow and fast together; then their dependents (one wave)
    assert set(order[:2]) == {"start:slow", "start:fast"}
    assert order.index("end:slow") < order.index("start:after_slow")
    assert order.index("end:fast") < order.index("start:after_fast")


async def test_no_depends_on_means_after_every_earlier_step(tmp_path: Path) -> None:
    doc = [
        {"id": "a", "type": "record", "sleep": 0.03, "depends_on": []},
        {"id": "b", "type": "record", "depends_on": []},
        {"id": "c", "type": "record"},
    ]
    assert TaskSpec.model_validate(doc).dependencies() == {"a": [], "b": [], "c": ["a", "b"]}
    result, ctx = await run(doc, tmp_path)
    assert result.status == "passed"
    assert ctx.artifacts["order"][-2:] == ["start:c", "end:c"]


# -- timeouts ---------------------------------------------------------------------------


async def test_a_step_past_its_timeout_is_a_timeout(tmp_path: Path) -> None:
    result, _ = await run(
        [
            {"id": "slow", "type": "record", "sleep": 5, "timeout_seconds": 0.05},
            {"id": "next", "type": "record"},
        ],
        tmp_path,
    )
    steps = by_id(result)
    assert steps["slow"].status == "timeout"
    assert steps["slow"].error == "took longer than 0.05 s"
    assert steps["next"].status == "skipped"
    assert result.status == "error"
    assert "'slow' timeout" in (result.error or "")


async def test_a_step_types_default_timeout_applies(tmp_path: Path) -> None:
    result, _ = await run([{"id": "s", "type": "sleepy"}], tmp_path)
    assert by_id(result)["s"].status == "timeout"


# -- retries ----------------------------------------------------------------------------


async def test_retry_from_step_id_rolls_state_back_and_reruns(bank_dir: Path) -> None:
    result, ctx = await run(
        [
            DEPLOY,
            {"id": "pay", "type": "deposit", "amount": 10},
            {
                "id": "check",
                "type": "flaky",
                "retry_config": {"retry_from_step_id": "pay", "max_retries": 1},
            },
        ],
        bank_dir,
    )
    steps = by_id(result)
    assert result.status == "passed", result.error
    assert steps["pay"].attempts == 2
    assert steps["check"].attempts == 2
    assert steps["env"].attempts == 1
    assert balance(ctx) == 110  # the first deposit was rolled back before the second
    events = [r.event for r in ctx.env("bank").gateway.instance().trajectory]
    assert "state_restore" in events


async def test_go_to_step_id_reruns_without_rolling_back(bank_dir: Path) -> None:
    result, ctx = await run(
        [
            DEPLOY,
            {"id": "pay", "type": "deposit", "amount": 10},
            {
                "id": "check",
                "type": "flaky",
                "retry_config": {"go_to_step_id": "pay", "max_retries": 1},
            },
        ],
        bank_dir,
    )
    assert result.status == "passed", result.error
    assert by_id(result)["pay"].attempts == 2
    assert balance(ctx) == 120  # both deposits stand


async def test_a_step_can_retry_itself(tmp_path: Path) -> None:
    result, _ctx = await run(
        [
            {
                "id": "f",
                "type": "flaky",
                "fail_times": 2,
                "retry_config": {"retry_from_step_id": "f", "max_retries": 2},
            }
        ],
        tmp_path,
    )
    assert result.status == "passed"
    assert by_id(result)["f"].attempts == 3


async def test_exhausted_retries_fail_the_task(tmp_path: Path) -> None:
    result, _ctx = await run(
        [
            {"id": "start", "type": "record"},
            {
                "id": "f",
                "type": "flaky",
                "fail_times": 10,
                "retry_config": {"go_to_step_id": "start", "max_retries": 2},
            },
            {"id": "never", "type": "record"},
        ],
        tmp_path,
    )
    steps = by_id(result)
    assert result.status == "error"
    assert result.passed is False
    assert steps["f"].status == "failed"
    assert steps["f"].attempts == 3
    assert steps["start"].attempts == 3
    assert steps["never"].status == "skipped"
    assert result.error == "step 'f' failed: failing on purpose (run 3)"


async def test_a_retried_verifier_scores_once(tmp_path: Path) -> None:
    result, _ = await run(
        [
            {
                "id": "v",
                "type": "flaky_verifier",
                "retry_config": {"go_to_step_id": "v", "max_retries": 1},
            }
        ],
        tmp_path,
    )
    assert result.status == "passed"
    assert result.score == 1.0
    assert list(result.scores) == ["v"]


async def test_retry_from_a_prompt_reprompts_the_agent(bank_dir: Path) -> None:
    result, ctx = await run(
        {
            "steps": [
                DEPLOY,
                {"id": "agent", "type": "deploy_agent", "agent_name": "teller"},
                {"id": "ask", "type": "prompt_agent", "prompt": "Deposit 5 into a1."},
                {
                    "id": "check",
                    "type": "flaky_verifier",
                    "retry_config": {"retry_from_step_id": "ask", "max_retries": 1},
                },
            ],
            "solution": {
                "ask": {
                    "calls": [{"tool": "deposit", "args": {"account_id": "a1", "amount": 5}}],
                    "response": "done",
                }
            },
        },
        bank_dir,
    )
    assert result.status == "passed", result.error
    assert balance(ctx) == 105


async def test_retry_from_deploy_env_redeploys(bank_dir: Path) -> None:
    result, _ = await run(
        [
            DEPLOY,
            {
                "id": "check",
                "type": "flaky",
                "retry_config": {"retry_from_step_id": "env", "max_retries": 1},
            },
        ],
        bank_dir,
    )
    assert result.status == "passed", result.error


# -- failure policy ---------------------------------------------------------------------


async def test_fail_task_on_error_false_lets_the_task_go_on(tmp_path: Path) -> None:
    result, _ = await run(
        [
            {"id": "soft", "type": "flaky", "fail_times": 5, "fail_task_on_error": False},
            {"id": "next", "type": "record"},
        ],
        tmp_path,
    )
    steps = by_id(result)
    assert steps["soft"].status == "failed"
    assert steps["next"].status == "succeeded"
    assert result.status == "passed"
    assert result.error is None


async def test_a_step_whose_dependency_failed_is_skipped(tmp_path: Path) -> None:
    result, _ = await run(
        [
            {"id": "bad", "type": "flaky", "fail_times": 5, "depends_on": []},
            {"id": "side", "type": "record", "depends_on": []},
            {"id": "child", "type": "record", "depends_on": [{"task_step_id": "bad"}]},
        ],
        tmp_path,
    )
    steps = by_id(result)
    assert steps["bad"].status == "failed"
    assert steps["side"].status == "succeeded"  # same wave: it was already running
    assert steps["child"].status == "skipped"
    assert steps["child"].error
    assert steps["child"].attempts == 0
    assert result.status == "error"


async def test_a_buggy_step_is_a_failed_step_not_a_crash(tmp_path: Path) -> None:
    class Buggy(Step):
        type_name = "buggy"

        async def run(self, ctx: TaskContext) -> Any:
            return {}["missing"]

    spec = TaskSpec.model_validate([{"id": "b", "type": "buggy"}])
    ctx = TaskContext(task=spec, base_dir=tmp_path)
    result = await run_task(spec, ctx, registry=make_registry(Buggy))
    assert result.steps[0].status == "failed"
    assert result.steps[0].error == "KeyError: 'missing'"


# -- validation -------------------------------------------------------------------------


def check(doc: Any) -> str:
    with pytest.raises(TaskError) as info:
        build_steps(TaskSpec.model_validate(doc), registry=REGISTRY)
    return str(info.value)


def test_an_unknown_step_type_lists_the_known_ones() -> None:
    message = check([{"id": "x", "type": "no_such_step"}])
    assert message.startswith("steps[0].type: unknown step type 'no_such_step'")
    assert message.endswith("(step 'x')")
    assert "deploy_env" in message and "prompt_agent" in message and "record" in message


def test_an_unknown_field_is_named() -> None:
    message = check([{"id": "d", "type": "deploy_env", "env_id": "e", "env": "x", "bogus": 1}])
    assert message == "steps[0].bogus: unknown field (step 'd')"


def test_a_missing_field_is_named() -> None:
    message = check([{"id": "d", "type": "deploy_env"}])
    assert message.startswith("steps[0].env_id: Field required")


def test_a_forward_reference_is_an_error() -> None:
    message = check(
        [
            {"id": "a", "type": "record", "depends_on": [{"task_step_id": "b"}]},
            {"id": "b", "type": "record"},
        ]
    )
    assert message == (
        "steps[0].depends_on[0].task_step_id: 'b' is not an earlier step "
        "(forward reference or cycle) (step 'a')"
    )


def test_a_missing_dependency_is_an_error() -> None:
    message = check(
        [
            {"id": "a", "type": "record"},
            {"id": "b", "type": "record", "depends_on": [{"task_step_id": "ghost"}]},
        ]
    )
    assert message == "steps[1].depends_on[0].task_step_id: no step 'ghost' (step 'b')"


def test_a_duplicate_id_is_an_error() -> None:
    message = check([{"id": "a", "type": "record"}, {"id": "a", "type": "record"}])
    assert message == "steps[1].id: a second step with id 'a' (step 'a')"


@pytest.mark.parametrize("retry", [{"retry_from_step_id": "later"}, {"go_to_step_id": "nowhere"}])
def test_a_bad_retry_target_is_an_error(retry: dict[str, str]) -> None:
    message = check(
        [
            {"id": "a", "type": "record", "retry_config": retry},
            {"id": "later", "type": "record"},
        ]
    )
    target = next(iter(retry.values()))
    assert (
        message == f"steps[0].retry_config: retry target {target!r} is not this or an earlier step "
        "(step 'a')"
    )


def test_a_retry_config_needs_exactly_one_target() -> None:
    with pytest.raises(ValueError, match="exactly one of"):
        TaskSpec.model_validate([{"id": "a", "type": "record", "retry_config": {"max_retries": 1}}])


def test_structure_errors_name_the_step_id() -> None:
    message = check(
        [
            {"id": "a", "type": "record"},
            {"id": "b", "type": "record", "depends_on": [{"task_step_id": "ghost"}]},
        ]
    )
    assert "'b'" in message


async def test_run_task_validates_before_running_anything(tmp_path: Path) -> None:
    spec = TaskSpec.model_validate(
        [{"id": "a", "type": "record"}, {"id": "b", "type": "no_such_step"}]
    )
    ctx = TaskContext(task=spec, base_dir=tmp_path)
    with pytest.raises(TaskError, match=r"steps\[1\]\.type: .*\(step 'b'\)"):
        await run_task(spec, ctx, registry=REGISTRY)
    assert "order" not in ctx.artifacts


# -- placeholders -----------------------------------------------------------------------


async def test_placeholders_are_filled_from_the_task_seed_and_the_run_seed(
    tmp_path: Path,
) -> None:
    doc = {
        "seed": {"account": "a1", "amount": 5},
        "steps": [
            {"id": "whole", "type": "echo", "value": "<amount>"},
            {"id": "inside", "type": "echo", "value": "pay <amount> to <account>"},
            {"id": "nested", "type": "echo", "value": {"to": ["<account>"], "x": "<unknown>"}},
        ],
    }
    result, _ = await run(doc, tmp_path)
    outputs = {s.id: s.output["value"] for s in result.steps}
    assert outputs == {
        "whole": 5,  # a lone placeholder keeps the value's type
        "inside": "pay 5 to a1",
        "nested": {"to": ["a1"], "x": "<unknown>"},  # unknown keys are left as written
    }
    result, _ = await run(doc, tmp_path, seed={"amount": 7})  # the run's seed wins
    assert result.steps[0].output == {"value": 7}
    assert result.steps[1].output == {"value": "pay 7 to a1"}


async def test_placeholders_reach_the_step_fields_of_built_in_steps(bank_dir: Path) -> None:
    result, ctx = await run(
        {"seed": {"which": "bank"}, "steps": [{**DEPLOY, "env": "<which>"}]}, bank_dir
    )
    assert result.status == "passed", result.error
    assert ctx.env("bank").env.name == "bank"


async def test_placeholders_fill_a_typed_field_before_it_is_checked(tmp_path: Path) -> None:
    result, _ = await run(
        {
            "seed": {"n": 2},
            "steps": [
                {"id": "f", "type": "flaky", "fail_times": "<n>", "fail_task_on_error": False}
            ],
        },
        tmp_path,
    )
    assert result.steps[0].error == "failing on purpose (run 1)"
    assert (
        build_steps(
            TaskSpec.model_validate([{"id": "f", "type": "flaky", "fail_times": "<n>"}]),
            {"n": 3},
            REGISTRY,
        )[0].params.fail_times
        == 3
    )  # type: ignore[attr-defined]


async def test_placeholders_are_filled_in_the_reference_solution(bank_dir: Path) -> None:
    _result, ctx = await run(
        {
            "seed": {"amount": 5},
            "steps": [
                DEPLOY,
                {"id": "agent", "type": "deploy_agent", "agent_name": "teller"},
                {"id": "ask", "type": "prompt_agent", "prompt": "Deposit <amount> into a1."},
            ],
            "solution": {
                "ask": {
                    "calls": [
                        {"tool": "deposit", "args": {"account_id": "a1", "amount": "<amount>"}}
                    ],
                    "response": "done",
                }
            },
        },
        bank_dir,
    )
    assert ctx.prompts["ask"].prompt == "Deposit 5 into a1."
    assert balance(ctx) == 105
