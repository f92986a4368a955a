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


def install_error_handlers(app: FastAPI) -> None:
    """Map our exceptions, Starlette's and FastAPI's to `{"ok": false, "error": {...}}`."""

    @app.exception_handler(HttpError)
    async def _http_error(request: Request, exc: HttpError) -> JSONResponse:
        return error_response(
            exc.status, exc.kind, exc.message, hint=exc.hint, retryable=exc.retryable
        )

    @app.exception_handler(AuthError)
    async def _auth_error(request: Request, exc: AuthError) -> JSONResponse:
        response = error_response(401, "unauthenticated", str(exc))
        response.headers["WWW-Authenticate"] = "Bearer"
        return response

    @app.exception_handler(GatewayError)
    async def _gateway_error(request: Request, exc: GatewayError) -> JSONResponse:
        kind = {403: "forbidden", 404: "not_found"}.get(exc.status, "bad_request")
        return error_response(exc.status, kind, str(exc))

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
