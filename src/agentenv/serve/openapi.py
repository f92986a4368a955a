"""The served app's OpenAPI document (`GET /openapi.json`), complete enough for a client
generator or a schema-driven fuzzer to use every operation (docs/rest.md says what it holds).

FastAPI writes the paths from the routes; `openapi_schema` finishes the document:

- every templated path parameter is declared (`instance_id` of the routes included under
  `/instances/{instance_id}`, `svc_key`), as the handlers read them from the request;
- the request bodies' pydantic `$defs` are hoisted into `components/schemas`
  (`_openapi_refs`), so every `$ref` resolves;
- the error answers are documented, each with the one error body (`ErrorBody`), from the
  cross-cutting rules below and what each route declares with `operation_doc(errors=...)`;
- the credentials (bearer token, or the role header in trusted local mode) and the
  `AgentEnv-Session` header are declared;
- `/step` gets one body per tool besides the generic one; the JSON-RPC data plane and the
  MCP endpoint (a plain ASGI route that FastAPI does not see) are described.

Cross-cutting rules, from what the middleware and the shared plumbing refuse: every
operation can answer 403 in trusted local mode (a foreign `Origin`) and 421 on a loopback
server (`Host`); one with a body 400 and 413, one with a query 400; a POST, PUT, PATCH or
DELETE 415; one that needs credentials 401; one under `/instances/{instance_id}` or with a
`{svc_key}` 404. A method a path does not have is a 405 with `Allow` (serve/_errors.py).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from starlette.routing import BaseRoute

from agentenv.serve._openapi_refs import SCHEMAS, add_component, free_name, hoist_defs, hoisted
from agentenv.spec.wire import (
    DataAddParams,
    ErrorBody,
    JsonRpcRequest,
    JsonRpcResponse,
    ToolInfo,
)

JSON = "application/json"
ROLE_HEADER = "AgentEnv-Role"
SESSION_HEADER = "AgentEnv-Session"
_PARAM = re.compile(r"{([^}/]+)}")
# Markers our own routes set and `complete` removes.
_ERRORS_IN_JSON_RPC = "x-agentenv-errors-in-json-rpc"
_MCP = "x-agentenv-mcp"
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# What each error status means on this API (the description of its shared response).
ERROR_STATUSES: dict[int, tuple[str, str]] = {
    400: (
        "BadRequest",
        "Malformed JSON, a body of the wrong shape (the message names the field), nesting "
        "deeper than the limit, a bad query parameter, or a request the gateway cannot do.",
    ),
    401: ("Unauthenticated", "Missing or unknown bearer token, or a reserved role."),
    403: (
        "Forbidden",
        "The caller may not do this (a control operation without the admin role, a tool "
        "the role may not call), or a foreign `Origin` was refused.",
    ),
    404: ("NotFound", "No such instance, composed child, tool, or (`/clock/time`) no armed clock."),
    405: (
        "MethodNotAllowed",
        "The path exists but not with this method; `Allow` lists those it has.",
    ),
    413: ("TooLarge", "The body is over the server's `--max-body` bytes."),
    415: (
        "UnsupportedMediaType",
        "A `Content-Type` other than `application/json` (or `application/*+json`) on a POST, "
        "PUT, PATCH or DELETE.",
    ),
    421: (
        "MisdirectedRequest",
        "A `Host` naming neither a loopback address nor the one the server listens on "
        "(servers bound to loopback: a DNS-rebinding defence).",
    ),
    504: ("Timeout", "The tool ran past its timeout (`/step`: the result with `isError`)."),
}


def operation_doc(
    body: type[BaseModel] | None = None,
    *,
    errors: Iterable[int] = (),
    public: bool = False,
    body_required: bool = True,
) -> dict[str, Any]:
    """What a route adds to its operation (FastAPI's `openapi_extra`): its JSON body's model
    (bodies are parsed by hand, for our own error shape and speed), the error statuses it
    answers beyond the cross-cutting ones, and `public` for a route that needs no credentials."""
    extra: dict[str, Any] = {}
    if body is not None:
        schema = body.model_json_schema(by_alias=True)
        extra["requestBody"] = {"required": body_required, "content": {JSON: {"schema": schema}}}
    if errors:
        extra["responses"] = {str(status): _error_ref(status) for status in errors}
    if public:
        extra["security"] = []
    return extra


def openapi_schema(
    app: FastAPI,
    *,
    routes: Sequence[BaseRoute] | None = None,
    tokens_required: bool = False,
    loopback: bool = True,
    tools: Iterable[ToolInfo] = (),
) -> dict[str, Any]:
    """The OpenAPI document of `app` (of `routes`, if given, else the app's), built once
    and cached on it. `tokens_required`: the
    server wants bearer tokens (else it is in trusted local mode and reads the role header);
    `loopback`: it listens on loopback only (and checks `Host`); `tools`: the environment's
    tools, each described as a `/step` body of its own (its name and its input schema)."""
    if app.openapi_schema is None:
        doc = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes if routes is None else list(routes),
        )
        app.openapi_schema = complete(
            doc, tokens_required=tokens_required, loopback=loopback, tools=tools
        )
    return app.openapi_schema


def complete(
    doc: dict[str, Any],
    *,
    tokens_required: bool = False,
    loopback: bool = True,
    tools: Iterable[ToolInfo] = (),
) -> dict[str, Any]:
    """`doc` (FastAPI's) finished as the module docstring says; a new document."""
    doc = copy.deepcopy(doc)
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):  # FastAPI's 422: we answer 400
        schemas.pop(unused, None)
    paths = doc.setdefault("paths", {})
    paths.update(_mcp_paths())
    add_component(schemas, ErrorBody.model_json_schema(mode="serialization"))
    add_component(schemas, JsonRpcResponse.model_json_schema(mode="serialization"))
    components["responses"] = {
        name: _error_response(status, description)
        for status, (name, description) in ERROR_STATUSES.items()
    }
    components["responses"]["Unauthenticated"]["headers"] = {
        "WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}
    }
    components["responses"]["MethodNotAllowed"]["headers"] = {
        "Allow": {"description": "The methods the path has.", "schema": {"type": "string"}}
    }
    components["parameters"] = _parameters()
    if tokens_required:
        components["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer", "description": "`--token ROLE=SECRET`"}
        }
    for path, item in paths.items():
        for method in _METHODS:
            if method in item:
                op = item[method]
                _complete_operation(path, method, op, tokens_required=tokens_required)
                if loopback:
                    op["responses"].setdefault("421", _error_ref(421))
                if op.pop(_MCP, False):
                    _as_mcp_errors(op["responses"], components["responses"])
                op["responses"] = dict(sorted(op["responses"].items()))
    hoist_defs(doc, schemas)
    _describe_tool_calls(doc, schemas, list(tools))
    return doc


# -- operations -----------------------------------------------------------------------------


def _complete_operation(
    path: str, method: str, op: dict[str, Any], *, tokens_required: bool
) -> None:
    """Credentials, path and header parameters, and the cross-cutting error answers."""
    public = op.get("security") == []
    if public:
        del op["security"]  # no scheme is declared in trusted mode; [] would name none anyway
    elif tokens_required:
        op["security"] = [{"bearer": []}]
    params = [p for p in op.get("parameters", []) if p.get("in") != "path"]
    declared = [_path_param(name) for name in _PARAM.findall(path)]
    headers = [{"$ref": "#/components/parameters/Session"}]
    if not tokens_required:
        headers.insert(0, {"$ref": "#/components/parameters/Role"})
    op["parameters"] = declared + params + ([] if public and tokens_required else headers)
    if not op["parameters"]:
        del op["parameters"]
    responses = op.setdefault("responses", {})
    responses.pop("422", None)
    wanted = set() if tokens_required else {403}  # a foreign Origin, in trusted mode
    if "requestBody" in op:
        wanted |= {400, 413}
    if any(p.get("in") == "query" for p in params):
        wanted.add(400)
    if method in ("post", "put", "patch", "delete"):
        wanted.add(415)
    if not public:
        wanted.add(401)
    if "{instance_id}" in path or "{svc_key}" in path:
        wanted.add(404)
    if op.pop(_ERRORS_IN_JSON_RPC, False):
        wanted.discard(400)  # a body that is not JSON is answered as a JSON-RPC parse error
    for status in sorted(wanted):
        responses.setdefault(str(status), _error_ref(status))
    for status, response in responses.items():
        if status.startswith("4") and "$ref" not in response and "content" not in response:
            response["content"] = {JSON: {"schema": {"$ref": SCHEMAS + "ErrorBody"}}}
    if path.endswith("/changes") and responses.get("400") == _error_ref(400):
        responses["400"] = _CHANGES_400  # upstream's own shape there


def _path_param(name: str) -> dict[str, Any]:
    known = {"instance_id": "InstanceId", "svc_key": "SvcKey"}
    if name in known:
        return {"$ref": f"#/components/parameters/{known[name]}"}
    return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}


