"""The environment the wire benchmarks serve, and the bare FastAPI floor they compare to.

One `read_note` tool that reads a record from a `notes` collection; the floor is an
endpoint doing the same work as `POST /step` with nothing of ours around it: parse the
body with the `StepRequest` model, call the same function on a State, answer the same
JSON shape.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from fastapi import FastAPI, Request
from starlette.responses import Response

from agentenv import Environment, Principal, ToolContext, tool
from agentenv.env.tool import Tool
from agentenv.spec import StepRequest, parse_environment_spec

RECORDS = 100
"""Seeded notes (`n0` ... `n99`)."""


@tool(kind="read")
def read_note(ctx: ToolContext, note_id: str) -> dict[str, Any]:
    """Read one note.

    Args:
        note_id: The note's id.
    """
    return ctx.state.require("notes", note_id)


def build_env(records: int = RECORDS) -> Environment:
    """The notes environment with `records` seeded notes and the `read_note` tool."""
    spec = parse_environment_spec(
        {
            "apiVersion": "agentenv/v1",
            "kind": "Environment",
            "name": "bench",
            "roles": [{"name": "agent"}],
            "state": {"notes": {"key": "id"}},
            "seed": {
                "notes": [
                    {"id": f"n{i}", "text": f"note {i}", "tags": ["a", "b"]} for i in range(records)
                ]
            },
        }
    )
    return replace(Environment.from_spec(spec), tools={"read_note": Tool.from_function(read_note)})


def bare_app() -> FastAPI:
    """The floor: the same work as /step with nothing of ours around it."""
    app = FastAPI()
    state = build_env().new_state()
    ctx = ToolContext(state, datetime.now(UTC), Principal("agent"))

    @app.post("/step")
    async def step(request: Request) -> Response:
        body = StepRequest.model_validate(json.loads(await request.body()))
        value = read_note(ctx, **body.arguments)
        text = json.dumps(value)
        return Response(
            json.dumps(
                {
                    "content": [{"type": "text", "text": text}],
                    "isError": False,
                    "structuredContent": value,
                }
            ),
            media_type="application/json",
        )

    return app
