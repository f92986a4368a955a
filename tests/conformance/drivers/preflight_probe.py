"""Upstream's pre-deploy fit check (agentenv_protocol.preflight) on what our server declares and holds.

Runs in the upstream virtualenv. Usage: python preflight_probe.py BASE_URL
Reads the card's intake declaration (`client.intake_declaration`) and the served data
(`data/get`), then runs `intake_fit_check` on the served data, on an unknown collection and on
a record without its required fields. Prints one JSON object: probe name -> outcome.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from agentenv_protocol import client
from agentenv_protocol.preflight import intake_fit_check
from agentenv_protocol.types import IntakeDeclaration

results: dict[str, Any] = {}


def record(name: str, call: Any) -> Any:
    """Run one pure call and record its answer, or its failure, under `name`."""
    try:
        value = call()
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
    card = await client.get_card(base)
    declaration = record("intake_declaration", lambda: client.intake_declaration(card))
    record(
        "declaration model", lambda: declaration and IntakeDeclaration.model_validate(declaration)
    )
    got = await client.get_data(base)
    data_json = next((p.data for p in got.parts if p.kind == "data"), {})
    record("collections", lambda: sorted(data_json))
    record("fit served", lambda: intake_fit_check(declaration, data_json))
    record(
        "fit unknown_collection",
        lambda: intake_fit_check(declaration, {"no_such_collection": [{"id": "x"}]}),
    )
    first = sorted(data_json)[0] if data_json else "none"
    record("fit missing_required", lambda: intake_fit_check(declaration, {first: [{}]}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1].rstrip("/")))
    print(json.dumps(results, default=str))
