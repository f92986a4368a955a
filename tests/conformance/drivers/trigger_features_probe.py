"""The trigger features our card declares, each registered and exercised with upstream's spec shapes.

Runs in the upstream virtualenv. Usage: python trigger_features_probe.py BASE_URL
BASE_URL serves support-desk (stepped clock from 2026-03-02T09:00Z; its `wait` tool moves it
15 minutes; agent and supervisor are watched). Triggers are registered through upstream's
client (`invoke_extension`), tools are called over `/step` with a role header. Prints one
JSON object: probe name -> outcome, plus `features` (what the card declares).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import httpx
from agentenv_protocol import client
from agentenv_protocol.client import ExtensionCallError

TRIGGERS = "urn:agentenv:triggers/v1"
results: dict[str, Any] = {}
SETTLED = ("fired", "failed", "cancelled")


async def probe(name: str, call: Any) -> Any:
    """Run one call and record its answer, or its failure, under `name`."""
    try:
        value = await call()
    except Exception as error:  # a failure is a finding
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}
        if isinstance(error, ExtensionCallError):
            results[name].update(status=error.response.status_code, code=error.code)
        return None
    results[name] = {"ok": True, "value": value}
    return value


async def main(base: str) -> None:
    """Run every probe of this driver, in order."""
    card = await client.get_card(base)
    results["features"] = {
        "ok": True,
        "value": client.extension_params(card, TRIGGERS).get("features"),
    }

    def register(body: dict) -> Any:
        return lambda: client.invoke_extension(base, card, TRIGGERS, body, method="register")

    async def state() -> dict:
        return await client.invoke_extension(base, card, TRIGGERS, None, method="state")

    async def trigger(tid: str, settle: bool = True) -> dict:
        """One trigger's entry of /triggers/state (waiting, when asked, until it settles: fires run after calls)."""
        for _ in range(50):
            entry = next((t for t in (await state())["triggers"] if t["id"] == tid), None)
            if entry is None or not settle or entry["status"] in SETTLED:
                return entry or {}
            await asyncio.sleep(0.2)
        return entry

    async def call(tool: str, arguments: dict, role: str | None = None) -> dict:
        async with httpx.AsyncClient() as http:
            response = await http.post(
                f"{base}/step",
                timeout=60,
                headers={"AgentEnv-Role": role} if role else {},
                json={"action": "call_tool", "tool_name": tool, "arguments": arguments},
            )
        return {"status": response.status_code, "isError": response.json().get("isError")}

    noop = [{"type": "tool", "tool": "list_refunds", "args": {}}]
    # provoking_roles: only a call by a listed role provokes it
    await probe(
        "provoking register",
        register(
            {
                "triggers": [
                    {
                        "id": "by-supervisor",
                        "when": {"type": "action", "tool": "get_order", "roles": ["supervisor"]},
                        "actions": noop,
                    }
                ]
            }
        ),
    )
    await probe("provoking other_role call", lambda: call("get_order", {"id": "O-5531"}, "agent"))
    await probe("provoking after other_role", lambda: trigger("by-supervisor", settle=False))
    await probe(
        "provoking listed_role call", lambda: call("get_order", {"id": "O-5531"}, "supervisor")
    )
    await probe("provoking after listed_role", lambda: trigger("by-supervisor"))
    # action_delay: the action runs once the delay has passed in virtual time
    await probe(
        "delay register",
        register(
            {
                "triggers": [
                    {
                        "id": "later",
                        "when": {"type": "action", "tool": "search_customers"},
                        "actions": [
                            {"type": "tool", "tool": "list_refunds", "args": {}, "delay": "PT10M"}
                        ],
                    }
                ]
            }
        ),
    )
    await probe("delay provoke", lambda: call("search_customers", {"query": "a"}, "agent"))
    await probe("delay before", lambda: trigger("later", settle=False))
    await probe("delay advance", lambda: call("wait", {}, "agent"))
    await probe("delay after", lambda: trigger("later"))
    # unless: a one-shot time trigger cancelled by the call named in `unless`
    await probe(
        "unless register",
        register(
            {
                "triggers": [
                    {
                        "id": "deadline",
                        "when": {"type": "time", "at": "PT6H", "unless": {"tool": "get_customer"}},
                        "actions": noop,
                    }
                ]
            }
        ),
    )
    await probe("unless answer", lambda: call("get_customer", {"id": "C-001"}, "agent"))
    await probe("unless after", lambda: trigger("deadline"))
    # named executors, with working hours in a time zone (registration: no executor agent runs here)
    hours = {
        "start": "09:00",
        "end": "17:00",
        "time_zone": "America/New_York",
        "days": ["mon", "tue", "wed"],
    }
    await probe(
        "executors register",
        register(
            {
                "executors": {
                    "night-desk": {
                        "a2a_url": "http://127.0.0.1:9/",
                        "role": "night-desk",
                        "hours": hours,
                    }
                },
                "triggers": [
                    {
                        "id": "ask-night-desk",
                        "when": {"type": "action", "tool": "close_ticket"},
                        "actions": [
                            {
                                "type": "nl",
                                "executor": "night-desk",
                                "instruction": "Check the ticket.",
                            }
                        ],
                    }
                ],
            }
        ),
    )
    await probe("executors state", state)
    await probe(
        "executors unknown_name",
        register(
            {
                "triggers": [
                    {
                        "id": "ask-nobody",
                        "when": {"type": "action", "tool": "close_ticket"},
                        "actions": [{"type": "nl", "executor": "nobody", "instruction": "Check."}],
                    }
                ]
            }
        ),
    )
    await probe(
        "executors bad_zone",
        register(
            {
                "executors": {
                    "moon-desk": {
                        "a2a_url": "http://127.0.0.1:9/",
                        "role": "moon-desk",
                        "hours": {**hours, "time_zone": "Moon/Base"},
                    }
                },
                "triggers": [],
            }
        ),
    )
    await probe(
        "executor_hours utc_offset",
        register(
            {
                "executors": {
                    "ops-desk": {
                        "a2a_url": "http://127.0.0.1:9/",
                        "role": "ops-desk",
                        "hours": {"start": "22:00", "end": "06:00", "utc_offset": "-07:00"},
                    }
                },
                "triggers": [],
            }
        ),
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/")))
    print(json.dumps(results, default=str))
