"""The time service children read virtual time from: a real loopback HTTP server on the
children's loop, one URL per clock source, nothing answered for a forgotten one."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from agentenv.env.servers import loop
from agentenv.env.servers.clock import TimeService, wants_clock
from agentenv.env.servers.session import McpChild


def test_each_url_reads_its_own_clock_and_stops_when_forgotten() -> None:
    service = TimeService()
    moments: dict[str, datetime | None] = {"a": None, "b": datetime(2030, 5, 1, 9, tzinfo=UTC)}
    url_a, token_a = loop.run(service.url_for(lambda: moments["a"]))
    url_b, _ = loop.run(service.url_for(lambda: moments["b"]))
    assert url_a.startswith("http://127.0.0.1:") and url_a != url_b

    unarmed = httpx.get(url_a, timeout=5)
    assert unarmed.status_code == 404 and unarmed.json()["error"] == "clock not armed"
    assert httpx.get(url_b, timeout=5).json() == {"virtual_time": "2030-05-01T09:00:00Z"}

    moments["a"] = datetime(2026, 3, 2, 8, 30, tzinfo=UTC)  # read live, not copied
    assert httpx.get(url_a, timeout=5).json() == {"virtual_time": "2026-03-02T08:30:00Z"}

    service.forget(token_a)
    assert httpx.get(url_a, timeout=5).status_code == 404
    guessed = url_b.rsplit("/", 2)[0] + "/not-a-token/time"
    assert httpx.get(guessed, timeout=5).status_code == 404


def test_only_a_card_advertising_sync_time_asks_for_the_clock() -> None:
    def child(card: dict | None) -> McpChild:
        return McpChild(label="x", card=card)

    clock = {"uri": "urn:agentenv:clock/v1", "params": {"methods": {"sync_time": {}}}}
    other = {"uri": "urn:agentenv:clock/v1", "params": {"methods": {"get_time": {}}}}
    assert wants_clock(child({"capabilities": {"extensions": [clock]}}))
    assert not wants_clock(child({"capabilities": {"extensions": [other]}}))
    assert not wants_clock(child({"capabilities": {"extensions": None}}))
    assert not wants_clock(child(None))
