"""`GET /openapi.json` describes the API: every `$ref` resolves, every templated path
parameter is declared, the error answers are documented, a wrong method is 405 with
`Allow`, and a schema-driven fuzzer can load every operation (tests/serve/test_fuzz.py
then drives a real server with it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from pydantic import BaseModel
from schemathesis.core.result import Ok

from agentenv import Environment, Gateway
from agentenv.gateway.auth import Authenticator
from agentenv.serve import create_app
from agentenv.serve.openapi import complete

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "envs"
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
BODY_METHODS = ("post", "put", "patch", "delete")
PUBLIC = {"/", "/.well-known/agent-env.json", "/svc/{svc_key}/.well-known/agent-env.json"}


def operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, item[method])
        for path, item in doc["paths"].items()
        for method in METHODS
        if method in item
    ]


def resolve(doc: dict[str, Any], node: Any) -> Any:
    """`node`, or what its `$ref` points at in `doc` (KeyError if nothing)."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        assert ref.startswith("#/"), ref
        node = doc
        for part in ref[2:].split("/"):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return own + [r for value in node.values() for r in refs(value)]
    if isinstance(node, list):
        return [r for value in node for r in refs(value)]
    return []


def unprefixed(path: str) -> str:
    return path.removeprefix("/instances/{instance_id}") or "/"


@pytest.fixture(scope="module")
def personal_env() -> Environment:
    """The composed personal example (ten services: many tools, `/svc/{key}` children)."""
    return Environment.load(EXAMPLES / "personal")


def _documents(desk_env: Environment, personal_env: Environment) -> dict[str, dict[str, Any]]:
    tokens = Authenticator({"s2": "admin"}, default_role="agent")
    return {
        "desk trusted": create_app(Gateway(desk_env)).openapi(),
        "desk tokens": create_app(Gateway(desk_env), auth=tokens).openapi(),
        "personal": create_app(Gateway(personal_env)).openapi(),
        "desk beyond loopback": create_app(
            Gateway(desk_env), auth=Authenticator(trusted_local=False), loopback=False
        ).openapi(),
    }


@pytest.fixture(scope="module")
def documents(desk_env: Environment, personal_env: Environment) -> dict[str, dict[str, Any]]:
    """The documents of apps in each mode, by name."""
    return _documents(desk_env, personal_env)


async def test_the_served_document_is_the_apps(client: httpx.AsyncClient) -> None:
    r = await client.get("/openapi.json")
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.1")
    assert doc["info"]["title"] == "agentenv: test-desk"
    assert "/instances/{instance_id}/step" in doc["paths"]


def test_every_document_is_valid_openapi(documents: dict[str, dict[str, Any]]) -> None:
    # Installed here but not named by the dev extra (nor needed by schemathesis) yet.
    validate = pytest.importorskip("openapi_spec_validator").validate
    for name, doc in documents.items():
        validate(doc)  # raises with the path of what is wrong
        assert doc["openapi"].startswith("3.1"), name


def test_every_ref_resolves_and_no_pydantic_defs_are_left(
    documents: dict[str, dict[str, Any]],
) -> None:
    for name, doc in documents.items():
        found = refs(doc)
        assert found, name
        for ref in found:
            resolve(doc, {"$ref": ref})  # KeyError names the missing part
        assert "$defs" not in repr(doc), name
        mappings = re.findall(r"'mapping': \{[^}]*\}", repr(doc))
        assert all("#/components/schemas/" in m for m in mappings), (name, mappings)


class _Inner(BaseModel):
    n: int


class _Outer(BaseModel):
    inner: _Inner
    many: list[_Inner]


class _OtherInner(BaseModel):
    s: str


