"""Verifier trials through the task runner: the written task document, run by
`run_task` with in-process agents, exactly as `agent-env run` would run it.

* the **oracle** (the reference solution) must pass with score 1.0;
* an agent that **does nothing** (no call, empty answer) must score 0 on every verifier;
* an agent that makes **only the first k calls** of the reference (for every k shorter
  than the solution) and answers with everything those calls returned must not pass.
"""

from __future__ import annotations

from typing import Any

from agentenv.agents.base import AgentTurn
from agentenv.agents.oracle import OracleAgent
from agentenv.env.environment import Environment
from agentenv.spec.task import TaskSpec
from agentenv.state import canonical_json
from agentenv.synth.walks import Dropped
from agentenv.tasks.context import TaskContext
from agentenv.tasks.runner import TaskResult, run_task


class NothingAgent:
    """Makes no call and answers nothing."""

    name = "nothing"

    async def run_turn(self, turn: AgentTurn) -> str:
        """Do nothing."""
        return ""


class PrefixAgent:
    """Makes the first `k` calls of the reference solution, answers with their results."""

    name = "prefix"

    def __init__(self, k: int) -> None:
        self.k = k

    async def run_turn(self, turn: AgentTurn) -> str:
        """Replay a prefix of the solution; answer with everything it returned."""
        results: list[Any] = []
        for call in (turn.solution.calls if turn.solution else [])[: self.k]:
            result = await turn.tools.call(call.tool, call.args, env_id=call.env_id)
            results.append(result.value if result.ok else None)
        return canonical_json(results)


async def run_with(spec: TaskSpec, env: Environment, agent: Any) -> TaskResult:
    """Run a task document with one agent, its environment given in memory."""

    def resolve(ref: str) -> Environment | None:
        return env if ref == env.name else None

    ctx = TaskContext(task=spec, env_resolver=resolve, agent_factory=lambda request: agent)
    return await run_task(spec, ctx)


async def full_trials(spec: TaskSpec, env: Environment, calls: int) -> dict[str, Any]:
    """Run the three trials; Dropped naming the first that fails."""
    reference = await run_with(spec, env, OracleAgent())
    if reference.status != "passed" or reference.score != 1.0:
        raise Dropped("trial_reference", reference.error or f"score {reference.score}")
    nothing = await run_with(spec, env, NothingAgent())
    if nothing.status == "error" or nothing.score != 0.0:
        raise Dropped("trial_nothing", nothing.error or f"score {nothing.score}")
    if any(s.score != 0.0 for s in nothing.scores.values()):
        raise Dropped("trial_nothing", "a verifier gives doing nothing partial credit")
    prefixes = []
    for k in range(1, calls):
        result = await run_with(spec, env, PrefixAgent(k))
        if result.status == "error":
            raise Dropped("trial_prefix", result.error or "error")
        if result.score is not None and result.score >= 1.0:
            raise Dropped("trial_prefix", f"the first {k} calls already pass")
        parts = [s.score for s in result.scores.values()]
        prefixes.append(round(sum(parts) / len(parts), 4) if parts else 0.0)
    return {"reference": 1.0, "nothing": 0.0, "prefixes": prefixes}
