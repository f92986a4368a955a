"""The oracle agent: replays the task's reference solution for each prompt."""

from __future__ import annotations

from agentenv.agents.base import AgentError, AgentTurn


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