def test_defs_anywhere_in_an_operation_become_components() -> None:
    # A route's own response and parameter schemas (not only request bodies) may carry
    # pydantic `$defs`; a second model of the same name gets its own component.
    clash = _OtherInner.model_json_schema()
    clash["title"] = "_Inner"
    doc = {
        "openapi": "3.1.0",
        "info": {"title": "t", "version": "1"},
        "paths": {
            "/x/{instance_id}": {
                "post": {
                    "requestBody": {"content": {"application/json": {"schema": clash}}},
                    "parameters": [
                        {"name": "q", "in": "query", "schema": _Outer.model_json_schema()}
                    ],
                    "responses": {
                        "200": {
                            "description": "ok",
                            "content": {"application/json": {"schema": _Outer.model_json_schema()}},
                        }
                    },
                }
            }
        },
    }
    done = complete(doc)
    validate = pytest.importorskip("openapi_spec_validator").validate
    validate(done)
    for ref in refs(done):
        resolve(done, {"$ref": ref})
    assert "$defs" not in repr(done)
    schemas = done["components"]["schemas"]
    assert {tuple(schemas[name]["properties"]) for name in ("_Inner", "_Inner2")} == {
        ("n",),
        ("s",),
    }
    inner = resolve(done, schemas["_Outer"]["properties"]["inner"])
    assert resolve(done, schemas["_Outer"]["properties"]["many"]["items"]) == inner
    assert list(inner["properties"]) == ["n"]
    op = done["paths"]["/x/{instance_id}"]["post"]
    assert op["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/_Outer"
    }
    assert [p.get("name") or p["$ref"] for p in op["parameters"]][:2] == [
        "#/components/parameters/InstanceId",
        "q",
    ]


def test_every_templated_path_parameter_is_declared(
    documents: dict[str, dict[str, Any]],
) -> None:
    for name, doc in documents.items():
        for path, method, op in operations(doc):
            params = [resolve(doc, p) for p in op.get("parameters", [])]
            declared = sorted(p["name"] for p in params if p["in"] == "path")
            assert declared == sorted(re.findall(r"{([^}]+)}", path)), (name, method, path)
            assert all(p["required"] for p in params if p["in"] == "path")


def test_instance_routes_declare_instance_id_and_its_404(
    documents: dict[str, dict[str, Any]],
) -> None:
    doc = documents["desk trusted"]
    op = doc["paths"]["/instances/{instance_id}/step"]["post"]
    [instance_id] = [
        p for p in map(lambda p: resolve(doc, p), op["parameters"]) if p["in"] == "path"
    ]
    assert instance_id["name"] == "instance_id"
    assert instance_id["schema"]["type"] == "string"
    assert resolve(doc, op["responses"]["404"])["description"]


def test_every_error_answer_is_documented_with_the_error_body(
    documents: dict[str, dict[str, Any]],
) -> None:
    for name, doc in documents.items():
        for path, method, op in operations(doc):
            where = (name, method, path)
            responses = op["responses"]
            statuses = set(responses)
            assert "500" not in statuses and "422" not in statuses, where
            if name in ("desk trusted", "personal"):
                assert "403" in statuses, where  # a foreign Origin, at least
            if "requestBody" in op:
                assert {"413"} <= statuses, where
                assert "400" in statuses or unprefixed(path).endswith("agentenv"), where
            if method in BODY_METHODS:
                assert "415" in statuses, where
            if unprefixed(path) not in PUBLIC:
                assert "401" in statuses, where
            if "{instance_id}" in path or "{svc_key}" in path:
                assert "404" in statuses, where
            assert ("421" in statuses) == (name != "desk beyond loopback"), where
            for status, response in responses.items():
                response = resolve(doc, response)
                assert response["description"], (*where, status)
                if not status.startswith("4") or unprefixed(path) in ("/mcp", "/changes"):
                    continue
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorBody"}, (*where, status)
        body = resolve(doc, {"$ref": "#/components/schemas/ErrorBody"})
        assert body["required"] == ["error"]
        assert resolve(doc, body["properties"]["error"])["required"] == ["code", "message", "kind"]


def test_route_specific_errors_are_documented(documents: dict[str, dict[str, Any]]) -> None:
    paths = documents["desk tokens"]["paths"]  # no foreign-Origin 403 on every route there
    assert "403" not in paths["/state"]["get"]["responses"]
    for path, method in [
        ("/clock/set-time", "put"),
        ("/clock/advance", "post"),
        ("/clock/clear", "post"),
        ("/triggers/register", "post"),
        ("/triggers/remove", "post"),
        ("/triggers/clear", "post"),
        ("/tools/disable", "post"),
        ("/tools/enable", "post"),
        ("/instances", "post"),
        ("/instances/{instance_id}", "delete"),
    ]:
        assert "403" in paths[path][method]["responses"], (method, path)  # admin only
    assert {"403", "404", "504"} <= set(paths["/step"]["post"]["responses"])
    assert "404" in paths["/clock/time"]["get"]["responses"]
    assert "400" in paths["/instances/{instance_id}"]["delete"]["responses"]
    assert "401" not in paths["/.well-known/agent-env.json"]["get"]["responses"]
    mcp = paths["/mcp"]["post"]["responses"]
    assert {"200", "202", "401", "406", "413", "415"} <= set(mcp)
    assert "JsonRpcResponse" in repr(mcp["401"])


