"""The REST face of the instance-id rule (issue 11, defect 8): `POST /instances` refuses an
id that is not a safe URL path segment and file name, with a 400 naming the rule, and the
refused id never becomes an instance. The rule itself is the gateway's
(`agentenv.gateway.errors.INSTANCE_ID_RULE`), so every way in is held to it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from agentenv import Gateway
from agentenv.gateway.errors import INSTANCE_ID_RULE

REFUSED = [
    "..",
    ".",
    ".hidden",
    "-rf",
    "_private",
    "a b",
    "tab\there",
    "line\nbreak",
    "a\\b",
    "café",
    "%2e%2e",
    "x" * 129,
    "semi;colon",
    "q?x=1",
    "frag#1",
]
ACCEPTED = ["a", "ep-1", "Episode_7.retry-2", "0", "x" * 128]


@pytest.fixture
def served(
    gateway: Gateway,
    live_server: Callable[..., Any],
    http_client: Callable[..., httpx.Client],
) -> Any:
    with live_server(gateway) as url, http_client(url) as client:
        yield client


def _refusal(response: httpx.Response) -> str:
    assert response.status_code == 400, response.text
    body = response.json()
    assert body["ok"] is False
    assert body["error"]["kind"] == "bad_request"
    return body["error"]["message"]


@pytest.mark.parametrize("instance_id", REFUSED, ids=[ascii(i)[:20] for i in REFUSED])
def test_an_unsafe_instance_id_is_refused_with_the_rule(
    served: httpx.Client, gateway: Gateway, instance_id: str
) -> None:
    message = _refusal(served.post("/instances", json={"id": instance_id}))
    assert INSTANCE_ID_RULE in message
    assert gateway.instances == ["default"]
    assert served.get("/instances").json() == {"instances": ["default"]}


@pytest.mark.parametrize("instance_id", ACCEPTED, ids=[i[:20] for i in ACCEPTED])
def test_a_safe_instance_id_is_accepted_and_addressable(
    served: httpx.Client, gateway: Gateway, instance_id: str
) -> None:
    created = served.post("/instances", json={"id": instance_id})
    assert created.status_code == 201, created.text
    assert created.json() == {"id": instance_id, "url": f"/instances/{instance_id}"}
    state = served.get(f"/instances/{instance_id}/state")
    assert state.status_code == 200, state.text
    assert gateway.instances == ["default", instance_id]


def test_a_generated_id_follows_the_rule(served: httpx.Client, gateway: Gateway) -> None:
    created = served.post("/instances")
    assert created.status_code == 201, created.text
    new = created.json()["id"]
    assert served.get(f"/instances/{new}/state").status_code == 200
    # The gateway checks what it generates by the same rule it holds callers to.
    gateway.drop_instance(new)
    assert gateway.create_instance(new).id == new
