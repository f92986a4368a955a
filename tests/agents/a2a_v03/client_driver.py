"""Drives an A2A agent with the a2a-sdk 0.3 client: run by the tests in the upstream
virtualenv (`.venv-upstream`), never imported by our code or collected by pytest.

    python client_driver.py '{"url": ..., "transport": "JSONRPC", "streaming": false,
                              "text": "...", "metadata": {...}}'

Prints one JSON object: what the card said and the final task (or message) the agent
answered with, as the 0.3 client parsed them.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from typing import Any

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, Task, TextPart


def _texts(parts: list[Part]) -> list[str]:
    return [p.root.text for p in parts if isinstance(p.root, TextPart)]


async def main(args: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, args["url"]).get_agent_card()
        out: dict[str, Any] = {
            "card": {
                "name": card.name,
                "url": card.url,
                "preferred_transport": card.preferred_transport,
                "protocol_version": card.protocol_version,
                "additional": [[i.url, i.transport] for i in card.additional_interfaces or []],
                "extensions": [e.uri for e in card.capabilities.extensions or []],
            }
        }
        config = ClientConfig(
            httpx_client=http,
            streaming=bool(args.get("streaming")),
            supported_transports=[args.get("transport", "JSONRPC")],
        )
        client = ClientFactory(config).create(card)
        message = Message(
            role=Role.user,
            message_id=uuid.uuid4().hex,
            parts=[Part(root=TextPart(text=args["text"]))],
            metadata=args.get("metadata") or None,
        )
        final: Task | Message | None = None
        async for event in client.send_message(message):
            final = event if isinstance(event, Message) else event[0]
        if isinstance(final, Message):
            out["message"] = _texts(final.parts)
        elif final is not None:
            fetched = await client.get_task(_query(final.id))
            out["task"] = {
                "id": final.id,
                "state": final.status.state.value,
                "status_text": _texts(final.status.message.parts) if final.status.message else [],
                "artifacts": {a.name: _texts(a.parts) for a in final.artifacts or []},
                "data": {
                    a.name: [p.root.data for p in a.parts if p.root.kind == "data"]
                    for a in final.artifacts or []
                },
                "fetched_state": fetched.status.state.value,
            }
        await client.close()
        return out


def _query(task_id: str) -> Any:
    from a2a.types import TaskQueryParams

    return TaskQueryParams(id=task_id)


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(sys.argv[1])))))
