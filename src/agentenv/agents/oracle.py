"""The oracle agent: replays the task's reference solution for each prompt."""

from __future__ import annotations

from agentenv.agents.base import AgentError, AgentTurn
from agentenv.spec.task import SolutionCall


class OracleAgent:
    """Calls the reference solution's tools in order, then answers its response.

    A failing call does not stop the replay (the verifiers will tell); a prompt with no
    reference solution is an error, since there is nothing honest to answer.
    """

    name = "oracle"

    async def run_turn(self, turn: AgentTurn) -> str:
        """Replay the calls of `turn.solution`."""
        if turn.solution is None:
            raise AgentError(
                f"no reference solution reached the oracle for prompt {turn.prompt_id!r}: "
                "the task has none under `solution:`, or it was withheld (a2a ...?solution=never)"
            )
        if turn.conversation_turn == 0:  # in a conversation, the work is done on the first
            for call in turn.solution.calls:
                await turn.tools.call(call.tool, call.args, env_id=call.env_id)
        return turn.solution.response


class NoopAgent:
    """Does nothing: no tool call, an empty answer. A verifier it passes cannot tell a
    solved task from an untouched one (what `agent-env trials` looks for)."""

    name = "noop"

    async def run_turn(self, turn: AgentTurn) -> str:
        """Answer nothing."""
        return ""


class PartialOracleAgent:
    """The oracle's first half: the first half of the reference solution's calls (of a
    solution that is one `bash` script, the first half of its lines, cut where the shell
    still parses it), and no answer. A verifier it passes rewards unfinished work."""

    name = "partial"

    async def run_turn(self, turn: AgentTurn) -> str:
        """Replay half of `turn.solution`."""
        if turn.solution is None:
            raise AgentError(f"no reference solution for prompt {turn.prompt_id!r} to take half of")
        if turn.conversation_turn == 0:
            for call in half_of(turn.solution.calls):
                await turn.tools.call(call.tool, call.args, env_id=call.env_id)
        return ""


def half_of(calls: list[SolutionCall]) -> list[SolutionCall]:
    """The first half of a solution's calls; one bash call becomes its first half."""
    if len(calls) != 1:
        return calls[: len(calls) // 2]
    only = calls[0]
    command = only.args.get("command")
    if only.tool != "bash" or not isinstance(command, str):
        return []
    lines = command.splitlines()
    for cut in range(len(lines) // 2, 0, -1):
        script = "\n".join(lines[:cut]) + "\n"
        if script.strip() and _parses(script):
            return [only.model_copy(update={"args": {**only.args, "command": script}})]
    return []


def _parses(script: str) -> bool:
    import shutil
    import subprocess

    shell = shutil.which("bash") or "/bin/sh"
    done = subprocess.run([shell, "-n"], input=script, capture_output=True, text=True)
    return done.returncode == 0 and not done.stderr  # an open heredoc only warns
