"""Providers by name: ours, and a clear refusal for names we do not have."""

from __future__ import annotations

import pytest

from agentenv.sandbox import SANDBOXES, LocalProvider, SandboxError, sandbox_provider


def test_the_built_in_providers_are_found_by_name() -> None:
    assert SANDBOXES.names()[:2] == ["local", "bwrap"]
    assert isinstance(sandbox_provider("local"), LocalProvider)


def test_an_unknown_provider_names_ours_and_the_entry_point() -> None:
    with pytest.raises(SandboxError) as caught:
        sandbox_provider("modal")
    message = str(caught.value)
    assert "'modal'" in message and "local, bwrap" in message
    assert "agentenv.sandboxes" in message
