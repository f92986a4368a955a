"""The data plane of a gateway: `data/reset`, `data/add`, `data/get`.

On a document environment they act on the instance's State (and keep text and file parts
as they came). Where the scope is a server with a data plane of its own (a process
environment whose server has an AgentEnv card, or such a composed child under
`/svc/<namespace>/agentenv`), they are forwarded to that server, as upstream's gateway
forwards them to its backing servers, and the server's answer is mirrored back into the
State (when `server.mirror` is on), so state checks, diffs and hashes follow. `data/get` of
such a scope answers the server's own parts (`data_fetch`); `data_get` is always our
State's view. Resetting a composed environment as a whole resets its server children too.
Adding records for a server child through the parent's data plane is refused with the
address to use instead, since one request could not then be all or nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter, ValidationError

from agentenv.env.servers.base import ServerError
from agentenv.env.servers.mirror import mirror_into
from agentenv.gateway.errors import DEFAULT_INSTANCE, DataError
from agentenv.gateway.instance import Instance
from agentenv.gateway.results import unsendable
from agentenv.spec.wire import DataPart, Part
from agentenv.state import SEPARATOR, State, StateError, StateView

if TYPE_CHECKING:
    from agentenv.env.environment import Environment
    from agentenv.env.servers.runtime import ServerRuntime
    from agentenv.env.tool import Principal

_PARTS = TypeAdapter(list[Part])
_CHILD_PARTS = "agentenv.child_parts"  # Instance.metadata key: namespace -> stored parts


def _child_parts(inst: Instance, namespace: str) -> list[Part]:
    """The text and file parts added through one composed child's data plane."""
    table: dict[str, list[Part]] = inst.metadata.setdefault(_CHILD_PARTS, {})
    return table.setdefault(namespace, [])


