"""The control plane of a gateway: clock, triggers, tool access, status.

Operations that are not tool calls: a harness (or a task step) sets the clock, registers
triggers, changes who may call what, seeds data. They need an admin principal, take the
instance lock so they never interleave with a call, and are noted in the trajectory.
`Gateway` inherits them; `gateway.py` holds the tool-call door itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from agentenv.env.environment import Environment
from agentenv.env.tool import Principal, Tool
from agentenv.gateway.clock import GET_TIME, ClockMode, ClockState
from agentenv.gateway.errors import (
    DEFAULT_INSTANCE,
    ClockError,
    Forbidden,
    GatewayError,
)
from agentenv.gateway.instance import Instance
from agentenv.gateway.trigger_state import RegisterResult, TriggersState
from agentenv.spec.triggers import TriggerRegistration
from agentenv.spec.wire import McpServerInfo, RoleAccess, StepTool
from agentenv.state import SEPARATOR

if TYPE_CHECKING:
    from agentenv.gateway.firing import Firer


class GatewayStatus(BaseModel):
    """What `GET /state` answers (dumped `by_alias`): upstream's `mcp_servers`,
    `changelog_id`, `roles` (each role's own rules as `{disabled, allowed}`) and
    `tool_name_clashes`, then ours. The declared role names (`.roles` here) go on the wire
    as `declared_roles`, since upstream's `roles` is the rules map (`.access` here)."""

    mcp_servers: list[McpServerInfo]
    changelog_id: int
    access: dict[str, RoleAccess] = Field(serialization_alias="roles")
    tool_name_clashes: dict[str, list[str]] = Field(default_factory=dict)
    name: str
    version: str
    instance: str
    servers: list[dict[str, Any]]
    tools: list[str]
    state_hash: str
    role_rules: dict[str, dict[str, bool]]
    roles: list[str] = Field(serialization_alias="declared_roles")
    clock_armed: bool
    instances: int


class ControlPlane:
    """Control and data-plane operations of a Gateway (see the module docstring)."""

    env: Environment
    _instances: dict[str, Instance]
    _roles: frozenset[str]
    _firer: Firer

    if TYPE_CHECKING:  # provided by Gateway

        def instance(self, instance_id: str = DEFAULT_INSTANCE) -> Instance: ...

        def _tool(self, inst: Instance, name: str) -> Tool | None: ...

        def _role_known(self, role: str) -> bool: ...

    @staticmethod
    def _control(principal: Principal) -> None:
        if not principal.admin:
            raise Forbidden(f"{principal} may not use the control plane")

    def _offers_get_time(self, inst: Instance) -> bool:
        # Behind another gateway, `get_time` is that gateway's to serve: upstream's refuses
        # to arm its clock over a backing server's. Our clock still stamps every call.
        return inst.clock.armed and not getattr(self, "behind_gateway", False)

    def clock_time(self, instance: str = DEFAULT_INSTANCE) -> datetime:
        """The virtual time of an instance; ClockError if its clock is not armed."""
        now = self.instance(instance).clock.now()
        if now is None:
            raise ClockError("the clock is not armed")
        return now

    def clock_state(self, instance: str = DEFAULT_INSTANCE) -> ClockState:
        """Armed or not, mode, rate and time of an instance's clock."""
        return self.instance(instance).clock.state()

    async def set_clock(
        self,
        principal: Principal,
        virtual_time: datetime,
        rate: float | None = None,
        mode: ClockMode | None = None,
        *,
        instance: str = DEFAULT_INSTANCE,
    ) -> ClockState:
        """Arm (or re-set) the clock; arming adds the `get_time` tool."""
        self._control(principal)
        inst = self.instance(instance)
        async with inst.lock:
            try:
                inst.clock.set(virtual_time, rate, mode)
            except ValueError as exc:
                raise ClockError(str(exc)) from None
            self._note(
                inst, principal, "clock_set", f"{virtual_time.isoformat()} x{inst.clock.rate:g}"
            )
            inst.triggers.rearmed(inst.clock.now(), inst.clock.start)
            await self._firer.fire_due(inst)
            return inst.clock.state()

    async def advance_clock(
        self, principal: Principal, delta: timedelta, *, instance: str = DEFAULT_INSTANCE
    ) -> ClockState:
        """Move virtual time forward and fire what comes due (ours, for tests and tasks)."""
        self._control(principal)
        inst = self.instance(instance)
        async with inst.lock:
            if not inst.clock.armed:
                raise ClockError("the clock is not armed")
            if not isinstance(delta, timedelta):
                raise ClockError(f"expected a duration to advance by, not {delta!r:.80}")
            if delta < timedelta(0):  # was a silent no-op
                raise ClockError(f"the clock only moves forward (got {delta.total_seconds():g} s)")
            inst.clock.advance(delta)
            self._note(inst, principal, "clock_advance", str(delta))
            await self._firer.fire_due(inst)
            return inst.clock.state()

    async def clear_clock(
        self, principal: Principal, *, instance: str = DEFAULT_INSTANCE
    ) -> ClockState:
        """Disarm the clock (the `get_time` tool goes away)."""
        self._control(principal)
        inst = self.instance(instance)
        async with inst.lock:
            inst.clock.clear()
            self._note(inst, principal, "clock_clear")
            return inst.clock.state()

    async def register_triggers(
        self,
        principal: Principal,
        registration: TriggerRegistration,
        *,
        instance: str = DEFAULT_INSTANCE,
    ) -> RegisterResult:
        """Add triggers (additive by id; the same spec again changes nothing, a different
        one under a registered id is refused); a bad trigger fails the whole registration."""
        self._control(principal)
        inst = self.instance(instance)
        async with inst.lock:
            result = self._firer.register(inst, registration)
            self._note(inst, principal, "triggers_register", ", ".join(result.added))
            await self._firer.fire_due(inst)
            return result

    async def remove_triggers(
        self, principal: Principal, ids: list[str] | None, *, instance: str = DEFAULT_INSTANCE
    ) -> list[str]:
        """Remove triggers by id (unknown ids are ignored; returns those removed), or clear
        everything, watch roles, executors and firing log included, when `ids` is None."""
        self._control(principal)
        inst = self.instance(instance)
        async with inst.lock:
            removed = self._firer.remove(inst, ids)
            self._note(inst, principal, "triggers_remove", ", ".join(ids) if ids else "*")
            return removed

    def triggers_state(self, instance: str = DEFAULT_INSTANCE) -> TriggersState:
        """Every trigger's status and the firing log."""
        return self.instance(instance).triggers.state()

    async def set_tool_access(
        self,
        principal: Principal,
        action: Literal["disable", "enable"],
        role: str,
        tools: list[str] | Literal["*"],
        *,
        instance: str = DEFAULT_INSTANCE,
    ) -> dict[str, dict[str, bool]]:
        """Disable or enable tools for a role at run time; unknown tool names are an error."""
        self._control(principal)
        inst = self.instance(instance)
        if role not in ("*", "default") and not self._role_known(role):  # only strict roles
            raise GatewayError(f"unknown role {role!r} (roles: {', '.join(self.env.roles)})")
        if tools != "*":
            unknown = [t for t in tools if not self._names_a_tool(inst, t)]
            if unknown:
                raise GatewayError(f"unknown tool {', '.join(map(repr, unknown))}")
        async with inst.lock:
            inst.access.apply(role, action, tools)
            self._note(inst, principal, f"tools_{action}", f"{role}: {tools}")
            return inst.access.rules()

    def _names_a_tool(self, inst: Instance, name: str) -> bool:
        """A tool name, `*`, or a `prefix*` pattern that matches at least one tool."""
        if name == "*" or name == GET_TIME.name or self._tool(inst, name) is not None:
            return True
        return (
            len(name) > 1
            and name.endswith("*")
            and any(t.startswith(name[:-1]) for t in self.env.tools)
        )

    def status(self, instance: str = DEFAULT_INSTANCE) -> GatewayStatus:
        """Servers, tools, changelog id and role rules of an instance."""
        inst = self.instance(instance)
        tools = sorted(self.env.tools) + ([GET_TIME.name] if self._offers_get_time(inst) else [])
        committed = inst.state.committed()  # not a call's writes still in flight
        rules = inst.access.rules()
        servers = _servers(self.env)
        mcp_servers = [
            McpServerInfo(name=s["name"], tools=[_step_tool(self.env.tools[t]) for t in s["tools"]])
            for s in servers
        ]
        if self._offers_get_time(inst) and GET_TIME.name not in self.env.tools:
            # Served by the gateway itself, listed as upstream's gateway lists its own tools.
            mcp_servers.append(McpServerInfo(name="gateway", tools=[_step_tool(GET_TIME)]))
        return GatewayStatus(
            mcp_servers=mcp_servers,
            access={role: RoleAccess.of(table) for role, table in rules.items()},
            # Composition namespaces every child's tools, so two sources never serve one name.
            tool_name_clashes={},
            name=self.env.name,
            version=self.env.version,
            instance=inst.id,
            servers=servers,
            tools=tools,
            changelog_id=committed.changes,
            state_hash=committed.hash(),
            role_rules=rules,
            roles=list(self.env.roles),
            clock_armed=inst.clock.armed,
            instances=len(self._instances),
        )

    def record_message(
        self,
        principal: Principal,
        text: str,
        *,
        instance: str = DEFAULT_INSTANCE,
        session: str | None = None,
    ) -> None:
        """Put a conversation message (agent or simulated user) in the trajectory, so both
        sides of a dialogue are recorded beside the tool calls they led to."""
        inst = self.instance(instance)
        inst.trajectory.append(
            kind="message",
            wall_time=datetime.now(UTC),
            virtual_time=inst.clock.now(),
            role=principal.role,
            principal=principal.name,
            session=session,
            event="message",
            detail=text,
            state_hash=inst.state.hash(),
            changelog_id=inst.state.changes,
        )

    # -- helpers ----------------------------------------------------------------------------

    def _note(
        self, inst: Instance, principal: Principal, event: str, detail: str | None = None
    ) -> None:
        inst.trajectory.append(
            kind="control",
            wall_time=datetime.now(UTC),
            virtual_time=inst.clock.now(),
            role=principal.role,
            principal=principal.name,
            event=event,
            detail=detail,
            state_hash=inst.state.hash(),
            changelog_id=inst.state.changes,
        )


def _step_tool(tool: Tool) -> StepTool:
    info = tool.info()
    return StepTool(name=info.name, description=info.description, parameters=info.input_schema)


def _servers(env: Environment) -> list[dict[str, Any]]:
    """The environment and its composed children, each with the tools it serves."""
    out = []
    nested = {f"{alias}{SEPARATOR}" for alias, _ in env.children}
    own = [t for t in env.tools if not any(t.startswith(p) for p in nested)]
    out.append({"name": env.name, "namespace": "", "tools": sorted(own)})
    for alias, child in env.children:
        for server in _servers(child):
            namespace = f"{alias}{SEPARATOR}{server['namespace']}"
            tools = [f"{alias}{SEPARATOR}{t}" for t in server["tools"]]
            out.append({"name": server["name"], "namespace": namespace, "tools": tools})
    return out
