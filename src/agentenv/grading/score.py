"""Score: what every verifier produces."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class Score(BaseModel):
    """A verifier's verdict: a score in [0, 1], whether it passed, and why."""

    score: float = Field(ge=0, le=1)
    passed: bool
    details: dict[str, Any] = Field(default_factory=dict)
