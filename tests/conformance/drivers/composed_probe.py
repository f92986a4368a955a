"""A composed environment's card and per-child data planes, through upstream's client.

Runs in the upstream virtualenv. Usage: python composed_probe.py BASE_URL
BASE_URL serves tests/conformance/envs/duo: children `vault` (key `vault`) and `ledger`
(key `books`). Prints one JSON object: probe name -> outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentenv_protocol import client

results: dict[str, Any] = {}


async def probe(name: str, call: Any) -> Any:
    """Run one call and record its answer, or its failure, under `name`."""
    try:
        value = call()
        if asyncio.iscoroutine(value):
            value = await value
    except Exception as error:  # a failure is a finding
        results[name] = {"ok": False, "error": f"{type(error).__name__}: {error}"[:2000]}
        return None
    results[name] = {
        "ok": True,
        "value": value.model_dump(mode="json") if hasattr(value, "model_dump") else value,
    }
    return value


async def main(base: str) -> None:
    """Run every probe of this driver, in order."""
    card = await probe("card", lambda: client.get_card(base))
    if card is None:
        return
    vault = await probe("find_child vault", lambda: client.find_child(card, "vault"))
    await probe("find_child ledger", lambda: client.find_child(card, "ledger"))
    await probe("data get vault", lambda: client.get_data(f"{base}/svc/vault"))
    await probe("data get books", lambda: client.get_data(f"{base}/svc/books"))
    await probe("data reset vault", lambda: client.reset_data(f"{base}/svc/vault"))
    await probe("data get vault after_reset", lambda: client.get_data(f"{base}/svc/vault"))
    await probe("data get books after_vault_reset", lambda: client.get_data(f"{base}/svc/books"))
    await probe("data get parent", lambda: client.get_data(base))
    if vault is not None:
        for ext in (vault.get("capabilities") or {}).get("extensions") or []:
            for name in (ext.get("params") or {}).get("methods") or {}:
                await probe(
                    f"child method {ext['uri']} {name}",
                    lambda uri=ext["uri"], name=name: client.find_extension_method(
                        vault, uri, name
                    ),
                )
        await probe(
            "child step list_tools",
            lambda: client.invoke_extension(
                base, vault, "urn:agentenv:step/v1", {"action": "list_tools"}, method="step"
            ),
        )
        await probe(
            "child state",
            lambda: client.invoke_extension(base, vault, "urn:agentenv:state/v1", method="get"),
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/")))
    print(json.dumps(results, default=str))
