"""`sft-chat`: one OpenAI chat conversation per line, for supervised fine-tuning.

    {"messages": [{"role": "system", ...}, {"role": "user", ...},
                  {"role": "assistant", "content": null, "tool_calls": [...]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "..."}, ...,
                  {"role": "assistant", "content": "<final answer>"}],
     "tools": [{"type": "function", "function": {"name", "description", "parameters"}}],
     "metadata": {"episode_id", "task", "agent", "agent_name", "score", "passed", ...}}

One line per agent per episode (a task with two prompted agents gives two lines). Filter
by score with `--min-score` / `--passed-only`; `metadata=False` drops the metadata key for
trainers that refuse unknown keys.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentenv.rollout.exporters.base import (
    Exporter,
    chat_messages,
    chat_tools,
    conversations,
    episode_metadata,
)
from agentenv.rollout.exporters.registry import EXPORTERS
from agentenv.rollout.store import EpisodeRecord


@EXPORTERS.add_builtin
class SftChatExporter(Exporter):
    """OpenAI chat messages with tool calls and tool results, one conversation a line."""

    name = "sft-chat"
    description = "OpenAI chat messages with tool calls and results, one conversation a line"

    @classmethod
    def options(cls) -> dict[str, Any]:
        return {"metadata": True, "tools": True}

    def documents(self, record: EpisodeRecord) -> Iterator[dict[str, Any]]:
        for conversation in conversations(record):
            doc: dict[str, Any] = {"messages": chat_messages(conversation)}
            if self.config["tools"]:
                doc["tools"] = chat_tools(conversation)
            if self.config["metadata"]:
                doc["metadata"] = episode_metadata(record, conversation.agent_name)
            yield doc
