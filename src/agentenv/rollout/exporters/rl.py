"""`rl`: one episode per line, as a prompt, a trajectory of steps with rewards, and the
final reward, for reinforcement learning.

    {"episode_id", "task", "agent", "agent_name", "seed", "repeat", "status", "passed",
     "prompt": [<system>, <first user message>],          # OpenAI chat messages
     "completion": [<every later message>],               # tool calls, results, answers
     "trajectory": [
        {"t": 0, "type": "tool_call", "prompt_id", "tool", "arguments", "tool_call_id",
         "observation", "is_error", "state_hash", "virtual_time", "reward": 0.0},
        {"t": 5, "type": "response", "prompt_id", "content", "reward": 1.0},
        {"t": 6, "type": "user", "prompt_id", "content", "reward": 0.0}, ...],
     "step_rewards": [<one per trajectory step>],
     "final_reward": 1.0, "rewards": {<verifier step id>: <score>}, "usage": {...}}

Rewards are sparse: every step earns 0 except the agent's last (its last tool call or
answer; a simulated user's closing message is not the agent's), which earns the final
reward (its score; 1/0 by `passed` when no verifier scored it; 0 for errors and timeouts).
The per-verifier scores are in `rewards` for trainers that shape their own.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentenv.rollout.exporters.base import (
    Exporter,
    MessageView,
    chat_messages,
    chat_tools,
    conversations,
    episode_metadata,
)
from agentenv.rollout.exporters.registry import EXPORTERS
from agentenv.rollout.store import EpisodeRecord


@EXPORTERS.add_builtin
class RlExporter(Exporter):
    """Prompt, trajectory with per-step rewards, final reward; one episode-agent a line."""

    name = "rl"
    description = "prompt, trajectory with per-step rewards and the final reward, one a line"

    @classmethod
    def options(cls) -> dict[str, Any]:
        return {"tools": True}

    def documents(self, record: EpisodeRecord) -> Iterator[dict[str, Any]]:
        final = record.reward()
        for conversation in conversations(record):
            messages = chat_messages(conversation)
            split = 2 if conversation.system_prompt else 1
            steps: list[dict[str, Any]] = []
            first = True
            for turn in conversation.turns:
                pid = turn.prompt.prompt_id
                for event in turn.events:
                    if isinstance(event, MessageView):
                        if first and event.role == "user":
                            first = False  # the prompt itself
                            continue
                        kind = "user" if event.role == "user" else "response"
                        steps.append({"type": kind, "prompt_id": pid, "content": event.content})
                        continue
                    steps.append(
                        {
                            "type": "tool_call",
                            "prompt_id": pid,
                            "tool": event.name,
                            "arguments": event.arguments,
                            "tool_call_id": event.call_id,
                            "observation": event.content,
                            "is_error": event.is_error,
                            "state_hash": event.state_hash,
                            "virtual_time": event.virtual_time,
                        }
                    )
            acts = [i for i, st in enumerate(steps) if st["type"] != "user"]
            last = acts[-1] if acts else len(steps) - 1
            for t, step in enumerate(steps):
                step["t"] = t
                step["reward"] = final if t == last else 0.0
            doc = episode_metadata(record, conversation.agent_name)
            doc.update(
                prompt=messages[:split],
                completion=messages[split:],
                trajectory=steps,
                step_rewards=[s["reward"] for s in steps],
                final_reward=final,
                rewards={k: s.score for k, s in record.scores.items()},
                usage=record.usage,
            )
            if self.config["tools"]:
                doc["tools"] = chat_tools(conversation)
            yield doc
