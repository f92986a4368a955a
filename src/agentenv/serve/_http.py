"""HTTP plumbing shared by the REST routes: errors, body parsing, size limit, principal."""

from __future__ import annotations

import json
import sys
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

from agentenv.env.tool import Principal
from agentenv.gateway.auth import Authenticator
from agentenv.gateway.errors import DEFAULT_INSTANCE
from agentenv.spec.errors import format_location
from agentenv.spec.limits import BODY_DEPTH, MAX_JSON_DEPTH, depth_message, raw_too_deep

ROLE_HEADER = "agentenv-role"
SESSION_HEADER = "agentenv-session"
DEFAULT_MAX_BODY = 1024 * 1024

M = TypeVar("M", bound=BaseModel)


# Our error kinds and the `code` each answers with: upstream's code where its SDK has one
# for the same failure, else the kind itself.
_CODE_OF_KIND = {
    "bad_request": "invalid_params",
    "malformed_json": "invalid_params",
    "too_deep": "invalid_params",
    "foreign_origin": "permission_denied",
    "invalid_arguments": "invalid_params",
    "forbidden": "permission_denied",
    "denied": "permission_denied",
}
# Kinds where the effect may have happened before the failure was seen.
_APPLIED_UNKNOWN = frozenset({"timeout", "tool_error", "invalid_result"})


class HttpError(Exception):
    """An error answer: status code, a machine-readable kind and a message (and, where it
    helps, a `hint` for the caller and whether a retry may succeed)."""

    def __init__(
        self,
        status: int,
        kind: str,
        message: str,
        *,
        hint: str | None = None,
        retryable: bool = False,
    ) -> None:
        self.status = status
        self.kind = kind
        self.message = message
        self.hint = hint
        self.retryable = retryable
        super().__init__(message)


def error_fields(
    kind: str, message: str, *, hint: str | None = None, retryable: bool = False
) -> dict[str, Any]:
    """The `error` object of every error answer: upstream's `code`, `message`, `retryable`,
    `applied` (and `hint` when there is one), plus our `kind`."""
    fields: dict[str, Any] = {
        "code": _CODE_OF_KIND.get(kind, kind),
        "message": message,
        "retryable": retryable,
        "applied": "unknown" if kind in _APPLIED_UNKNOWN else "no",
        "kind": kind,
    }
    if hint is not None:
        fields["hint"] = hint
    return fields


def error_response(
    status: int, kind: str, message: str, *, hint: str | None = None, retryable: bool = False
) -> JSONResponse:
    """The one shape of every error answer: `{"ok": false, "error": {code, message, ...}}`."""
    body = {"ok": False, "error": error_fields(kind, message, hint=hint, retryable=retryable)}
    return JSONResponse(body, status_code=status)


def validation_message(exc: ValidationError) -> str:
    """A pydantic error as one readable line: `where: what; where: what`."""
    parts = []
    for err in exc.errors(include_url=False):
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        msg = msg.removeprefix("Value error, ")
        # Union branches put type names ('list[str]') in the location; users never wrote them.
        loc = [p for p in err["loc"] if not (isinstance(p, str) and ("[" in p or p == "str"))]
        parts.append(f"{format_location(loc)}: {msg}" if loc else msg)
    return "; ".join(parts)


async def read_json(request: Request) -> Any:
    """The request body as JSON; a 400 HttpError if it is not (kind `malformed_json`, or
    `too_deep` for a body nested past `BODY_DEPTH`, refused before it is parsed)."""
    return parse_json(await request.body())


def parse_json(raw: bytes) -> Any:
    """A request body as JSON, held to the limits of every transport; a 400 HttpError if
    it is empty, not UTF-8, not JSON, or nested too deep."""
    if not raw:
        raise HttpError(400, "bad_request", "the request needs a JSON body")
    # The nesting check comes first: `json` recurses per level and would raise
    # RecursionError (a 500) a few hundred levels in.
    if raw_too_deep(raw, BODY_DEPTH):
        raise _too_deep()
    try:
        # Strict UTF-8 (RFC 8259): json.loads(bytes) would let encoded surrogates through.
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise HttpError(400, "malformed_json", f"malformed JSON body: not UTF-8 ({exc})") from None
    except RecursionError:  # raw_too_deep should have seen it; never a 500 if it did not
        raise _too_deep() from None
    except json.JSONDecodeError as exc:
        raise HttpError(400, "malformed_json", f"malformed JSON body: {exc}") from None
    except ValueError:  # an integer literal past Python's digit limit
        digits = sys.get_int_max_str_digits()
        message = f"malformed JSON body: a number with more than {digits} digits"
        raise HttpError(400, "malformed_json", message) from None


def _too_deep() -> HttpError:
    hint = (
        f"each object or array is one level: a body may nest {BODY_DEPTH}, "
        f"tool arguments and records inside it {MAX_JSON_DEPTH}"
    )
    return HttpError(400, "too_deep", f"the request body is {depth_message(BODY_DEPTH)}", hint=hint)


async def read_model(request: Request, model: type[M]) -> M:
    """The request body validated as `model`; a 400 HttpError naming the bad field."""
    data = await read_json(request)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise HttpError(400, "bad_request", validation_message(exc)) from None


def principal_of(request: Request, auth: Authenticator) -> Principal:
    """Who sent the request (AuthError if the credentials do not say)."""
    headers = request.headers
    return auth.principal(headers.get(ROLE_HEADER), headers.get("authorization"))


def instance_of(request: Request) -> str:
    """The instance a request addresses: `/instances/{id}/...` or the default one."""
    return request.path_params.get("instance_id", DEFAULT_INSTANCE)


def prefix_of(request: Request) -> str:
    """The URL prefix of the addressed instance ('' for the default one)."""
    instance_id = request.path_params.get("instance_id")
    return f"/instances/{instance_id}" if instance_id else ""
