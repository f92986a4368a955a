"""The REST app's exception handlers: every failure answers in the one error shape."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse
from starlette.routing import Match

from agentenv.gateway.auth import AuthError
from agentenv.gateway.errors import GatewayError
from agentenv.serve._http import HttpError, error_response


def known_error_response(exc: Exception) -> JSONResponse | None:
    """The answer to one of our exceptions (HttpError, AuthError, GatewayError), or None for
    any other: shared by the app's handlers and the `/step` dispatch in front of them."""
    if isinstance(exc, HttpError):
        return error_response(
            exc.status, exc.kind, exc.message, hint=exc.hint, retryable=exc.retryable
        )
    if isinstance(exc, AuthError):
        response = error_response(401, "unauthenticated", str(exc))
        response.headers["WWW-Authenticate"] = "Bearer"
        return response
    if isinstance(exc, GatewayError):
        kind = {403: "forbidden", 404: "not_found"}.get(exc.status, "bad_request")
        return error_response(exc.status, kind, str(exc))
    return None


def install_error_handlers(app: FastAPI) -> None:
    """Map our exceptions, Starlette's and FastAPI's to `{"ok": false, "error": {...}}`."""

    async def _ours(request: Request, exc: Exception) -> JSONResponse:
        response = known_error_response(exc)
        assert response is not None
        return response

    for known in (HttpError, AuthError, GatewayError):
        app.add_exception_handler(known, _ours)

    @app.exception_handler(StarletteHTTPException)
    async def _starlette(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        response = error_response(exc.status_code, kind, str(exc.detail))
        if exc.headers:
            response.headers.update(exc.headers)
        if exc.status_code == 405:
            response.headers["Allow"] = allowed_methods(request)
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        return error_response(400, "bad_request", detail)


def allowed_methods(request: Request) -> str:
    """The `Allow` of a 405: every method some route takes at the request's path. Starlette
    names only the first route that matched the path (`/instances` has two), and FastAPI's
    included routers do not list their methods, so each method is tried (only on a 405)."""
    scope = request.scope
    return ", ".join(
        method
        for method in _PROBED
        if any(
            route.matches({**scope, "method": method})[0] == Match.FULL
            for route in request.app.router.routes
        )
    )


_PROBED = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
