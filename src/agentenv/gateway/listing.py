"""The tools each caller may see: `Gateway.tools_for` and `Gateway.list_tools`.

A rollout builds a gateway (and lists its tools) per episode, and an MCP or REST server
lists them per session, so the lists are made once per role and instance: the instance's
access rules (`AccessControl.listed`) are the cache, emptied whenever a rule changes; the
key holds the rest a list depends on (the tool table, whether `get_time` is offered). A
`Tool` makes its `ToolInfo` once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentenv.env.tool import Principal, Tool
from agentenv.gateway.access import WILDCARD
from agentenv.gateway.clock import GET_TIME
from agentenv.gateway.errors import DEFAULT_INSTANCE
from agentenv.gateway.instance import Instance
from agentenv.spec.wire import ToolInfo

if TYPE_CHECKING:
    from agentenv.env.environment import Environment

_UNNAMED_ROLE = "\x00any other role"  # stands for every role no rule names
_LISTED_ROLES = 64  # tool lists cached per instance (one per role asked for)


class ToolLists:
    """The tool-listing part of a Gateway (see the module docstring)."""

    env: Environment
    behind_gateway: bool
    _open_roles: bool

    if TYPE_CHECKING:  # provided by Gateway and ControlPlane

        def instance(self, instance_id: str = DEFAULT_INSTANCE) -> Instance: ...

        def resolve(self, principal: Principal) -> Principal: ...

        def _role_known(self, role: str) -> bool: ...

        def _offers_get_time(self, inst: Instance) -> bool: ...

    def tools_for(self, principal: Principal, instance: str = DEFAULT_INSTANCE) -> list[Tool]:
        """The tools this principal may see (and call) on an instance."""
        inst = self.instance(instance)
        principal = self.resolve(principal)
        return list(self._listed(inst, principal.role)[0])

    def _listed(self, inst: Instance, role: str) -> tuple[tuple[Tool, ...], list[ToolInfo]]:
        """The tools a role may see on an instance, and their infos, made once per role:
        the instance's access rules empty the cache when they change, and the key holds
        the rest a list depends on (the tool table, whether `get_time` is offered)."""
        tools = self.env.tools
        key = (role, self._offers_get_time(inst), id(tools), len(tools))
        cache = inst.access.listed
        found = cache.get(key)
        if found is None:
            if len(cache) >= _LISTED_ROLES:
                cache.clear()  # callers may name any role: keep the cache bounded
            visible = tuple(self._visible(inst, role))
            found = cache[key] = (visible, [t.info() for t in visible])
        return found  # type: ignore[no-any-return]

    def _visible(self, inst: Instance, role: str) -> list[Tool]:
        tools = list(self.env.tools.values())
        if self._offers_get_time(inst) and GET_TIME.name not in self.env.tools:
            tools.append(GET_TIME)
        if self.behind_gateway:
            # The gateway in front decides who sees what: list what any role may call.
            roles = set(self.env.roles) | set(inst.access.rules())
            roles.discard(WILDCARD)
            if self._open_roles:
                roles.add(_UNNAMED_ROLE)
            return [t for t in tools if any(inst.access.allowed(r, t) for r in roles)]
        if not self._role_known(role):
            return []
        return [t for t in tools if inst.access.allowed(role, t)]

    def list_tools(self, principal: Principal, instance: str = DEFAULT_INSTANCE) -> list[ToolInfo]:
        """`tools/list` for a principal: only what its role may call. The infos are made once
        per role; each call gets its own copies (with their own top-level `input_schema`,
        as before the cache), so a caller that edits one in place (an agent adapting schemas
        to its model, say) does not change what other episodes and sessions are listed."""
        inst = self.instance(instance)
        return [
            info.model_copy(update={"input_schema": dict(info.input_schema)})
            for info in self._listed(inst, self.resolve(principal).role)[1]
        ]