def test_the_credentials_are_declared_as_the_mode_reads_them(
    documents: dict[str, dict[str, Any]],
) -> None:
    trusted, tokens = documents["desk trusted"], documents["desk tokens"]
    assert "securitySchemes" not in trusted["components"]
    step = trusted["paths"]["/step"]["post"]
    headers = [resolve(trusted, p)["name"] for p in step["parameters"]]
    assert headers == ["AgentEnv-Role", "AgentEnv-Session"]
    assert tokens["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    step = tokens["paths"]["/step"]["post"]
    assert step["security"] == [{"bearer": []}]
    assert [resolve(tokens, p)["name"] for p in step["parameters"]] == ["AgentEnv-Session"]
    card = tokens["paths"]["/.well-known/agent-env.json"]["get"]
    assert "security" not in card and "parameters" not in card


def test_step_describes_a_call_of_each_tool(
    documents: dict[str, dict[str, Any]], desk_env: Environment
) -> None:
    doc = documents["desk trusted"]
    schema = doc["paths"]["/step"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    variants = resolve(doc, schema)["anyOf"]
    generic = resolve(doc, variants[0])
    assert generic["properties"]["action"]["enum"] == ["list_tools", "call_tool"]
    calls = {}
    for variant in map(lambda v: resolve(doc, v), variants[1:]):
        calls[variant["properties"]["tool_name"]["const"]] = variant["properties"]["arguments"]
    assert sorted(calls) == sorted(desk_env.tools)
    assert calls["add_note"] == desk_env.tools["add_note"].input_schema


def test_the_data_plane_describes_its_three_methods(documents: dict[str, dict[str, Any]]) -> None:
    doc = documents["personal"]
    op = doc["paths"]["/svc/{svc_key}/agentenv"]["post"]
    one = op["requestBody"]["content"]["application/json"]["schema"]["anyOf"][0]
    methods = [variant["properties"]["method"]["const"] for variant in one["oneOf"]]
    assert methods == ["data/reset", "data/add", "data/get"]
    assert "400" not in op["responses"]  # a body that is not JSON is a JSON-RPC parse error
    assert "x-agentenv-errors-in-json-rpc" not in op


def test_a_fuzzer_can_load_every_operation(documents: dict[str, dict[str, Any]]) -> None:
    for name, doc in documents.items():
        schema = schemathesis.openapi.from_dict(doc)
        results = list(schema.get_all_operations())
        bad = [r.err() for r in results if not isinstance(r, Ok)]
        assert not bad, (name, bad)
        assert len(results) == len(operations(doc)), name


# -- 405 with Allow -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("GET", "/step", {"POST"}),
        ("DELETE", "/clock/time", {"GET"}),
        ("PUT", "/instances", {"GET", "POST"}),  # two routes at one path
        ("PATCH", "/instances/default/state", {"GET"}),
        ("GET", "/instances/ep-1", {"DELETE"}),
        ("POST", "/openapi.json", {"GET", "HEAD"}),  # Starlette's own route adds HEAD
    ],
)
async def test_a_wrong_method_is_405_with_the_methods_of_the_path(
    client: httpx.AsyncClient, method: str, path: str, allowed: set[str]
) -> None:
    r = await client.request(method, path)
    assert r.status_code == 405, r.text
    assert r.json()["error"]["kind"] == "method_not_allowed"
    assert set(r.headers["allow"].split(", ")) == allowed


async def test_every_documented_path_answers_an_undeclared_method_with_its_allow(
    client: httpx.AsyncClient,
) -> None:
    doc = (await client.get("/openapi.json")).json()
    for path, item in doc["paths"].items():
        if unprefixed(path) == "/mcp":
            continue  # the MCP SDK's endpoint takes every method itself
        declared = {m.upper() for m in METHODS if m in item}
        url = path.format(instance_id="default", svc_key="nope")
        r = await client.request("TRACE", url)
        assert r.status_code == 405, (path, r.text)
        assert set(r.headers["allow"].split(", ")) - {"HEAD"} == declared, path
