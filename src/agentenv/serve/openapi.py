"""The served app's OpenAPI document (`GET /openapi.json`)."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi


def openapi_schema(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document of `app`, built once and cached on it."""
    if app.openapi_schema is None:
        app.openapi_schema = get_openapi(
            title=app.title,
            version=app.version,
            description=app.description,
            routes=app.routes,
        )
    return app.openapi_schema
