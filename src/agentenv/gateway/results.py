"""CallResult: what `Gateway.call` returns, and its wire forms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentenv.spec.wire import CallError, StepResult, TextContent


@dataclass(slots=True)
class CallResult:
    """The outcome of one tool call. `ok` is False for every kind of failure."""

    ok: bool
    value: Any
    text: str
    error: CallError | None
    changelog_id: int
    seq: int
    state_hash: str

    @property
    def denied(self) -> bool:
        """Whether access rules refused the call."""
        return self.error is not None and self.error.kind == "denied"

    @property
    def structured(self) -> dict[str, Any] | None:
        """MCP's `structuredContent`: the result if it is an object, else `{"result": ...}`."""
        if self.error is not None:
            return None
        return self.value if isinstance(self.value, dict) else {"result": self.value}

    def to_step_result(self) -> StepResult:
        """The protocol's answer to a `call_tool` step."""
        return StepResult(
            content=[TextContent(text=self.text)],
            isError=not self.ok,
            structuredContent=self.structured,
            changelog_id=self.changelog_id,
            error=self.error,
        )

    def to_wire(self) -> dict[str, Any]:
        """`to_step_result()` as JSON data, built directly (this is the hot path of /step)."""
        body: dict[str, Any] = {
            "content": [{"type": "text", "text": self.text}],
            "isError": not self.ok,
            "structuredContent": self.structured,
            "changelog_id": self.changelog_id,
        }
        if self.error is not None:
            body["error"] = {"kind": self.error.kind, "message": self.error.message}
        return body
