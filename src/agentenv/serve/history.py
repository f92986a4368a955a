"""What happened on an instance, over REST: `GET /trajectory` and `GET /changes`.

`/trajectory` answers upstream's trajectory events (`gateway.events`) as
`application/jsonl`, with `X-Trajectory-Total-Bytes` (the body's length). Ours on top:
`?since=N` leaves out the first N events (the lines a reader already has; the event ids
stay those of the whole trajectory) and `X-Trajectory-Next-Since` says what to ask for
next; `?format=records` answers our own trajectory records instead of events.

`/changes` answers the instance's changelog rows after `after_id` with their actors
(`urn:agentenv:changes/v1`, `gateway.changes`); bad `after_id` or `limit` get upstream's
400 answer, `{"ok": false, "error": ...}`.

Both routes are included in the REST router, so they exist at the root (the default
instance) and under `/instances/{instance_id}`.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from starlette.responses import Response

from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator
from agentenv.gateway.changes import ChangesQueryError, changes_page, parse_query
from agentenv.gateway.events import to_jsonl, trajectory_events
from agentenv.serve._http import HttpError, instance_of, principal_of

JSONL = "application/jsonl"
TOTAL_BYTES_HEADER = "X-Trajectory-Total-Bytes"
NEXT_SINCE_HEADER = "X-Trajectory-Next-Since"


def _since(raw: str | None) -> int:
    if raw is None:
        return 0
    try:
        return max(int(raw), 0)
    except ValueError:
        raise HttpError(400, "bad_request", f"since: expected an integer, got {raw!r}") from None


def history_router(gateway: Gateway, auth: Authenticator) -> APIRouter:
    """The `/trajectory` and `/changes` routes of a gateway."""
    router = APIRouter()

    @router.get(
        "/trajectory",
        summary="Trajectory events as JSONL (?since=N events; ?format=records for ours)",
    )
    async def trajectory(request: Request) -> Response:
        principal_of(request, auth)
        inst = gateway.instance(instance_of(request))
        since = _since(request.query_params.get("since"))
        form = request.query_params.get("format", "events")
        if form == "records":
            body = inst.trajectory.to_jsonl(since).encode()
            following = len(inst.trajectory)
        elif form == "events":
            body = to_jsonl(trajectory_events(inst.trajectory, since))
            following = max(inst.trajectory.event_count, since)
        else:
            raise HttpError(400, "bad_request", f"format: expected events or records, got {form!r}")
        headers = {TOTAL_BYTES_HEADER: str(len(body)), NEXT_SINCE_HEADER: str(following)}
        return Response(body, media_type=JSONL, headers=headers)

    @router.get("/changes", summary="Changelog rows after after_id, with who made each")
    async def changes(request: Request) -> Response:
        principal_of(request, auth)
        inst = gateway.instance(instance_of(request))
        query = request.query_params
        try:
            after_id, limit = parse_query(query.get("after_id"), query.get("limit"))
        except ChangesQueryError as exc:
            return Response(
                json.dumps({"ok": False, "error": str(exc)}),
                status_code=400,
                media_type="application/json",
            )
        page = changes_page(inst, gateway.env.name, after_id, limit)
        return Response(page.model_dump_json(), media_type="application/json")

    return router