def _parameters() -> dict[str, Any]:
    return {
        "InstanceId": {
            "name": "instance_id",
            "in": "path",
            "required": True,
            "description": "An instance (`POST /instances` makes one; `default` is the root's).",
            "schema": {"type": "string", "minLength": 1, "examples": ["default"]},
        },
        "SvcKey": {
            "name": "svc_key",
            "in": "path",
            "required": True,
            "description": "A composed child's key (`email`, or `mcp-email` as upstream keys it).",
            "schema": {"type": "string", "minLength": 1},
        },
        "Role": {
            "name": ROLE_HEADER,
            "in": "header",
            "required": False,
            "description": "The caller's role (trusted local mode); the default role if absent.",
            "schema": {"type": "string"},
        },
        "Session": {
            "name": SESSION_HEADER,
            "in": "header",
            "required": False,
            "description": "Written to the `session` field of a call's trajectory record.",
            "schema": {"type": "string"},
        },
    }


def _error_ref(status: int) -> dict[str, Any]:
    if status not in ERROR_STATUSES:
        raise ValueError(f"no error response is described for status {status}")
    return {"$ref": f"#/components/responses/{ERROR_STATUSES[status][0]}"}


def _error_response(status: int, description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {JSON: {"schema": {"$ref": SCHEMAS + "ErrorBody"}}},
    }


