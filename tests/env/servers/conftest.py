"""Each test here checks only the child sessions it started (see children.py)."""

from __future__ import annotations

import pytest
from tests.env.servers import children


@pytest.fixture(autouse=True)
def _children_before() -> None:
    children.mark()
