"""`ServerRuntime`: the live side of a process environment (a document with `server:`).

One runtime per loaded environment. At load, `discover()` prepares the backend, starts the
first child, lists its tools and reads its card and (where it has a data plane) its data;
that child is kept and serves the default instance. Gateways then `attach` each instance
(the pool hands it a child, per `server.isolation`) and `detach` it when it is dropped;
the remote tools (`tools.py`) `call` through here. A child whose card advertises the clock
extension is handed its instance's virtual clock before its first call (`clock.py`). Everything touching a child runs on the
children's loop (`loop.py`); the public coroutines hop there from whatever loop calls them.

Faults: a child that dies during a call fails that call with a ToolError naming the server
(and the last lines of its stderr) and is replaced at once (one reconnect); the call is
retried on the new child only when it never reached the old one. A call past its timeout
raises TimeoutError (the gateway's `timeout` error).

Instances are keyed by instance id; attaching the same id twice (two gateways over one
environment) counts references, and the child is released when the last one detaches.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from agentenv.env.servers import clock, loop
from agentenv.env.servers.base import (
    Child,
    ChildGone,
    DataMethodMissing,
    ServerBackend,
    ServerError,
    ToolAnswer,
    ToolListing,
)
from agentenv.env.servers.mirror import parts_of
from agentenv.env.servers.pool import ChildPool
from agentenv.env.servers.registry import backend_for
from agentenv.spec.server import ServerSpec

_keys = itertools.count(1)

DEFAULT_INSTANCE = "default"
"""The instance the discovery child serves (the gateway's own default instance)."""


def default_log_dir(env_name: str) -> Path:
    """Where the server processes' stderr logs go: `$AGENTENV_LOG_DIR/<env>` or
    `~/.cache/agentenv/logs/<env>/`."""
    root = os.environ.get("AGENTENV_LOG_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "agentenv" / "logs"
    return base / env_name


def _make_pool(
    backend: ServerBackend, spec: ServerSpec, log_dir: Path, parts: list[dict[str, Any]] | None
) -> ChildPool:
    """The pool for this spec; a backend that starts no processes (a `url`) is one child
    shared by every instance unless the document asks for `reset`."""
    mode = spec.isolation_mode
    if not backend.starts_processes and mode == "process":
        mode = "shared"
    return ChildPool(backend, mode, spec.pool, log_dir, seed_parts=parts)


class ServerRuntime:
    """The children of one process environment and the way calls reach them."""

    def __init__(
        self,
        spec: ServerSpec,
        base: Path,
        document: Path | None,
        env_name: str,
        *,
        log_dir: Path | None = None,
    ) -> None:
        self.spec = spec
        self.base = base
        self.document = document
        self.env_name = env_name
        self.log_dir = log_dir or default_log_dir(env_name)
        self.backend = backend_for(spec, base, document)
        self.listings: list[ToolListing] = []
        self.card: dict[str, Any] | None = None
        """The discovery child's AgentEnv card, if it has one."""
        self.parts: list[dict[str, Any]] | None = None
        """The discovery child's initial `data/get` parts (None: no data plane)."""
        self.has_data_plane = False
        self._pool: ChildPool | None = None
        self._attached: dict[str, int] = {}
        self._pending: dict[str, Future[Any]] = {}
        self._clocks: dict[str, clock.ClockSource] = {}
        self._clock_urls: dict[str, tuple[str, str]] = {}
        self._keys: dict[str, str] = {}
        """Instance id -> its key in the pool (see `attach`); inside, everything is by key."""
        self._closed = False

    # -- lifecycle ------------------------------------------------------------------------

    def describe(self) -> str:
        """The command line or URL, for messages."""
        return self.backend.describe()

    def discover(self) -> list[ToolListing]:
        """Start the first child, list its tools, read its card and data (sync; at load).
        ServerError naming what failed; nothing is left running then."""
        return loop.run(self._discover())

    async def _discover(self) -> list[ToolListing]:
        await self.backend.prepare()
        child = await self.backend.start(self.log_dir)
        try:
            self.listings = await asyncio.wait_for(child.list_tools(), self.spec.startup_timeout)
            self.card = child.card
            if child.has_data_plane:
                try:
                    got = await child.data("data/get", {})
                except DataMethodMissing:
                    got = None  # a card with a data-plane URL but no data handlers behind it
                else:
                    self.has_data_plane = True
                    self.parts = parts_of(got)
        except BaseException as exc:
            await child.close()
            if isinstance(exc, TimeoutError):
                raise ServerError(
                    f"{child.label}: tools/list took longer than {self.spec.startup_timeout:g} s"
                ) from None
            if isinstance(exc, ServerError):
                raise
            raise ServerError(f"{child.label}: {type(exc).__name__}: {exc}") from None
        try:
            pool = _make_pool(self.backend, self.spec, self.log_dir, self.parts)
            pool.adopt(DEFAULT_INSTANCE, child)
        except ServerError:
            await child.close()
            raise
        self._pool = pool
        self._attached[DEFAULT_INSTANCE] = 0
        loop.at_exit(self._close)
        return self.listings

    def attach(self, instance_id: str, clock_source: clock.ClockSource | None = None) -> None:
        """An instance begins: have a child ready for it (scheduled, never waited for).
        `clock_source` reads the instance's virtual time, for children that take it."""
        count = self._attached.get(instance_id, 0)
        self._attached[instance_id] = count + 1
        if count:
            return
        # Each attachment is its own key in the pool: an id dropped and made again at once
        # (agent-env check does it call after call) must not meet its predecessor's release,
        # which runs later on the children's loop.
        key = instance_id if instance_id == DEFAULT_INSTANCE else f"{instance_id}#{next(_keys)}"
        self._keys[instance_id] = key
        if clock_source is not None:
            self._clocks[key] = clock_source
        if self._closed or instance_id == DEFAULT_INSTANCE:
            return  # the default instance has the discovery child already
        self._pending[key] = loop.submit(self._acquire(key))

    def detach(self, instance_id: str) -> None:
        """An instance ends: its child goes back to the pool (or is stopped)."""
        count = self._attached.get(instance_id, 0)
        if count > 1:
            self._attached[instance_id] = count - 1
            return
        self._attached.pop(instance_id, None)
        key = self._keys.pop(instance_id, instance_id)
        self._clocks.pop(key, None)
        url = self._clock_urls.pop(key, None)
        if url is not None:
            clock.SERVICE.forget(url[1])
        pending = self._pending.pop(key, None)
        if self._closed or instance_id == DEFAULT_INSTANCE:
            return
        loop.submit(self._release(key, pending))

    async def _acquire(self, instance_id: str) -> Child:
        return await self.pool.acquire(instance_id)

    async def _release(self, instance_id: str, pending: Future[Any] | None) -> None:
        if pending is not None:
            with contextlib.suppress(BaseException):
                await asyncio.wrap_future(pending)
        await self.pool.release(instance_id)

    def close(self) -> None:
        """Stop every child of this environment (idempotent)."""
        if self._closed or self._pool is None:
            self._closed = True
            return
        loop.run(self._close())

    async def _close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._pool is not None:
            await self._pool.close()

    @property
    def pool(self) -> ChildPool:
        """The children's pool (there once `discover` has run)."""
        if self._pool is None:
            raise ServerError(f"{self.describe()}: the server was never started")
        return self._pool

    def stats(self) -> dict[str, int]:
        """The pool's counters (live, idle, started, ...)."""
        return dict(self._pool.stats()) if self._pool is not None else {}

    # -- calls ----------------------------------------------------------------------------

    async def call(
        self,
        instance_id: str,
        name: str,
        args: dict[str, Any],
        meta: dict[str, Any] | None,
        timeout: float,
    ) -> ToolAnswer:
        """`tools/call` on the instance's child, from any loop. ChildGone (a ServerError)
        when the child died with the call; TimeoutError past `timeout`."""
        key = self._keys.get(instance_id, instance_id)
        return await loop.call(self._call(key, name, args, meta, timeout))

    async def _child(self, instance_id: str) -> Child:
        if self._closed:
            raise ServerError(f"{self.describe()}: the environment's servers were stopped")
        pending = self._pending.pop(instance_id, None)
        if pending is not None:
            # A failed attach: acquire again below, and the pool says why if it fails again.
            with contextlib.suppress(ServerError):
                await asyncio.wrap_future(pending)
        return await self.pool.acquire(instance_id)

    async def _call(
        self,
        instance_id: str,
        name: str,
        args: dict[str, Any],
        meta: dict[str, Any] | None,
        timeout: float,
    ) -> ToolAnswer:
        child = await self._child(instance_id)
        if not child.alive:
            child = await self.pool.replace(instance_id)
        if child.clock_url is None:
            await self._sync_clock(instance_id, child)
        try:
            return await child.call_tool(name, args, meta, timeout)
        except ChildGone as gone:
            if gone.reached:
                # The one reconnect runs on its own, not in this call's time: the next call
                # of the instance awaits it.
                self._pending[instance_id] = asyncio.ensure_future(  # type: ignore[assignment]
                    self._reconnect(instance_id, gone)
                )
                raise
            replaced = await self._reconnect(instance_id, gone)
            if replaced is None:
                raise
            await self._sync_clock(instance_id, replaced)
            return await replaced.call_tool(name, args, meta, timeout)

    async def _sync_clock(self, instance_id: str, child: Child) -> None:
        """Give a child that advertises the clock extension the instance's clock URL, once
        the clock is armed (tried again at each call until then). A child without the
        extension is marked so it is never asked."""
        if not clock.wants_clock(child):
            child.clock_url = ""
            return
        source = self._clocks.get(instance_id)
        if source is None or source() is None:
            return
        if instance_id not in self._clock_urls:
            self._clock_urls[instance_id] = await clock.SERVICE.url_for(source)
        url = self._clock_urls[instance_id][0]
        child.clock_url = url if await clock.sync_child(child, url) else ""

    async def _reconnect(self, instance_id: str, gone: ChildGone) -> Child | None:
        """The one reconnect after a child died: a new child for the instance, or None
        (the failure is added to `gone`'s message)."""
        try:
            return await self.pool.replace(instance_id)
        except ServerError as exc:
            gone.args = (f"{gone}\nrestarting it failed: {exc}",)
            return None

    async def data(
        self, instance_id: str, method: str, params: dict[str, Any] | None = None
    ) -> Any:
        """A data-plane request (`data/reset`, `data/add`, `data/get`) to the instance's
        child, from any loop; ServerError when it has none or refuses."""
        key = self._keys.get(instance_id, instance_id)
        return await loop.call(self._data(key, method, params))

    async def _data(self, instance_id: str, method: str, params: dict[str, Any] | None) -> Any:
        child = await self._child(instance_id)
        return await child.data(method, params or {})

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError(
            f"a process environment's runtime ({self.describe()}) cannot be pickled: "
            "load the environment where it runs"
        )