_CHANGES_400 = {
    "description": "`after_id` or `limit` is not an integer or out of range (upstream's answer).",
    "content": {
        JSON: {
            "schema": {
                "type": "object",
                "properties": {"ok": {"const": False}, "error": {"type": "string"}},
                "required": ["ok", "error"],
            }
        }
    },
}


# -- /step bodies, one per tool -------------------------------------------------------------


def _describe_tool_calls(
    doc: dict[str, Any], schemas: dict[str, Any], tools: list[ToolInfo]
) -> None:
    """`/step` takes `StepRequest`; with the tools known, also one `ToolCall_<name>` body
    per tool (`tool_name` fixed, `arguments` its input schema), so a client generator or a
    fuzzer can call each tool with real arguments. Which of them a caller may call depends
    on its role (`list_tools` says)."""
    if not tools:
        return
    calls = []
    for tool in tools:
        name = free_name(schemas, "ToolCall_" + re.sub(r"[^A-Za-z0-9._-]", "_", tool.name), None)
        body = {
            "type": "object",
            "title": f"call {tool.name}",
            "description": tool.description,
            "properties": {
                "action": {"const": "call_tool"},
                "tool_name": {"const": tool.name},
                "arguments": copy.deepcopy(tool.input_schema),
            },
            "required": ["action", "tool_name", "arguments"],
            "additionalProperties": False,
        }
        schemas[name] = hoisted(body, schemas, top=False)
        calls.append({"$ref": SCHEMAS + name})
    schemas["StepBody"] = {
        "description": "A `/step` body: `StepRequest`, or a call of one of the tools.",
        "anyOf": [{"$ref": SCHEMAS + "StepRequest"}, *calls],
    }
    generic = {"$ref": SCHEMAS + "StepRequest"}
    for item in doc.get("paths", {}).values():
        for method in _METHODS:
            content = item.get(method, {}).get("requestBody", {}).get("content", {})
            if content.get(JSON, {}).get("schema") == generic:
                content[JSON]["schema"] = {"$ref": SCHEMAS + "StepBody"}


# -- the MCP endpoint -----------------------------------------------------------------------