class DataPlane:
    """The data-plane operations of a Gateway (see the module docstring)."""

    env: Environment

    if TYPE_CHECKING:  # provided by Gateway and ControlPlane

        def instance(self, instance_id: str = DEFAULT_INSTANCE) -> Instance: ...

        @staticmethod
        def _control(principal: Principal) -> None: ...

        def _note(
            self, inst: Instance, principal: Principal, event: str, detail: str | None = None
        ) -> None: ...

    def _data_servers(self, namespace: str) -> list[tuple[str, ServerRuntime]]:
        """The servers with a data plane inside a scope (`""` or `email__`), each with the
        prefix of its collections."""
        out = []
        for prefix, runtime in self.env.runtimes():  # prefixes end in the separator
            if runtime.has_data_plane and prefix.startswith(namespace):
                out.append((prefix, runtime))
        return out

    def _scope_server(self, namespace: str) -> ServerRuntime | None:
        """The server whose data plane the scope is, if it is one."""
        for prefix, runtime in self._data_servers(namespace):
            if prefix == namespace:
                return runtime
        return None

    async def _server_data(
        self, runtime: ServerRuntime, instance: str, method: str, params: dict[str, Any]
    ) -> Any:
        try:
            return await runtime.data(instance, method, params)
        except ServerError as exc:
            raise DataError(f"{runtime.describe()}: {method} failed: {exc}") from None

    async def _remirror(self, inst: Instance, prefix: str, runtime: ServerRuntime) -> None:
        """Make the State's part for one server hold what its `data/get` answers now."""
        if not runtime.spec.mirror:
            return
        got = await self._server_data(runtime, inst.id, "data/get", {})
        state: State | StateView = (
            StateView(inst.state, prefix.removesuffix(SEPARATOR)) if prefix else inst.state
        )
        with inst.state.transaction():
            mirror_into(state, got)

    async def data_reset(
        self, principal: Principal, *, instance: str = DEFAULT_INSTANCE, namespace: str = ""
    ) -> None:
        """`data/reset`: empty every collection and drop stored text and file parts.

        With a child's `namespace` (`email__`), only that child's collections and parts.
        Servers with a data plane in the scope are reset first, then mirrored again."""
        self._control(principal)
        inst = self.instance(instance)
        async with inst.lock:
            servers = self._data_servers(namespace)
            for _, runtime in servers:
                await self._server_data(runtime, inst.id, "data/reset", {})
            if namespace:
                for coll in inst.state.collections:
                    if coll.startswith(namespace):
                        inst.state.clear(coll)
                _child_parts(inst, namespace).clear()
            else:
                inst.state.clear()
                inst.parts.clear()
                inst.metadata.pop(_CHILD_PARTS, None)
            for prefix, runtime in servers:
                await self._remirror(inst, prefix, runtime)
            self._note(inst, principal, "data_reset", namespace or None)

    async def data_add(
        self,
        principal: Principal,
        parts: Iterable[Part],
        *,
        instance: str = DEFAULT_INSTANCE,
        namespace: str = "",
    ) -> int:
        """`data/add`: data parts upsert records (`{collection: [records]}`); text and file
        parts are kept as they are. All or nothing. Returns the number of records written
        (for a server's scope: the number of records sent to it).

        With a child's `namespace`, collections are named as the child names them."""
        self._control(principal)
        inst = self.instance(instance)
        parts = list(parts)
        server = self._scope_server(namespace)
        if server is not None:
            return await self._add_to_server(principal, inst, server, namespace, parts)
        written = 0
        servers = self._data_servers(namespace)
        async with inst.lock:
            with inst.state.transaction():
                for i, part in enumerate(parts):
                    if not isinstance(part, DataPart):
                        continue
                    for coll, rows in part.data.items():
                        where = f"parts[{i}].data.{coll}"
                        owner = next(
                            (p for p, _ in servers if (namespace + coll).startswith(p)), None
                        )
                        if owner is not None:
                            raise DataError(
                                f"{where}: {coll!r} is the data of server child "
                                f"{owner.removesuffix(SEPARATOR)!r}: add it through its own "
                                f"data plane (/svc/{owner.removesuffix(SEPARATOR)}/agentenv)"
                            )
                        if namespace + coll not in inst.state.collections:
                            raise DataError(f"{where}: unknown collection {coll!r}")
                        if not isinstance(rows, list):
                            rows = [rows]
                        # A record tools could never return is refused on arrival,
                        # not found out call by call as invalid results.
                        bad = unsendable(rows, where)
                        if bad is not None:
                            raise DataError(bad)
                        for j, row in enumerate(rows):
                            try:
                                inst.state.put(namespace + coll, row)
                            except StateError as exc:
                                raise DataError(f"{where}[{j}]: {exc}") from None
                            written += 1
            kept = inst.parts if not namespace else _child_parts(inst, namespace)
            kept.extend(p for p in parts if not isinstance(p, DataPart))
            where = f" ({namespace.removesuffix(SEPARATOR)})" if namespace else ""
            self._note(inst, principal, "data_add", f"{written} records, {len(parts)} parts{where}")
            return written

    async def _add_to_server(
        self,
        principal: Principal,
        inst: Instance,
        server: ServerRuntime,
        namespace: str,
        parts: list[Part],
    ) -> int:
        """`data/add` of a server's scope: the parts go to the server as they are (it says
        what they mean), then its data is mirrored back."""
        wire = [p.model_dump(mode="json", by_alias=True, exclude_none=True) for p in parts]
        sent = sum(
            len(rows) if isinstance(rows, list) else 1
            for p in parts
            if isinstance(p, DataPart)
            for rows in p.data.values()
        )
        async with inst.lock:
            await self._server_data(server, inst.id, "data/add", {"parts": wire})
            await self._remirror(inst, namespace, server)
            where = f" ({namespace.removesuffix(SEPARATOR)})" if namespace else ""
            self._note(inst, principal, "data_add", f"{sent} records to the server{where}")
        return sent

    def data_get(self, instance: str = DEFAULT_INSTANCE, *, namespace: str = "") -> list[Part]:
        """`data/get` of our State: one data part with every collection's records (a
        server's as last mirrored), then stored parts.

        With a child's `namespace`: that child's collections, named as the child names them,
        and the parts added through its own data plane."""
        inst = self.instance(instance)
        records = inst.state.committed().to_dict()
        if not namespace:
            return [DataPart(kind="data", data=records), *inst.parts]
        own = {c[len(namespace) :]: rows for c, rows in records.items() if c.startswith(namespace)}
        return [DataPart(kind="data", data=own), *_child_parts(inst, namespace)]

    async def data_fetch(
        self, instance: str = DEFAULT_INSTANCE, *, namespace: str = ""
    ) -> list[Part]:
        """What `data/get` answers on the wire: where the scope is a server with a data
        plane, the server's own parts (text and file parts included); else `data_get`."""
        server = self._scope_server(namespace)
        if server is None:
            return self.data_get(instance, namespace=namespace)
        inst = self.instance(instance)
        got = await self._server_data(server, inst.id, "data/get", {})
        raw = got.get("parts") if isinstance(got, dict) else got
        try:
            return _PARTS.validate_python(raw if isinstance(raw, list) else [raw])
        except ValidationError as exc:
            raise DataError(
                f"{server.describe()}: data/get answered parts that are not the protocol's: "
                f"{exc.errors()[0]['msg']}"
            ) from None
