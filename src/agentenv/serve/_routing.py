"""The REST app's class: FastAPI, with `/step` answered in front of it and one route
table for the root and every instance."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import FastAPI
from starlette._utils import get_route_path
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from agentenv.serve._step import StepDispatch


class RestApp(FastAPI):
    """The REST app: FastAPI, with two things done in front of it.

    `POST /step` (root and per instance) is answered by a `StepDispatch` (serve/_step.py):
    the framework's per-request work cost more than the gateway call itself. And the
    routes of an instance are the root's, registered once: a request for
    `/instances/{id}/<route>` is routed as `<route>` with `instance_id` in its path
    parameters, as a Starlette `Mount` would route it (the path and the app's base URL are
    kept, the instance prefix is added to `root_path`), but only where `<route>` starts
    with one of the root routes' first segments, so that every other path under
    `/instances/` is answered as before. The OpenAPI document still lists every instance
    route (see `create_app`).
    """

    step_dispatch: StepDispatch | None = None
    instance_segments: frozenset[str] = frozenset()
    """First path segments of the routes every instance has (`step`, `clock`, ...)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            dispatch = self.step_dispatch
            if dispatch is not None:
                instance = dispatch.instance_of(scope)
                if instance is not None:
                    await dispatch(scope, receive, send, instance)
                    return
            scope = self.instance_scope(scope)
        await super().__call__(scope, receive, send)

    def instance_scope(self, scope: Scope) -> Scope:
        """`scope` routed as the root route it names under `/instances/{id}/`, or as is."""
        route_path = get_route_path(scope)
        if not route_path.startswith(_INSTANCES):
            return scope
        instance_id, slash, tail = route_path[len(_INSTANCES) :].partition("/")
        if not instance_id or not slash or tail.split("/", 1)[0] not in self.instance_segments:
            return scope
        root_path = scope.get("root_path", "")
        return {
            **scope,
            "root_path": f"{root_path}{_INSTANCES}{instance_id}",
            "app_root_path": scope.get("app_root_path", root_path),
            "path_params": {**scope.get("path_params", {}), "instance_id": instance_id},
        }


_INSTANCES = "/instances/"
INSTANCE_PREFIX = "/instances/{instance_id}"


def route_paths(routes: list[BaseRoute]) -> Iterator[str]:
    """The paths of `routes`, those of included routers' too."""
    # FastAPI keeps an included router as one entry holding the original (history_router's
    # routes, included without a prefix, are in there).
    for route in routes:
        path = getattr(route, "path", None)
        if isinstance(path, str):
            yield path
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from route_paths(inner.routes)