def _mcp_paths() -> dict[str, Any]:
    post = {
        "summary": "MCP over Streamable HTTP (stateless, JSON answers)",
        "description": "One JSON-RPC message or a batch (`initialize`, `tools/list`, "
        "`tools/call`, ...); send `Accept: application/json, text/event-stream`. A body of "
        "notifications only is answered 202 with no body. Refusals (credentials, instance, "
        "Origin, Host, content type, `Accept`, a body that is not JSON-RPC) are JSON-RPC "
        "errors with `id: null`, so MCP clients show their message; only a body over the "
        "size limit gets the REST error body.",
        _MCP: True,
        "requestBody": {
            "required": True,
            "content": {JSON: {"schema": _json_rpc_body("MCP JSON-RPC message")}},
        },
        "responses": {
            "200": {
                "description": "The JSON-RPC answer (one, or a list for a batch).",
                "content": {JSON: {"schema": _json_rpc_answer()}},
            },
            "202": {"description": "Accepted: the body held notifications or answers only."},
            "406": {"description": "`Accept` does not allow `application/json`."},
        },
    }
    paths = {}
    for prefix, op_id in (("", "mcp"), ("/instances/{instance_id}", "instance_mcp")):
        op = copy.deepcopy(post)
        op["operationId"] = op_id
        paths[prefix + "/mcp"] = {"post": op}
    return paths


def _as_mcp_errors(responses: dict[str, Any], shared: dict[str, Any]) -> None:
    """The 4xx answers of the MCP endpoint: JSON-RPC errors (or, over the size limit, the
    REST error body), with the shared responses' descriptions."""
    for status, response in responses.items():
        if status.startswith("4"):
            if "$ref" in response:
                response = dict(shared[response["$ref"].rsplit("/", 1)[1]])
            responses[status] = {
                "description": response["description"],
                "content": {JSON: {"schema": _mcp_error()}},
            }


def _mcp_error() -> dict[str, Any]:
    # MCP's own refusals are JSON-RPC errors; ours (credentials, limits) are the error body.
    return {"anyOf": [{"$ref": SCHEMAS + "JsonRpcResponse"}, {"$ref": SCHEMAS + "ErrorBody"}]}


# -- the JSON-RPC data plane ----------------------------------------------------------------


def data_plane_doc() -> dict[str, Any]:
    """The `openapi_extra` of a JSON-RPC data plane route (`/agentenv`, `/svc/{key}/agentenv`):
    a request or a batch of `data/reset`, `data/add` and `data/get`; the answer is JSON-RPC
    too, errors included (a body that is not JSON is a JSON-RPC parse error)."""
    methods = []
    for method, params in (
        ("data/reset", None),
        ("data/add", DataAddParams.model_json_schema(by_alias=True)),
        ("data/get", None),
    ):
        properties: dict[str, Any] = {
            "jsonrpc": {"const": "2.0"},
            "method": {"const": method},
            "id": {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
        }
        if params is not None:
            properties["params"] = params
        required = ["jsonrpc", "method", *(["params"] if params else [])]
        methods.append({"type": "object", "properties": properties, "required": required})
    request = {
        "title": "DataPlaneRequest",
        "description": "`data/reset`, `data/add` (`params.parts`: A2A parts; a data part "
        '`{"data": {"<collection>": [records]}}` seeds records) or `data/get`. Without '
        "`id` it is a notification and gets no answer.",
        "oneOf": methods,
    }
    return {
        _ERRORS_IN_JSON_RPC: True,
        "requestBody": {"required": True, "content": {JSON: {"schema": _batch_of(request)}}},
        "responses": {
            "200": {
                "description": "The JSON-RPC answer, or a list for a batch. A failed "
                "method answers a JSON-RPC error (`error.data.code` says which).",
                "content": {JSON: {"schema": _json_rpc_answer()}},
            },
            "204": {"description": "The body held only notifications."},
        },
    }


def _json_rpc_body(title: str) -> dict[str, Any]:
    one = JsonRpcRequest.model_json_schema()
    one["title"] = "JsonRpcRequest"
    return {"description": title, **_batch_of(one)}


def _batch_of(one: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [one, {"type": "array", "items": one, "minItems": 1}]}


def _json_rpc_answer() -> dict[str, Any]:
    one = {"$ref": SCHEMAS + "JsonRpcResponse"}
    return {"anyOf": [one, {"type": "array", "items": one}]}
