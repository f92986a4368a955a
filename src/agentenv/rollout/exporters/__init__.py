"""Exporters: episode records to training and interchange formats, found by name in
`EXPORTERS` (built-ins: sft-chat, rl, parquet, atif; plugins: `agentenv.exporters`)."""

from agentenv.rollout.exporters import atif, parquet, rl, sft_chat  # noqa: F401 (registers)
from agentenv.rollout.exporters.atif import ATIF_SCHEMA, ATIF_VERSION, validate_atif
from agentenv.rollout.exporters.base import (
    BinaryExporter,
    Conversation,
    Exporter,
    ExportError,
    ExportFilter,
    ExportWarning,
    MessageView,
    PromptView,
    ToolCallView,
    chat_messages,
    conversations,
    safe_file_name,
)
from agentenv.rollout.exporters.parquet import read_parquet_records
from agentenv.rollout.exporters.registry import EXPORTERS, export_run, get_exporter

__all__ = [
    "ATIF_SCHEMA",
    "ATIF_VERSION",
    "EXPORTERS",
    "BinaryExporter",
    "Conversation",
    "ExportError",
    "ExportFilter",
    "ExportWarning",
    "Exporter",
    "MessageView",
    "PromptView",
    "ToolCallView",
    "chat_messages",
    "conversations",
    "export_run",
    "get_exporter",
    "read_parquet_records",
    "safe_file_name",
    "validate_atif",
]
