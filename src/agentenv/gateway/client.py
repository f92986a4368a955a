"""ToolClient: tool access for one principal, in this process, through Gateway.call.

What an in-process agent holds: its role on one or more environment instances. With one
environment the tools keep their names; with several, each is offered as
`<env_id>__<tool>` so that names cannot clash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentenv.env.tool import Principal
from agentenv.gateway.gateway import DEFAULT_INSTANCE, Gateway
from agentenv.gateway.results import CallResult
from agentenv.spec.wire import CallError, ToolInfo
from agentenv.state import SEPARATOR


@dataclass(frozen=True)
class Binding:
    """One environment instance a client can reach."""

    env_id: str
    gateway: Gateway
    instance: str = DEFAULT_INSTANCE


class ToolClient:
    """Calls tools as one principal on one or more environment instances."""

    def __init__(
        self, principal: Principal, bindings: list[Binding], *, session: str | None = None
    ) -> None:
        if not bindings:
            raise ValueError("a tool client needs at least one environment")
        self.principal = principal
        self.session = session
        self._bindings = {b.env_id: b for b in bindings}
        self._single = len(self._bindings) == 1

    @property
    def env_ids(self) -> list[str]:
        """The environments this client reaches."""
        return list(self._bindings)

    def list_tools(self) -> list[ToolInfo]:
        """The tools this principal may call, named as `call` expects them."""
        out = []
        for env_id, binding in self._bindings.items():
            for info in binding.gateway.list_tools(self.principal, binding.instance):
                if not self._single:
                    info = info.model_copy(update={"name": f"{env_id}{SEPARATOR}{info.name}"})
                out.append(info)
        return out

    def _route(self, name: str, env_id: str | None) -> tuple[Binding, str] | None:
        if env_id is not None:
            binding = self._bindings.get(env_id)
            return (binding, name) if binding else None
        if self._single:
            return next(iter(self._bindings.values())), name
        prefix, sep, rest = name.partition(SEPARATOR)
        if sep and prefix in self._bindings:
            return self._bindings[prefix], rest
        return None

    async def call(
        self, name: str, args: dict[str, Any] | None = None, *, env_id: str | None = None
    ) -> CallResult:
        """Call a tool; like Gateway.call, never raises for a bad call."""
        route = self._route(name, env_id)
        if route is None:
            where = f" in {env_id!r}" if env_id else ""
            message = f"unknown tool {name!r}{where}"
            return CallResult(
                ok=False,
                value=None,
                text=f"Error: {message}",
                error=CallError(kind="unknown_tool", message=message),
                changelog_id=-1,
                seq=-1,
                state_hash="",
            )
        binding, tool = route
        return await binding.gateway.call(
            self.principal, tool, args or {}, instance=binding.instance, session=self.session
        )
