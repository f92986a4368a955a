"""One isolated instance of an environment: its own state, clock, triggers, rules, record."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from agentenv.env.environment import Environment
from agentenv.gateway.access import AccessControl
from agentenv.gateway.clock import VirtualClock
from agentenv.gateway.trajectory import Trajectory
from agentenv.gateway.triggers import TriggerEngine
from agentenv.spec.wire import Part
from agentenv.state import Snapshot, State


@dataclass
class Instance:
    """Everything that belongs to one episode's copy of an environment.

    Calls on one instance are serialised by `lock`, so a transaction never interleaves
    with another call's writes; different instances run concurrently.
    """

    id: str
    state: State
    clock: VirtualClock
    access: AccessControl
    triggers: TriggerEngine
    trajectory: Trajectory = field(default_factory=Trajectory)
    parts: list[Part] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    metadata: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def create(
        cls, instance_id: str, env: Environment, snapshot: Snapshot | None = None
    ) -> Instance:
        """A fresh instance forked from the environment's seeded snapshot (triggers are
        registered by the gateway, which checks them against the tools)."""
        state = snapshot.fork() if snapshot is not None else env.new_state()
        state.keep_changelog()  # what GET /changes serves (seeding is not in it)
        return cls(
            id=instance_id,
            state=state,
            clock=VirtualClock.from_spec(env.clock),
            access=AccessControl(env.access),
            triggers=TriggerEngine(),
        )
