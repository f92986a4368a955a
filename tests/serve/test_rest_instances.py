"""The REST face of the instance-id rule (issue 11, defect 8): `POST /instances` refuses an
id that is not a safe URL path segment and file name, with a 400 naming the rule, and the
refused id never becomes an instance. The rule itself is the gateway's
(`agentenv.gateway.errors.INSTANCE_ID_RULE`), so every way in is held to it."""

from __future__ import annotations

import json
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


# -- one route table: an instance's routes are the root's ---------------------------------


def test_every_root_route_answers_under_an_instance_as_at_the_root(
    served: httpx.Client, gateway: Gateway
) -> None:
    # The instance routes are not registered twice: the root ones serve them (with the
    # instance id in the path parameters). A fresh instance answers every read as the
    # default one does, and a write through one is seen through that one only.
    served.post("/instances", json={"id": "ep"})
    card_root = served.get("/.well-known/agent-env.json").json()
    card_ep = served.get("/instances/ep/.well-known/agent-env.json").json()
    assert json.dumps(card_ep).count("/instances/ep/") > 0
    assert json.dumps(card_root).count("/instances/") == 0
    for path in ("/state", "/clock/state", "/triggers/state", "/trajectory", "/changes"):
        root, inst = served.get(path), served.get(f"/instances/ep{path}")
        assert (root.status_code, inst.status_code) == (200, 200), (path, inst.text)
    served.put("/instances/ep/clock/set-time", json={"virtual_time": "2026-03-02T09:00:00Z"})
    assert served.get("/instances/ep/clock/time").status_code == 200
    assert served.get("/clock/time").status_code == 404  # the default clock is not armed
    state = served.get("/instances/ep/clock/state").json()
    assert state["env_get_time_url"].endswith("/instances/ep/clock/time")
    assert served.get("/instances/nope/clock/state").status_code == 404
    assert served.put("/instances/ep/step").status_code == 405
    assert served.put("/instances/ep/step").headers["allow"] == "POST"


@pytest.mark.parametrize(
    "path", ["/instances/ep/instances", "/instances/ep/openapi.json", "/instances/ep/docs"]
)
def test_app_routes_are_not_served_under_an_instance(served: httpx.Client, path: str) -> None:
    # Only the root routes every instance has are routed under /instances/{id}/: the
    # app's own (the instance list, the OpenAPI document) are not, as before.
    served.post("/instances", json={"id": "ep"})
    r = served.get(path)
    assert r.status_code == 404, r.text
    assert r.json()["error"]["kind"] == "not_found"
