"""What happened on an instance, over REST: `GET /trajectory` and `GET /changes`.

`/trajectory` answers upstream's trajectory events (`gateway.events`) as
`application/jsonl`, with `X-Trajectory-Total-Bytes` (the body's length, as upstream
sends it: exactly what this answer carries). Ours on top: `?since=N` leaves out the first
N events (the lines a reader already has; the event ids stay those of the whole
trajectory), `?limit=M` answers at most M of them, `X-Trajectory-Next-Since` says what to
ask for next and `X-Trajectory-Has-More` whether anything lies past this page;
`?format=records` answers our own trajectory records instead (`since` and `limit` then
count records).

The answer is a snapshot of the trajectory as the request arrived. It is rendered in a
worker thread (never on the event loop) into a spooled temporary file (memory up to
`SPOOL_BYTES`, then disk), so its exact length is known before the first byte goes out,
and then streamed from there: a trajectory of any length neither builds one giant string
nor stalls other requests.

`/changes` answers the instance's changelog rows after `after_id` with their actors
(`urn:agentenv:changes/v1`, `gateway.changes`); bad `after_id` or `limit` get upstream's
400 answer, `{"ok": false, "error": ...}`.

Both routes are included in the REST router, so they exist at the root (the default
instance) and under `/instances/{instance_id}`.
"""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Callable, Iterator
from typing import IO, Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response, StreamingResponse

from agentenv.gateway import Gateway
from agentenv.gateway.auth import Authenticator
from agentenv.gateway.changes import (
    CHANGES_PAGE_MAX,
    ChangesQueryError,
    changes_page,
    parse_query,
)
from agentenv.gateway.events import write_events
from agentenv.serve._http import HttpError, instance_of, principal_of
from agentenv.serve.openapi import operation_doc

JSONL = "application/jsonl"
TOTAL_BYTES_HEADER = "X-Trajectory-Total-Bytes"
NEXT_SINCE_HEADER = "X-Trajectory-Next-Since"
HAS_MORE_HEADER = "X-Trajectory-Has-More"
SPOOL_BYTES = 4 * 1024 * 1024
"""An answer up to this size is rendered in memory and sent in one piece; a longer one
goes through a temporary file and is streamed."""
STREAM_CHUNK = 256 * 1024

_COUNT = {"type": "integer"}
TRAJECTORY_DOC: dict[str, Any] = {
    "parameters": [
        {
            "name": "since",
            "in": "query",
            "required": False,
            "description": "Leave out the first N events (records with format=records); "
            "a negative N counts as 0.",
            "schema": {**_COUNT, "default": 0},
        },
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "description": "Answer at most N events (records); all of them when absent.",
            "schema": {**_COUNT, "minimum": 1},
        },
        {
            "name": "format",
            "in": "query",
            "required": False,
            "description": "`events` (upstream's trajectory events) or `records` (ours).",
            "schema": {"type": "string", "enum": ["events", "records"], "default": "events"},
        },
    ],
    "responses": {
        "200": {
            "description": "One JSON object a line: events, or records with format=records.",
            "content": {JSONL: {"schema": {"type": "string"}}},
            "headers": {
                TOTAL_BYTES_HEADER: {
                    "description": "The body's length in bytes.",
                    "schema": _COUNT,
                },
                NEXT_SINCE_HEADER: {
                    "description": "The `since` that asks for what follows this answer.",
                    "schema": _COUNT,
                },
                HAS_MORE_HEADER: {
                    "description": "`true` when more events (records) follow this page.",
                    "schema": {"type": "string", "enum": ["true", "false"]},
                },
            },
        },
    },
}
TRAJECTORY_DOC["responses"].update(operation_doc(errors=(400,))["responses"])

CHANGES_DOC: dict[str, Any] = {
    "parameters": [
        {
            "name": "after_id",
            "in": "query",
            "required": False,
            "description": "Rows after this changelog id (0: from the first).",
            "schema": {**_COUNT, "minimum": 0, "default": 0},
        },
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "description": "At most this many rows.",
            "schema": {**_COUNT, "minimum": 1, "maximum": CHANGES_PAGE_MAX},
        },
    ],
    "responses": {
        "400": {
            "description": "A bad `after_id` or `limit`, in upstream's shape.",
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "ok": {"const": False},
                            "error": {"type": "string"},
                        },
                        "required": ["ok", "error"],
                    }
                }
            },
        },
    },
}


def _count(name: str, raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise HttpError(400, "bad_request", f"{name}: expected an integer, got {raw!r}") from None


def _limit(raw: str | None) -> int | None:
    limit = _count("limit", raw)
    if limit is not None and limit < 1:
        raise HttpError(400, "bad_request", f"limit: expected at least 1, got {limit}")
    return limit


def _render(write: Callable[[IO[bytes]], int]) -> tuple[IO[bytes], int]:
    """Run `write` into a spooled file (in a worker thread); the file, rewound, and its size."""
    spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - closed by the stream
    try:
        size = write(spool)
        spool.seek(0)
    except BaseException:
        spool.close()
        raise
    return spool, size


def _stream(spool: IO[bytes]) -> Iterator[bytes]:
    try:
        while chunk := spool.read(STREAM_CHUNK):
            yield chunk
    finally:
        spool.close()


def history_router(gateway: Gateway, auth: Authenticator) -> APIRouter:
    """The `/trajectory` and `/changes` routes of a gateway."""
    router = APIRouter()

    @router.get(
        "/trajectory",
        summary="Trajectory events as JSONL (?since=N&limit=M; ?format=records for ours)",
        response_class=Response,
        openapi_extra=TRAJECTORY_DOC,
    )
    async def trajectory(request: Request) -> Response:
        principal_of(request, auth)
        inst = gateway.instance(instance_of(request))
        query = request.query_params
        since = max(_count("since", query.get("since")) or 0, 0)
        limit = _limit(query.get("limit"))
        form = query.get("format", "events")
        traj = inst.trajectory
        # The snapshot: what the trajectory holds now; later records wait for the next page.
        if form == "records":
            total = len(traj)
            start = min(since, total)
            stop = total if limit is None else min(total, start + limit)
            write = functools.partial(traj.write_jsonl, start=start, stop=stop, traces=False)
            following = stop
        elif form == "events":
            total = traj.event_count
            stop = total if limit is None else min(total, since + limit)
            count = max(stop - since, 0)
            write = functools.partial(_write_events, traj=traj, since=since, limit=count)
            following = max(stop, since)
        else:
            raise HttpError(400, "bad_request", f"format: expected events or records, got {form!r}")
        spool, size = await run_in_threadpool(_render, write)
        headers = {
            TOTAL_BYTES_HEADER: str(size),
            NEXT_SINCE_HEADER: str(following),
            HAS_MORE_HEADER: "true" if following < total else "false",
        }
        if size <= SPOOL_BYTES:
            with spool:
                body = spool.read()
            return Response(body, media_type=JSONL, headers=headers)
        headers["Content-Length"] = str(size)
        return StreamingResponse(_stream(spool), media_type=JSONL, headers=headers)

    @router.get(
        "/changes",
        summary="Changelog rows after after_id, with who made each",
        openapi_extra=CHANGES_DOC,
    )
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


def _write_events(out: IO[bytes], *, traj: Any, since: int, limit: int) -> int:
    return write_events(out, traj, since, limit) if limit > 0 else 0
