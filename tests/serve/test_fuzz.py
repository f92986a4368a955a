"""Schema-driven fuzzing of real servers: schemathesis reads the served `/openapi.json` and
sends each operation generated requests. No answer may be a 5xx, every status must be one
the document lists for the operation, and a method a path does not have is a 405 with
`Allow`.

Two servers, each a real uvicorn on a free loopback port:

- the support-desk example in trusted local mode: the root operations, with every phase
  (schema examples, the coverage phase's boundary and invalid values and undeclared
  methods, random generation). The `/instances/{instance_id}/...` copies run the same
  handlers and are left to the second server;
- the personal example (ten composed services, so `/svc/{svc_key}` leads somewhere) with
  bearer tokens: every operation, random generation only, as the admin, as an agent, or
  with whatever bearer schemathesis makes up; and `/step` again with valid bodies only, as
  the admin, so that most of its ~100 tools are called with arguments their schemas allow.

The run is bounded (examples per operation) and derandomized (a failure reproduces);
generated path ids are sometimes swapped for live ones, so the handlers are reached
rather than answering 404.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import status_code_conformance, unsupported_method

from agentenv import Environment, Gateway

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envs"
TOKENS = {"fuzz-admin-secret": "admin", "fuzz-agent-secret": "assistant"}
LIVE_INSTANCE = "ep-1"
# Random examples per operation: the whole module stays within the suite's budget.
MAX_EXAMPLES = 10
STEP_EXAMPLES = 150
CHECKS = [not_a_server_error, status_code_conformance, unsupported_method]
INSTANCE_ROUTES = r"^/instances/\{instance_id\}/"

Server = Callable[..., contextlib.AbstractContextManager[str]]


def _schema(url: str, children: list[str]) -> Any:
    """The server's own document, loaded by schemathesis, seeded, with live ids mixed in."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", timeout=15)
    schema.config.update(base_url=url)
    schema.config.seed = 20261202

    @schema.hook("flatmap_path_parameters")
    def live_ids(context: Any, path_parameters: dict[str, Any] | None) -> Any:
        # A random id mostly answers 404; also draw ids that exist.
        if not path_parameters:
            return st.just(path_parameters)
        live = {"instance_id": ["default", LIVE_INSTANCE], "svc_key": children}
        return st.fixed_dictionaries(
            {
                name: st.sampled_from([value, *live.get(name, [])])
                for name, value in path_parameters.items()
            }
        )

    return schema


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    """One connection pool for all the generated requests."""
    with requests.Session() as session:
        yield session


@pytest.fixture(scope="module")
def desk_schema(live_server: Server) -> Iterator[Any]:
    """A real server over the support-desk example, trusted local mode."""
    gateway = Gateway(Environment.load(EXAMPLES / "support-desk"))
    gateway.create_instance(LIVE_INSTANCE)
    with live_server(gateway) as url:
        yield _schema(url, [])


@pytest.fixture(scope="module")
def personal_url(live_server: Server) -> Iterator[str]:
    """A real server over the composed personal example, with bearer tokens."""
    gateway = Gateway(Environment.load(EXAMPLES / "personal"))
    gateway.create_instance(LIVE_INSTANCE)
    with live_server(gateway, tokens=TOKENS) as url:
        yield url


def _children(url: str) -> list[str]:
    card = requests.get(f"{url}/.well-known/agent-env.json", timeout=15).json()
    children = [child["url"].split("/")[2] for child in card["children_environments"]]
    assert children, "the personal example composes services"
    return children


@pytest.fixture(scope="module")
def personal_schema(personal_url: str) -> Any:
    """The personal server's document: random generation, as the admin, as an agent, or
    with whatever bearer schemathesis makes up (the 401 paths)."""
    schema = _schema(personal_url, _children(personal_url))
    schema.config.phases.coverage.enabled = False

    @schema.hook("flatmap_headers")
    def tokens(context: Any, headers: dict[str, Any] | None) -> Any:
        generated = _without_framing(headers)
        bearers = [{**generated, "Authorization": f"Bearer {secret}"} for secret in TOKENS]
        return st.sampled_from([*bearers, generated])

    return schema


_FRAMING = {"content-length", "transfer-encoding", "connection", "host"}


def _without_framing(headers: dict[str, Any] | None) -> dict[str, Any]:
    """Generated headers less HTTP's own framing ones: a made-up `Content-Length` is refused
    by the HTTP server (uvicorn's 400) before any route of ours sees the request."""
    return {k: v for k, v in (headers or {}).items() if k.lower() not in _FRAMING}


@pytest.fixture(scope="module")
def personal_tools_schema(personal_url: str) -> Any:
    """The same document for calling the tools: valid bodies only, as the admin."""
    schema = _schema(personal_url, _children(personal_url))
    schema.config.phases.coverage.enabled = False
    schema.config.generation.update(modes=[GenerationMode.POSITIVE])
    admin = next(secret for secret, role in TOKENS.items() if role == "admin")

    @schema.hook("map_headers")
    def as_admin(context: Any, headers: dict[str, Any] | None) -> dict[str, Any]:
        return {**(headers or {}), "Authorization": f"Bearer {admin}"}

    return schema


_FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],  # no shrinking: the first failure is reported
    suppress_health_check=list(HealthCheck),
)
desk = schemathesis.pytest.from_fixture("desk_schema").exclude(path_regex=INSTANCE_ROUTES)
personal = schemathesis.pytest.from_fixture("personal_schema")
personal_tools = schemathesis.pytest.from_fixture("personal_tools_schema")


@desk.parametrize()
@_FUZZ
def test_fuzzing_the_trusted_desk_server_finds_no_server_error(
    case: Any, http: requests.Session
) -> None:
    case.call_and_validate(checks=CHECKS, session=http, timeout=15)


@personal.parametrize()
@_FUZZ
def test_fuzzing_the_composed_server_with_tokens_finds_no_server_error(
    case: Any, http: requests.Session
) -> None:
    case.call_and_validate(checks=CHECKS, session=http, timeout=15)


@personal_tools.include(path="/step", method="POST").parametrize()
@settings(_FUZZ, max_examples=STEP_EXAMPLES)
def test_fuzzing_the_tools_of_a_composed_server_through_step_finds_no_server_error(
    case: Any, http: requests.Session
) -> None:
    # `/step` has one body per tool (its input schema): enough examples to call most tools.
    case.call_and_validate(checks=CHECKS, session=http, timeout=15)
