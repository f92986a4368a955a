"""Role names documents share."""

from __future__ import annotations

RESERVED_ROLE = "system"
"""The role of the gateway's own principal (trigger actions, control operations): it passes
every access rule, so no document, executor or caller may name it."""
